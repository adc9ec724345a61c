"""The student's path: every asked entry recomputed from the numbers a student writes.

A student computes an asked stage from the earlier asked answers *as they wrote them*
(rounded to the sheet's ``decimals``) and from the given tables as the sheet prints
them (``decimals + 2`` places).  The value of that line, correctly rounded, is the
answer ``grade`` accepts as reader rounding; it may differ from the exact value's
rounding (from the sheet's 2-decimal q and k, u = 4.14*4.43 + 1.21*4.56 = 23.8758 gives
23.88 where the exact value gives 23.84).  The key prints both, and ``key.json`` gives
each entry's line as plain arithmetic (:func:`symformer.worked.to_json.plain`).

Each entry's line is the stage's local formula with every input symbol replaced by the
student's number: a worked-line tree (:mod:`symformer.worked.model`) whose value is
exact (fractions) or enclosed in balls (:mod:`symformer.worked.evaluate`).  The same
function builds the lines for the draw's certified check (:mod:`symformer.exercise.fair`:
every line's value clears the rounding margin) and for the key, from the same balls.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

from flint import arb

from symformer.engine import Derivation, Stage
from symformer.engine.arbmath import NEG_INF, ArbMatrix, precision
from symformer.engine.rounding import round_fraction
from symformer.exercise.settings import GIVEN_EXTRA_DECIMALS
from symformer.lazy import sympy
from symformer.ops.base import Notation
from symformer.verify.chain import apply, round_values
from symformer.verify.chain import ball as as_ball
from symformer.worked.build import symbol
from symformer.worked.evaluate import ball
from symformer.worked.from_sympy import Converter
from symformer.worked.model import Const, Neg, Node, Num

#: Bits of the balls a line's value is enclosed in (far below any margin).
PRECISION = 192
_HALF = arb(1) / 2

#: A table as a student has it: exact rationals, None for a masked (-inf) score.
Table = list[list[Fraction | None]]


@dataclass(frozen=True)
class PathEntry:
    """One asked entry on the student's path (``line`` None: a masked score)."""

    stage: str
    row: int
    col: int
    line: Node | None       # the formula over the student's numbers
    symbolic: Node | None   # the same formula over the inputs' notation (no weights)
    exact: str              # the exact value correctly rounded (certified), or "-inf"
    student: str | None     # the line's value correctly rounded; None: undecided


def student_tables(g: Derivation, name: str, asked: list[str], decimals: int,
                   balls: dict[str, ArbMatrix]) -> dict[str, tuple[Table, int]] | None:
    """The input tables of asked stage ``name`` as a student has them, with their
    places: asked inputs at ``decimals``, given ones at ``decimals + 2`` (certified
    roundings of ``balls``); None when a rounding is undecided."""
    out: dict[str, tuple[Table, int]] = {}
    for source in g[name].inputs:
        places = decimals if source in asked else decimals + GIVEN_EXTRA_DECIMALS
        with precision(PRECISION):
            rounded = round_values([[None if b is NEG_INF else b for b in row]
                                    for row in balls[source]], places)
        if rounded is None:
            return None
        out[source] = ([[None if b is NEG_INF else Fraction(int(r.p), int(r.q))
                         for b, r in zip(row, values)]
                        for row, values in zip(balls[source], rounded)], places)
    return out


def path_balls(g: Derivation, name: str, tables: dict[str, tuple[Table, int]]
               ) -> list[list[arb | None]]:
    """Every entry of asked stage ``name`` on the student's path as a ball (None: masked),
    computed by the operation on ``tables`` (:func:`student_tables`) without building
    the lines: what the draw's check needs."""
    inputs = [[[NEG_INF if v is None else sympy.Rational(v.numerator, v.denominator)
                for v in row] for row in tables[source][0]] for source in g[name].inputs]
    with precision(PRECISION):
        values = apply(g[name].op, inputs)
        return [[None if e is None or e is NEG_INF else
                 (e if isinstance(e, arb) else as_ball(Fraction(int(e.p), int(e.q))))
                 for e in row] for row in values]


def _fixed(value: Fraction, places: int) -> str:
    return round_fraction(value, decimals=places).fixed()


