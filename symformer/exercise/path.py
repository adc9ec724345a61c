"""The student's path: every asked entry recomputed from the numbers a student writes.

A student computes an asked stage from the earlier asked answers *as they wrote them*
(rounded to the sheet's ``decimals``: the student's own chain, :func:`student_chain`)
and from the given tables as the sheet prints them (at ``decimals``, or ``decimals +
2`` when every entry is asked).  The value of that line, correctly rounded, is the
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
from symformer.exercise.cells import entries_of
from symformer.exercise.margin import clears_margin, margin_ball
from symformer.exercise.settings import given_places
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.verify.chain import apply, round_values
from symformer.verify.chain import ball as as_ball
from symformer.worked.build import symbol
from symformer.worked.evaluate import ball
from symformer.worked.from_sympy import Converter
from symformer.worked.model import Add, Const, Div, Neg, Node, Num

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
    exps: ExpRow | None = None  # a softmax entry: its row's rounded exponentials


def student_tables(g: Derivation, name: str, asked: list[str], decimals: int,
                   balls: dict[str, ArbMatrix], chain: dict[str, Table] | None = None
                   ) -> dict[str, tuple[Table, int]] | None:
    """The input tables of asked stage ``name`` as a student has them, with their
    places: asked inputs at ``decimals`` (from ``chain``, the student's own earlier
    answers, where given: :func:`student_chain`), given ones as the sheet prints them
    (:func:`~symformer.exercise.settings.given_places`; certified roundings of
    ``balls``); None when a rounding is undecided."""
    out: dict[str, tuple[Table, int]] = {}
    for source in g[name].inputs:
        places = decimals if source in asked else given_places(asked, decimals)
        if chain is not None and source in chain:
            out[source] = (chain[source], places)
            continue
        with precision(PRECISION):
            rounded = round_values([[None if b is NEG_INF else b for b in row]
                                    for row in balls[source]], places)
        if rounded is None:
            return None
        out[source] = ([[None if b is NEG_INF else Fraction(int(r.p), int(r.q))
                         for b, r in zip(row, values)]
                        for row, values in zip(balls[source], rounded)], places)
    return out


#: Significant digits of the exponentials a softmax row's worked lines print (the
#: largest of the row; the others at the same decimals, never fewer than the sheet's).
EXP_DIGITS = 4


@dataclass(frozen=True)
class ExpRow:
    """A softmax row as the key works it: each e^{s_j} rounded, their sum Σ."""

    scores: tuple[tuple[int, str], ...]     # (key position, s_j as the student has it)
    exps: tuple[tuple[int, str], ...]       # (key position, e^{s_j} rounded)
    total: str                              # Σ, the exact sum of the rounded exponentials
    places: int                             # decimals of the exponentials and of Σ


def exp_row(scores: list[Fraction | None], decimals: int) -> ExpRow | None:
    """The exponentials of one row of scores (None: masked) rounded to the same decimals,
    :data:`EXP_DIGITS` significant digits for the largest; None when undecided."""
    live = [(j, v) for j, v in enumerate(scores) if v is not None]
    with precision(PRECISION):
        exps = [(j, as_ball(v).exp()) for j, v in live]
        largest = max(float(e.mid()) for _, e in exps)
        digits = len(str(int(largest))) if largest >= 1 else 1 - _leading_zeros(largest)
        places = max(decimals, EXP_DIGITS - digits)
        rounded = round_values([[e for _, e in exps]], places)
    if rounded is None:
        return None
    values = [Fraction(int(r.p), int(r.q)) for r in rounded[0]]
    return ExpRow(tuple((j, _fixed(v, decimals)) for j, v in live),
                  tuple((j, _fixed(v, places)) for (j, _), v in zip(live, values)),
                  _fixed(sum(values, Fraction(0)), places), places)


def _leading_zeros(x: float) -> int:
    """How many zeros follow the decimal point of ``0 < x < 1`` (0.0123 -> 1)."""
    k = 0
    while x < 0.1 and k < 30:
        x *= 10
        k += 1
    return k


def exp_line(row: ExpRow, j: int) -> Node:
    """α_j over the rounded exponentials: e_j / (e_0 + e_1 + ...)."""
    exps = dict(row.exps)
    num = Num(exps[j], Fraction(exps[j]))
    terms = tuple(Num(t, Fraction(t)) for _, t in row.exps)
    return Div(num, terms[0] if len(terms) == 1 else Add(terms))


def student_chain(g: Derivation, asked: list[str], decimals: int,
                  balls: dict[str, ArbMatrix], margin: Fraction | None = None
                  ) -> tuple[dict[str, Table], str | None]:
    """Every asked stage as the student writes it: each asked entry computed from the
    student's own earlier answers (as written) and the given tables, then rounded; a
    softmax row through its rounded exponentials (:func:`exp_row`).  Entries off the
    student's path hold the exact value's rounding.

    With ``margin``, also the first asked entry whose line lies within ``margin`` units
    of the last decimal of a rounding boundary, or whose softmax line (rounded
    exponentials) rounds otherwise than from the exact exponentials: the ``path``
    constraint; the chain stops there.  Without it, an undecided entry holds None."""
    chain: dict[str, Table] = {}
    for name in asked:
        tables = student_tables(g, name, asked, decimals, balls, chain)
        if tables is None:
            return chain, f"{name} (an input's rounding is undecided)"
        cells = entries_of(asked, name, g[name].shape)
        values = path_balls(g, name, tables)
        with precision(PRECISION):
            exact = round_values([[None if b is NEG_INF else b for b in row]
                                  for row in balls[name]], decimals) or []
            wide = margin_ball(margin) if margin is not None else None
            table: Table = []
            for i, row in enumerate(values):
                out: list[Fraction | None] = []
                softmax = g[name].op.weighs_keys and any(r == i for r, _ in cells)
                parts = exp_row(tables[g[name].inputs[0]][0][i], decimals) \
                    if softmax else None
                for j, value in enumerate(row):
                    if (i, j) not in cells:
                        e = exact[i][j] if exact else None
                        out.append(None if e is None else Fraction(int(e.p), int(e.q)))
                        continue
                    if value is None or balls[name][i][j] is NEG_INF:
                        out.append(None)
                        continue
                    if wide is not None and not (value.is_finite()
                                                 and clears_margin(value, decimals, wide)):
                        return chain, f"{name}[{i},{j}]"
                    text = rounded_text(value, decimals)
                    if softmax:
                        if parts is None:
                            return chain, f"{name} row {i} (an exponential's rounding)"
                        if j in dict(parts.exps):
                            line = ball(exp_line(parts, j))
                            if (wide is not None and not clears_margin(line, decimals, wide)
                                    ) or rounded_text(line, decimals) != text:
                                return chain, f"{name}[{i},{j}]"
                    out.append(None if text is None else Fraction(text))
                table.append(out)
        chain[name] = table
    return chain, None


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
               decimals: int, asked: list[str] | None = None) -> list[PathEntry]:
    """Every asked entry of stage ``name`` (row by row) recomputed from ``tables``
    (:func:`student_tables` on the :func:`student_chain`), rounded to ``decimals``
    beside the exact value's rounding; a softmax entry over its row's rounded
    exponentials (:class:`ExpRow`)."""
    stage = g[name]
    exact = stage.values(decimals=decimals)
    cells = entries_of(asked if asked is not None else [], name, stage.shape)
    formulas, constants = _named_formulas(g, stage)
    position = {s: (k, r, c) for k, source in enumerate(stage.inputs)
                for r in range(g[source].shape[0]) for c in range(g[source].shape[1])
                for s in [g.symbols(source)[r, c]]}
    softmax = stage.op.weighs_keys
    out = []
    for i in sorted({r for r, _ in cells}):
        others = _other_rows(g, formulas.row(i), i)
        parts = exp_row(tables[stage.inputs[0]][0][i], decimals) if softmax else None
        for j in range(stage.shape[1]):
            if (i, j) not in cells:
                continue
            e = _entry(g, stage, i, j, formulas[i, j], tables, position, constants,
                       exact[i][j], decimals, others, asked)
            if parts is not None and e.line is not None and j in dict(parts.exps):
                line = exp_line(parts, j)
                with precision(PRECISION):
                    student = rounded_text(ball(line), decimals)
                e = dataclasses.replace(e, line=line, student=student, exps=parts)
            out.append(e)
    return out


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
        places = weight_places([Fraction(int(value[k, j].p), int(value[k, j].q))
                                for k in range(rows) for j in range(cols)])

        def entry(k: int, j: int, field=field, notation=notation, value=value,
                  places=places) -> sympy.Symbol:
            s = sympy.Symbol(f"const:{field}[{k},{j}]")
            index = (max(k, j),) if 1 in value.shape else (k, j)
            shown = Notation(f"({notation.latex})", notation.text, notation.title) \
                if "_" in notation.latex else notation
            v = sympy.Rational(value[k, j])
            constants[s] = (symbol(shown, index), _weight(v, places))
            if v == 0:
                zeros[s] = 0
            return s
        replace[field] = sympy.Matrix(rows, cols, entry)
    named = dataclasses.replace(op, **replace)
    formulas = named.sympy([g.symbols(name) for name in stage.inputs])
    return formulas.xreplace(zeros), constants


#: A given weight matrix prints at one number of decimals, at most this many.
MAX_WEIGHT_DECIMALS = 2


def weight_places(values: list[Fraction]) -> int | None:
    """The decimals a given matrix prints at: none when every one of ``values`` is a whole
    number, else :data:`MAX_WEIGHT_DECIMALS` when that states them exactly, so that one
    sheet's matrices share one precision (a bias of -0.5 beside weights of 0.25 prints
    -0.50); None: more decimals, or a non-decimal fraction (they print as fractions)."""
    if all(v.denominator == 1 for v in values):
        return 0
    scale = 10 ** MAX_WEIGHT_DECIMALS
    return MAX_WEIGHT_DECIMALS if all((v * scale).denominator == 1 for v in values) else None


def _weight(v: sympy.Rational, places: int | None) -> Node:
    """A weight's leaf: its decimal at the matrix's ``places`` (as the sheet prints it),
    else the exact rational."""
    if places is None:
        return Const(v) if v >= 0 else Neg(Const(-v))
    value = Fraction(int(v.p), int(v.q))
    return Num(_fixed(value, places), value)


def _entry(g: Derivation, stage: Stage, i: int, j: int, formula: sympy.Expr,
           tables: dict[str, tuple[Table, int]], position: dict,
           constants: dict[sympy.Symbol, tuple[Node, Node]], exact: str,
           decimals: int, indexed: set[str], asked: list[str] | None = None) -> PathEntry:
    def number(s: sympy.Symbol) -> Fraction | None:
        source, r, c = g.owner(s)
        return tables[source][0][r][c]

    # a masked score is -oo; an entry off the student's path that is exactly 0 (a
    # masked weight) drops its term, and the value it multiplies with it
    masked = {s: -sympy.oo for s in formula.free_symbols
              if s not in constants and number(s) is None}
    masked.update({s: 0 for s in formula.free_symbols if s not in constants
                   and s not in masked and number(s) == 0 and _off_path(g, s, asked)})
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


def _off_path(g: Derivation, s: sympy.Symbol, asked: list[str] | None) -> bool:
    """Whether ``s`` names an entry of an asked stage that is not asked."""
    source, r, c = g.owner(s)
    return asked is not None and source in asked and \
        (r, c) not in entries_of(asked, source, g[source].shape)


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
