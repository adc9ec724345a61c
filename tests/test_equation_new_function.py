"""A newly registered activation's equations, read back by ``check`` (issue "Check an
equation as its author wrote it", What to build 2: one table of function names).

The activation ``test_eqir_poly3`` (a = h + h^3, named ``\\operatorname{Poly^3}``) is
defined here at run time, as a new operation module would define it, and removed
afterwards; its name starts with ``test_`` so that it never clashes with a shipped one.
Every equation ``export`` prints for its stages -- the index form of ``equations.json``
and the matrix form of the notes (``A = \\operatorname{Poly^3}(H)``, ``\\partial L /
\\partial H = \\partial L/\\partial A \\odot \\operatorname{Poly^3}'(H)``) -- read back as
an equation claim bound to its stage, holds on the example and on random examples;
and each mutation (a flipped sign, a dropped term, the derivative's factor 3 dropped, a
swapped index, another activation's name) fails.  The engine's stages are first
checked against float64 of h + h^3 and (1 + 3 h^2) dL/da, so "holds" is about the
right numbers.  The printers and the index language refuse a function the table does
not hold, rather than print a guess.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import pytest

from symformer import load_example
from symformer.blocks import derive
from symformer.blocks.backward import with_gradients
from symformer.equations.export import stage_entry
from symformer.equations.functions import functions
from symformer.equations.stage import stage_equation
from symformer.errors import InputError
from symformer.registry import OPERATIONS
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge

NAME = "test_eqir_poly3"
TEXT = (resources.files("symformer.examples") / "course_module.toml").read_text()
TEXT = TEXT.replace('eps = "1e-5"\n', f'eps = "1e-5"\nactivation = "{NAME}"\n', 1) + (
    '\n[loss]\nkind = "mse"\ntarget = [[0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 0.5, 0], '
    '[0, 0, 0, 0.5]]\n')
FORWARD, BACKWARD = "layer1.ffn.activation", "grad.layer1.ffn.hidden"
#: The stage whose matrix form applies the function: F = Poly^3(Y W_1 + b_1) W_2 + b_2.
OUTPUT = "layer1.ffn.output"


def _define() -> type:
    """a = h + h^3, element-wise: the whole operation, as ops/<name>.py would hold it."""
    from symformer.engine.arbmath import ArbMatrix
    from symformer.equations.ir import IndexEquation
    from symformer.notation_types import Notation
    from symformer.ops.calculus import Arithmetic
    from symformer.ops.elementwise import Smooth

    def poly3(h):
        return h + h ** 3

    @dataclass(frozen=True)
    class Poly3(Smooth):
        """``h + h^3`` element-wise."""

        notation: Notation | None = None

        name = NAME
        reference_function = poly3
        default_notation = Notation("a", "a", "FFN activation (h + h^3)")
        activation_key = NAME
        function_name = "Poly^3"
        definition = ("Poly3 adds the cube: ", r"\operatorname{Poly^3}(x) = x + x^3", ".")

        def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
            return IndexEquation(("a[i, j] = h[i, j] + h[i, j] ** 3",),
                                 {"a": "out", "h": "in0"})

        def sympy(self, args: Sequence[Any]) -> Any:
            return args[0].applyfunc(lambda h: h + h ** 3)

        def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
            return [[h + h ** 3 for h in row] for row in args[0]]

        def slope(self, h: Any, num: Arithmetic) -> Any:
            """1 + 3 h^2."""
            return 1 + 3 * h * h

        def backward_function(self, wrt: int | str):
            return lambda h, g: g * (1 + 3 * h ** 2)

    return Poly3


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    """The operation registered (for this module only) and a judge of an example file
    using it (a file, so that random examples are drawn from it)."""
    cls = _define()
    try:
        path = tmp_path_factory.mktemp("poly3") / "poly3.toml"
        path.write_text(TEXT)
        example = load_example(str(path))
        checker = Checker(example)
        yield Judge(example, checker.derivation, checker.causal)
    finally:
        OPERATIONS.pop(cls.name, None)


def _floats(g, name: str) -> np.ndarray:
    return np.array([[float(v.mid()) for v in row] for row in g.evaluate(128)[name]])


def _exported(judge: Judge, stage: str) -> list[str]:
    """The equations ``export`` prints for the stage: equations.json's lines and the
    notes' matrix form."""
    from symformer.latex.matrix_form import backward_lines, equation_lines

    g = with_gradients(derive(judge.example))
    entry = stage_entry(stage_equation(g[stage]))
    out = [line["latex"] for part in entry["parts"] for line in part["lines"] + part["where"]]
    if "sum" in entry:
        out.append(entry["sum"]["latex"])
    matrix = backward_lines(g[stage]) if stage.startswith("grad.") \
        else equation_lines([g[stage]])
    return out + [f"{lhs} = {rhs}" for lhs, rhs in matrix]


