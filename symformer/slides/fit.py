"""A table too wide for a frame made narrower, never split by columns.

A textbook does not cut a matrix in two: it abbreviates its headings and scales its
entries.  A table wider than a frame is tried, in order, until it fits:

1. its column headings abbreviated to their index (``0, 1, ...``) when every heading is
   one symbol with an index (``\\partial L/\\partial h_{0}``, ``c^{(2)}_{0}``); a key
   under the table says what column ``j`` is;
2. its columns set closer (:data:`COMPACT_PAD` instead of :data:`PAD` between them);
3. its entries, when all are decimals below :data:`SCALE_BELOW` in size, shown in units
   of a power of ten (``1.3`` for ``0.0000013`` in units of ``10^{-6}``): the decimal
   point moved, every digit kept, so nothing is rounded again; the key says the unit.

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
#: The key's sentences are set on lines of their own.
NEWLINE = "\\newline "
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
    scaled_form = scaled(tries[-1])
    if scaled_form is not None:
        tries.append(scaled_form)
    return next((t for t in tries if fits(t)), tries[-1])


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
    found = scaled_rows([[c.latex for c in row] for row in form.table.cells])
    if found is None:
        return None
    exponent, rows = found
    cells = tuple(tuple(replace(c, latex=text) for c, text in zip(row, texts))
                  for row, texts in zip(form.table.cells, rows))
    unit = rf"Entries in units of $10^{{{exponent}}}$."
    return replace(form, table=replace(form.table, cells=cells),
                   key=NEWLINE.join(filter(None, (form.key, unit))))


def scaled_rows(rows: list[list[str]]) -> tuple[int, list[list[str]]] | None:
    """Entries (LaTeX) in units of ``10^{e}``, ``e`` the exponent of the largest, when
    all are decimals smaller than :data:`SCALE_BELOW`: ``(e, rows)``; else None."""
    values = [[_value(t) for t in row] for row in rows]
    flat = [v for row in values for v in row]
    if not flat or any(v is None for v in flat):
        return None
    largest = max(abs(v) for v in flat)
    if largest == 0 or largest >= SCALE_BELOW:
        return None
    exponent = largest.adjusted()
    return exponent, [[_plain(v.scaleb(-exponent)) for v in row] for row in values]


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
