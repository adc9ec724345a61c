"""A table too wide for a frame made narrower, never split by columns.

A textbook does not cut a matrix in two: it abbreviates its headings and scales its
entries.  A table wider than a frame is tried, in order, until it fits:

1. its column headings abbreviated to their index (``0, 1, ...``) when every heading is
   one symbol with an index (``\\partial L/\\partial h_{0}``, ``c^{(2)}_{0}``); a key
   under the table says what column ``j`` is;
2. its columns set closer (:data:`COMPACT_PAD` instead of :data:`PAD` between them);
3. its entries, when all are decimals below :data:`SCALE_BELOW` in size, shown in units
   of a power of ten (``1.3`` for ``0.0000013`` in units of ``10^{-6}``): the decimal
   point moved, every digit kept, so nothing is rounded again; the key says the unit;
4. its entries, when all are below 1 in size, in the other units that print them
   narrower (:func:`scalings`: entries of mixed sizes, ``0.07503`` and ``-0.004843``
   at 4 significant digits, are ``7.503`` and ``-0.4843`` in units of ``10^{-2}``), the
   larger unit first: the table keeps its significant digits instead of losing some.

Nothing here rounds: a scaled entry has exactly the digits of the entry it replaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from symformer.latex.blocks import Table

#: The padding (em) of a column: ``\tabcolsep`` (6 pt) on both sides at 12 pt.
PAD = 1.0
#: A compact table's ``\tabcolsep`` (pt) and the padding (em) it gives a column.
COMPACT_SEP = 2.5
COMPACT_PAD = 2 * COMPACT_SEP / 12
#: The key's sentences are set on lines of their own, each centred (``\\`` is centring's
#: line break; ``\newline`` would push the line before it off the centre).
NEWLINE = "\\\\ "
#: Entries all smaller than this are shown in units of a power of ten.
SCALE_BELOW = Decimal("0.01")

_INDEXED = re.compile(r"^(?P<base>.+)_\{(?P<index>[^{}]+)\}$")
_DECIMAL = re.compile(r"^-?\d+(?:\.\d+)?$")
_SCIENTIFIC = re.compile(r"^(?P<m>-?\d+(?:\.\d+)?)\s*\\(?:times|cdot)\s*"
                         r"10\^\{(?P<e>[-\u2212]?\d+)\}$")


@dataclass(frozen=True)
class Fitted:
    """A table as set on a frame: ``key`` (LaTeX, under the table) says what the
    abbreviated headings and the unit of the entries are; ``compact``: its columns set
    closer; ``short``: its headings cut to their index."""

    table: Table
    key: str = ""
    compact: bool = False
    short: bool = False


def fitted(table: Table, fits: Callable[[Fitted], bool]) -> Fitted:
    """``table`` as it is when it ``fits``, else the first of its narrower forms that
    does (the module's order), else the narrowest."""
    plain = Fitted(table)
    if fits(plain):
        return plain
    short = abbreviated(table)
    tries = [plain if short is None else short]
    tries.append(replace(tries[-1], compact=True))
    units = [_in_units(tries[-1], e, rows) for e, rows in scalings(_texts(table))]
    found = next((t for t in (*tries, *units) if fits(t)), None)
    if found is not None:
        return found
    return min(units, key=lambda f: chars(_texts(f.table))) if units else tries[-1]


def _texts(table: Table) -> list[list[str]]:
    """A table's entries (LaTeX), row by row."""
    return [[c.latex for c in row] for row in table.cells]


def abbreviated(table: Table) -> Fitted | None:
    """The table with its headings cut to their index, when all are one symbol indexed
    (the key names it: ``column j: \\partial L/\\partial h_{j}``); else None."""
    found = [_INDEXED.match(label) for label in table.col_labels]
    if not found or not all(found) or len({m["base"] for m in found}) != 1:
        return None
    base = found[0]["base"]
    key = rf"Column $j$: ${base}_{{j}}$."
    return Fitted(replace(table, col_labels=tuple(m["index"] for m in found)), key,
                  short=True)


def scaled(form: Fitted) -> Fitted | None:
    """``form`` with its entries in units of ``10^{e}``, ``e`` the exponent of the
    largest, when all are decimals (or ``a \\times 10^{b}``) smaller than
    :data:`SCALE_BELOW`; None otherwise (an entry not a number, or one large enough)."""
    found = scaled_rows(_texts(form.table))
    return None if found is None else _in_units(form, *found)


def _in_units(form: Fitted, exponent: int, rows: list[list[str]]) -> Fitted:
    """``form`` with its entries ``rows`` (LaTeX), in units of ``10^{exponent}``."""
    cells = tuple(tuple(replace(c, latex=text) for c, text in zip(row, texts))
                  for row, texts in zip(form.table.cells, rows))
    unit = rf"Entries in units of $10^{{{exponent}}}$."
    return replace(form, table=replace(form.table, cells=cells),
                   key=NEWLINE.join(filter(None, (form.key, unit))))


def scaled_rows(rows: list[list[str]]) -> tuple[int, list[list[str]]] | None:
    """Entries (LaTeX) in units of ``10^{e}``, ``e`` the exponent of the largest, when
    all are decimals smaller than :data:`SCALE_BELOW`: ``(e, rows)``; else None."""
    found = _numbers(rows)
    if found is None or found[1] >= SCALE_BELOW:
        return None
    values, largest = found
    return largest.adjusted(), _units(values, largest.adjusted())


def _numbers(rows: list[list[str]]) -> tuple[list[list[Decimal]], Decimal] | None:
    """The exact decimals a table's entries (LaTeX) print and the largest's size, when
    all are numbers and not all 0; else None."""
    values = [[_value(t) for t in row] for row in rows]
    flat = [v for row in values for v in row]
    if not flat or any(v is None for v in flat):
        return None
    largest = max(abs(v) for v in flat)
    return None if largest == 0 else (values, largest)


def _units(values: list[list[Decimal]], exponent: int) -> list[list[str]]:
    return [[_plain(v.scaleb(-exponent)) for v in row] for row in values]


#: How many units :func:`scalings` tries: the largest entry with 1 to 3 digits before
#: the decimal point.
UNITS = 3


def scalings(rows: list[list[str]]) -> list[tuple[int, list[list[str]]]]:
    """Entries (LaTeX) in units of ``10^{e}``, each unit worth trying, as ``(e, rows)``,
    best first, when all are decimals smaller than 1 in size: :func:`scaled_rows`'s
    first (all below :data:`SCALE_BELOW`), then those that print the entries in fewer
    characters than they have (:func:`chars`), the larger unit first (the fewer digits
    before the decimal point); nothing when an entry is not a number or one is 1 or
    more."""
    found = _numbers(rows)
    if found is None or found[1] >= 1:
        return []
    values, largest = found
    top = largest.adjusted()
    forms = {e: _units(values, e) for e in range(top, top - UNITS, -1)}
    first = [top] if largest < SCALE_BELOW else []
    narrower = [e for e in forms if e not in first and chars(forms[e]) < chars(rows)]
    return [(e, forms[e]) for e in (*first, *narrower)]


def chars(rows: list[list[str]]) -> int:
    """The characters of a table's widest entry in each column, summed (LaTeX source:
    a measure to order the forms of one table by, not a width)."""
    return sum(max(len(row[j]) for row in rows) for j in range(len(rows[0]))) if rows else 0


def _value(latex: str) -> Decimal | None:
    """The exact decimal a cell prints, or None when it is not a plain number."""
    text = latex.strip().replace("\u2212", "-")
    if _DECIMAL.match(text):
        return Decimal(text)
    m = _SCIENTIFIC.match(text)
    if m:
        return Decimal(m["m"]).scaleb(int(m["e"].replace("\u2212", "-")))
    return None


def _plain(value: Decimal) -> str:
    """A decimal in fixed point with exactly its digits (``0`` for zero)."""
    if value == 0:
        return "0"
    return format(value, "f")
