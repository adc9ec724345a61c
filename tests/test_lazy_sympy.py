"""SymPy on first use: ``symformer derive`` runs without it; the example's exact numbers
(python-flint rationals) behave as the SymPy numbers they stand for."""

from __future__ import annotations

import ast
import copy
import pickle
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import sympy
from flint import arb, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

import symformer
from symformer.engine.arbmath import constant_balls, precision, rational_ball, sympy_to_arb
from symformer.example.exact import ExactMatrix, ExactNumber
from symformer.example.literals import exact_number, exact_rational, exact_scalar

fractions = st.fractions(min_value=-1000, max_value=1000, max_denominator=10**6)


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_derive_does_not_import_sympy():
    """The whole ``derive`` command (load, graph, balls, rounding, the tables) without
    SymPy: a SymPy import would fail, as ``None`` stands in ``sys.modules``."""
    out = _run("import sys; sys.modules['sympy'] = None\n"
               "from symformer.cli import main\n"
               "status = main(['derive', '--decimals', '4'])\n"
               "print('status', status)")
    assert "status 0" in out
    # the first query's second entry: W_Q's column 0 times the input row 1 (see the
    # built-in file): sin(1)/4 + cos(1)/4 + 5/4... read from an independent float pass
    assert "layer1.head1.Q" in out


def test_import_symformer_leaves_sympy_unimported():
    out = _run("import sys, symformer, symformer.cli.derive\n"
               "print('sympy' in sys.modules)")
    assert out.strip() == "False"


def test_derive_values_agree_with_sympy_closed_forms():
    """With SymPy unused, the printed values are still the closed forms' (mpmath via
    SymPy's evalf on the closed form, an independent route)."""
    from symformer import derive, load_example

    g = derive(load_example())
    q = g["layer1.head1.Q"]
    printed = q.values(decimals=10)
    for i in range(q.shape[0]):
        for j in range(q.shape[1]):
            expected = sympy.N(q.closed_form(i, j), 30)
            assert abs(sympy.Rational(printed[i][j]) - expected) <= sympy.Rational(1, 2 * 10**10)


@given(st.lists(st.lists(fractions, min_size=3, max_size=3), min_size=1, max_size=4))
@settings(max_examples=50, deadline=None)
def test_exact_matrix_is_the_sympy_matrix(rows):
    m = ExactMatrix([[fmpq(v.numerator, v.denominator) for v in row] for row in rows])
    expected = sympy.Matrix([[sympy.Rational(v.numerator, v.denominator) for v in row]
                             for row in rows])
    assert m.shape == expected.shape and (m.rows, m.cols) == (expected.rows, expected.cols)
    with precision(200):  # balls read from the rationals, before SymPy is built
        balls = constant_balls(m)
        for row, values in zip(balls, rows):
            for ball, v in zip(row, values):
                assert ball.contains(arb(fmpq(v.numerator, v.denominator)))
                assert ball.rad() < arb(2) ** -190 * (1 + abs(float(v)))
    assert m == expected and expected == m.sympy
    assert m.T == expected.T and m[0, 0] == expected[0, 0]
    assert list(m) == list(expected) and len(m) == len(expected)
    assert 2 * m == 2 * expected and m + m == expected + expected
    assert pickle.loads(pickle.dumps(m)) == expected
    assert copy.deepcopy(m) == expected


def test_a_changed_sympy_matrix_holds_the_values():
    """Once built, the SymPy matrix is the value: a change in place reaches the balls."""
    m = ExactMatrix([[fmpq(1), fmpq(2)]])
    with precision(64):
        assert constant_balls(m)[0][1] == arb(2)
    m[0, 1] = sympy.Rational(1, 4)
    assert m.entries() is None  # no fmpq entries kept beside the changed matrix
    with precision(64):
        assert constant_balls(m)[0][1].contains(arb(fmpq(1, 4)))
    assert pickle.loads(pickle.dumps(m)) == sympy.Matrix([[1, sympy.Rational(1, 4)]])