def stage_path(g: Derivation, name: str, tables: dict[str, tuple[Table, int]],
               decimals: int) -> list[list[PathEntry]]:
    """Every entry of asked stage ``name`` recomputed from ``tables``
    (:func:`student_tables`), rounded to ``decimals`` beside the exact value's rounding."""
    stage = g[name]
    exact = stage.values(decimals=decimals)
    formulas, constants = _named_formulas(g, stage)
    position = {s: (k, r, c) for k, source in enumerate(stage.inputs)
                for r in range(g[source].shape[0]) for c in range(g[source].shape[1])
                for s in [g.symbols(source)[r, c]]}
    return [[_entry(g, stage, i, j, formulas[i, j], tables, position, constants, exact[i][j],
                    decimals, _other_rows(g, formulas.row(i), i))
             for j in range(stage.shape[1])]
            for i in range(stage.shape[0])]


def _named_formulas(g: Derivation, stage: Stage
                    ) -> tuple[sympy.Matrix, dict[sympy.Symbol, tuple[Node, Node]]]:
    """The stage's formulas with its named constants (a projection's W and b) as symbols,
    so a line reads x_1 (W_Q)_{1,0} + ... = 2.8415*(-0.5) + ..., and each constant
    symbol's (notation, value) leaves; an exact 0 entry drops its term."""
    op = stage.op
    names = op.named_constants()
    if not names:
        return stage.local, {}
    replace, zeros, constants = {}, {}, {}
    for field, notation in names.items():
        value = getattr(op, field)
        if value is None or not hasattr(value, "shape"):
            continue  # a scalar (eps) prints as its number
        rows, cols = value.shape

        def entry(k: int, j: int, field=field, notation=notation, value=value
                  ) -> sympy.Symbol:
            s = sympy.Symbol(f"const:{field}[{k},{j}]")
            index = (max(k, j),) if 1 in value.shape else (k, j)
            shown = Notation(f"({notation.latex})", notation.text, notation.title) \
                if "_" in notation.latex else notation
            v = sympy.Rational(value[k, j])
            constants[s] = (symbol(shown, index),
                            Const(v) if v >= 0 else Neg(Const(-v)))
            if v == 0:
                zeros[s] = 0
            return s
        replace[field] = sympy.Matrix(rows, cols, entry)
    named = dataclasses.replace(op, **replace)
    formulas = named.sympy([g.symbols(name) for name in stage.inputs])
    return formulas.xreplace(zeros), constants


def _entry(g: Derivation, stage: Stage, i: int, j: int, formula: sympy.Expr,
           tables: dict[str, tuple[Table, int]], position: dict,
           constants: dict[sympy.Symbol, tuple[Node, Node]], exact: str,
           decimals: int, indexed: set[str]) -> PathEntry:
    def number(s: sympy.Symbol) -> Fraction | None:
        source, r, c = g.owner(s)
        return tables[source][0][r][c]

    masked = {s: -sympy.oo for s in formula.free_symbols
              if s not in constants and number(s) is None}
    if masked:
        formula = formula.xreplace(masked)
    if formula.is_infinite:
        return PathEntry(stage.name, i, j, None, None, exact, exact)

    def leaf(s: sympy.Symbol) -> Node:
        if s in constants:
            return constants[s][1]
        source, r, c = g.owner(s)
        value, places = tables[source][0][r][c], tables[source][1]
        return Num(_fixed(value, places), value)

    def notation(s: sympy.Symbol) -> Node:
        if s in constants:
            return constants[s][0]
        source, r, c = g.owner(s)
        shape = g[source].shape
        index = ((r,) if shape[0] > 1 and source in indexed else ()) \
            + ((c,) if shape[1] > 1 else ())
        return symbol(g[source].op.symbol, index)

    def tree(leaves) -> Node:
        convert = Converter(leaves, lambda s: position.get(s))
        return stage.op.worked_tree(formula, convert) or convert(formula)

    line = tree(leaf)
    with precision(PRECISION):
        value = ball(line)
    return PathEntry(stage.name, i, j, line, tree(notation), exact,
                     rounded_text(value, decimals))


def _other_rows(g: Derivation, formulas: sympy.Matrix, i: int) -> set[str]:
    """The input stages that row ``i``'s formulas read in a row other than ``i``: their
    symbols carry the row index (k_{1,0}), for every entry of the row alike."""
    return {g.owner(s)[0] for f in formulas for s in f.free_symbols
            if not str(s).startswith("const:") and g.owner(s)[1] != i}


def rounded_text(value: arb, decimals: int) -> str | None:
    """The correct rounding of a ball at ``decimals`` places, None when undecided."""
    with precision(PRECISION):
        rounded = round_values([[value]], decimals)
    if rounded is None:
        return None
    r = rounded[0][0]
    return _fixed(Fraction(int(r.p), int(r.q)), decimals)