def _verdicts(judge: Judge, stage: str, latex: str) -> set[str]:
    try:
        found = judge.check(EquationClaim("rt", stage, latex, examples=2, source="rt"))
    except InputError as error:
        return {f"cannot be read: {error}"}
    return {link.status for link in found.links}


def test_the_stages_are_h_plus_h_cubed_in_float64(judge):
    g = with_gradients(derive(judge.example))
    h = _floats(g, "layer1.ffn.hidden")
    assert np.allclose(_floats(g, FORWARD), h + h ** 3, rtol=1e-13, atol=1e-15)
    da = _floats(g, "grad." + FORWARD)
    assert np.allclose(_floats(g, BACKWARD), (1 + 3 * h ** 2) * da, rtol=1e-12, atol=1e-15)


def test_its_names_are_in_the_one_function_table(judge):
    fn = functions().by_word["Poly^3"]
    assert fn.key == NAME and fn.latex == r"\operatorname{Poly^3}" and fn.derivative


@pytest.mark.parametrize("stage", [FORWARD, BACKWARD, OUTPUT])
def test_every_exported_equation_reads_back_and_holds(judge, stage):
    lines = _exported(judge, stage)
    assert lines and (stage == FORWARD or any(r"\operatorname{Poly^3}" in line
                                              for line in lines))  # the matrix form
    for latex in lines:
        assert _verdicts(judge, stage, latex) == {"holds"}, latex


#: (stage, the printed text, its mutation): what an author gets wrong.
MUTATIONS = [
    (OUTPUT, r"\operatorname{Poly^3}\bigl(", r"\operatorname{ReLU}\bigl("),
    (FORWARD, " + ", " - "),
    (FORWARD, "^{3}", "^{2}"),
    (FORWARD, "h_{i,j} + ", ""),
    (BACKWARD, "3 h_{i,j}", "h_{i,j}"),
    (BACKWARD, "\\operatorname{Poly^3}'", "\\operatorname{Poly^3}"),
    (BACKWARD, "3 h_{i,j}^{2}", "3 h_{i,0}^{2}"),
    (BACKWARD, "\\bigl(H\\bigr)", "\\bigl(A\\bigr)"),
]


@pytest.mark.parametrize("stage, old, new", MUTATIONS)
def test_mutations_never_hold(judge, stage, old, new):
    mutated = [line.replace(old, new, 1) for line in _exported(judge, stage) if old in line]
    assert mutated, f"no exported equation of {stage} holds {old!r}"
    for latex in mutated:
        assert "holds" not in _verdicts(judge, stage, latex), latex


def test_printers_and_index_language_refuse_an_unknown_function():
    from symformer.equations.ir import EquationError, IndexEquation
    from symformer.equations.render import latex, text

    call = ast.parse("softplus(h)", mode="eval").body
    with pytest.raises(ValueError, match="softplus"):
        latex(call, {})
    with pytest.raises(ValueError, match="softplus"):
        text(call, {})
    with pytest.raises(EquationError, match="softplus"):
        _ = IndexEquation(("a[i, j] = softplus(h[i, j])",), {"a": "out", "h": "in0"}).statements