@given(fractions, fractions)
@settings(max_examples=100, deadline=None)
def test_exact_number_is_the_sympy_rational(a, b):
    x, y = (ExactNumber(fmpq(v.numerator, v.denominator)) for v in (a, b))
    sx = sympy.Rational(a.numerator, a.denominator)
    sy = sympy.Rational(b.numerator, b.denominator)
    assert (x == y) == (a == b) and (x < y) == (a < b) and (x >= y) == (a >= b)
    assert (x == sx) and (x < sy) == (a < b) and bool(x) == bool(a)
    assert str(x) == str(sx) and f"{x}" == str(sx) and (x.p, x.q) == (sx.p, sx.q)
    assert hash(x) == hash(Fraction(a)) and float(x) == float(a)
    assert x + y == sx + sy and x * sympy.Symbol("h") == sx * sympy.Symbol("h")
    assert -x == -sx and sympy.sympify(x) == sx and x.is_zero == sx.is_zero
    assert pickle.loads(pickle.dumps(x)) == x
    with precision(100):
        assert rational_ball(x).contains(arb(fmpq(a.numerator, a.denominator)))
        assert sympy_to_arb(x).contains(rational_ball(sx))


def test_numbers_read_exactly():
    """Decimal and fraction text, independent of the SymPy route."""
    cases = {"0.1": Fraction(1, 10), "-3/4": Fraction(-3, 4), "3/-4": Fraction(-3, 4),
             "1e-6": Fraction(1, 10**6), "2.5e3": Fraction(2500), ".5": Fraction(1, 2)}
    for text, expected in cases.items():
        value = exact_rational(text, "x")
        assert Fraction(int(value.p), int(value.q)) == expected
        assert exact_number(text, "x") == sympy.Rational(expected.numerator,
                                                         expected.denominator)
        assert exact_scalar(text, "x") == exact_number(text, "x")
    assert exact_rational(7, "x") == 7


def _top_level_sympy(tree: ast.Module) -> list[int]:
    """Lines where a module imports SymPy itself or reads ``sympy.X`` when it is imported:
    module-level statements, class bodies and bases, decorators, default values (not
    function bodies, not annotations, not ``if TYPE_CHECKING:``)."""
    found: list[int] = []

    def reads(node: ast.AST) -> list[int]:
        return [n.lineno for n in ast.walk(node) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == "sympy"]

    def visit(node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            found.extend(node.lineno for a in node.names if a.name.split(".")[0] == "sympy")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "sympy":
                found.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                if d is not None:
                    found.extend(reads(d))
        elif isinstance(node, ast.ClassDef):
            for d in [*node.bases, *node.decorator_list]:
                found.extend(reads(d))
            for s in node.body:
                visit(s)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                found.extend(reads(node.value))
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            pass
        else:
            found.extend(reads(node))

    for statement in tree.body:
        visit(statement)
    return found


def test_the_scan_finds_top_level_sympy():
    tree = ast.parse("import sympy\nX = sympy.Integer(1)\ndef f(a=sympy.S.One):\n"
                     "    return sympy.Integer(2)\nclass C(sympy.Symbol):\n    pass\n")
    assert _top_level_sympy(tree) == [1, 2, 3, 5]


#: Modules that define subclasses of SymPy's classes, so need SymPy when imported; only
#: commands that print SymPy expressions import them (not ``derive``: tested above).
SUBCLASS_SYMPY = {
    "lazy.py": "the lazy module itself",
    "latex/numbers.py": "TextbookPrinter subclasses SymPy's LatexPrinter",
}


def test_no_module_imports_sympy_when_it_is_imported():
    """Every module of the package takes SymPy from :mod:`symformer.lazy` and reads no
    attribute of it at import time (the rule that keeps ``derive`` fast to start)."""
    package = Path(symformer.__file__).parent
    offenders = {}
    for path in sorted(package.rglob("*.py")):
        if str(path.relative_to(package)) in SUBCLASS_SYMPY:
            continue
        lines = _top_level_sympy(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[str(path.relative_to(package))] = lines
    assert not offenders, f"import SymPy lazily (from symformer.lazy import sympy): {offenders}"
