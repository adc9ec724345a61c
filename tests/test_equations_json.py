"""equations.json: every printed equation's plain form, evaluated at every entry, gives
the values ``derive --json`` prints (built-in and llama_style).

The plain forms are OUR generated text (never user input); Python's eval runs them here,
in the test only, with math's functions and each array bound as docs/export.md says.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from symformer.cli import main

EXAMPLES = Path(__file__).parent.parent / "symformer" / "examples"
FUNCTIONS = {"exp": math.exp, "sqrt": math.sqrt, "tanh": math.tanh, "sin": math.sin,
             "cos": math.cos, "log": math.log, "erf": math.erf, "max": max, "sum": sum,
             "range": range, "pi": math.pi, "inf": math.inf}


def number(text: str) -> float:
    if text in ("-inf", "-oo"):
        return -math.inf
    try:
        return float(Fraction(text))
    except ValueError:
        import sympy
        return float(sympy.sympify(text))


class Array:
    """A matrix indexed a[i, j]; one index: a column's row or a row's column."""

    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    def __getitem__(self, index):
        if isinstance(index, tuple):
            i, j = index
            assert 0 <= i < len(self.rows) and 0 <= j < len(self.rows[0]), index
            return self.rows[i][j]
        if len(self.rows[0]) == 1:
            return self.rows[index][0]
        assert len(self.rows) == 1
        return self.rows[0][index]


def _lhs_entries(target: ast.expr, env: dict, shape: tuple[int, int], ranges: dict):
    parts = [] if isinstance(target, ast.Name) else (
        target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice])
    free = sorted({n.id for p in parts for n in ast.walk(p) if isinstance(n, ast.Name)}
                  - set(env))
    limits = [eval(ranges[n], dict(env)) if n in ranges else max(shape) + 1 for n in free]
    for values in itertools.product(*(range(limit) for limit in limits)):
        local = dict(zip(free, values))
        index = [eval(compile(ast.Expression(p), "<lhs>", "eval"), {**env, **local})
                 for p in parts]
        if len(index) == 2:
            key = tuple(index)
        elif len(index) == 1:
            key = (index[0], 0) if shape[1] == 1 else (0, index[0])
        else:
            key = (0, 0)
        if 0 <= key[0] < shape[0] and 0 <= key[1] < shape[1]:
            yield key, local


def _part_values(part: dict, stages: dict, shape: tuple[int, int]) -> dict:
    """Every entry the part's lines define, evaluated from the plain forms."""
    env = dict(FUNCTIONS)
    env.update(part["sizes"])
    env.update({k: number(v) for k, v in part["scalars"].items()})
    for name, source in part["arrays"].items():
        if "contribution" in source:
            continue  # the part's own left-hand side
        rows = source.get("value") or source.get("constant") or \
            stages[source["stage"]]["values"]
        convert = (lambda v: int(Fraction(v))) if "constant" in source else number
        env[name] = Array([[convert(v) for v in row] for row in rows])
        if len(rows) == 1 and len(rows[0]) == 1:
            env[name] = convert(rows[0][0])
    out = {}
    for line in part["lines"]:
        statement = ast.parse(line["plain"]).body[0]
        rhs = compile(ast.Expression(statement.value), "<rhs>", "eval")
        for key, local in _lhs_entries(statement.targets[0], env, shape, part["ranges"]):
            out[key] = eval(rhs, {"__builtins__": {}, **env, **local})
    return out


def check(equations: dict, stages: dict) -> int:
    """Each stage's entries from its parts (summed: a gradient's contributions) against
    the stage's values; returns the entries checked."""
    checked = 0
    for record in equations["equations"]:
        values = [[number(v) for v in row] for row in stages[record["stage"]]["values"]]
        shape = (len(values), len(values[0]))
        total: dict = {}
        for part in record["parts"]:
            for key, value in _part_values(part, stages, shape).items():
                total[key] = total.get(key, 0) + value
        assert len(total) == shape[0] * shape[1], record["stage"]
        for (i, j), got in total.items():
            want = values[i][j]
            assert got == want or math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), \
                (record["stage"], (i, j), record["parts"][0]["lines"][0]["plain"], got, want)
            checked += 1
    return checked


@pytest.mark.parametrize("example", [[], [str(EXAMPLES / "llama_style.toml")]],
                         ids=["builtin", "llama_style"])
def test_equations_json_reproduces_derive_and_backward_json(example, tmp_path, capsys):
    """The built-in example has a [loss]: its gradient stages are checked against
    backward --json, each the sum of its printed contributions."""
    assert main(["export", *example, "--format", "json", "--out", str(tmp_path),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["derive", *example, "--json", "--digits", "20"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    if not example:
        assert main(["backward", "--json", "--digits", "20"]) == 0
        stages.update(json.loads(capsys.readouterr().out)["stages"])
    equations = json.loads((tmp_path / "equations.json").read_text())
    assert {r["stage"] for r in equations["equations"]} <= set(stages)
    assert len(equations["equations"]) >= 20
    if not example:
        assert any(len(r["parts"]) > 1 for r in equations["equations"])
    assert check(equations, stages) > 100
