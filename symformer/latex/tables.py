"""A stage as a table (booktabs) or a ``bmatrix``, with certified entries.

Rows are the tokens with their positions (from 0); columns are labelled with the
stage's symbol and the column's 0-based index (``x_0``, ``q_0``, ``h_0``; ``\\mu``
for a row's mean), the key tokens for scores and weights, the words for logits.
Entries are the engine's certified roundings, or short closed forms on request.
"""

from __future__ import annotations

from fractions import Fraction

from symformer import math_scripts as scripts
from symformer.engine import Stage
from symformer.engine.rounding import display_value
from symformer.latex import numbers
from symformer.latex.blocks import Cell, MatrixBlock, Table
from symformer.latex.escape import token_label, word_label
from symformer.notation import entry, first_position
from symformer.pipeline import DEFAULT_DECIMALS
from symformer.worked.numbers import SHORT_EXTRA, integer_values, printed_values

#: Strongest heat-map shade, in percent of the heat scale (the text turns white on dark
#: shades, so the whole scale stays legible).
MAX_HEAT = 100


def column_label(stage: Stage, j: int) -> str:
    """The math label of column ``j``."""
    if stage.op.columns == "keys":
        return token_label(stage.cols[j], j)
    if stage.op.columns == "vocab":
        return word_label(stage.cols[j])
    return entry(stage, j, fmt="latex")


def rounding_legend(decimals: int) -> str:
    """The legend of a table of correctly rounded values (slides say it in the footer)."""
    return f"Values correctly rounded to {decimals} decimals."


def masked_entries(stage: Stage) -> frozenset[tuple[int, int]]:
    """Entries blocked by the causal mask: masked scores and their weights."""
    g = stage.derivation
    for name in (stage.name, *stage.inputs):
        op = g[name].op
        # the scale-and-mask step, or ALiBi's after it (which keeps the mask's entries)
        if op.keeps_mask and stage.op.shows_mask:
            return op.masked
    return frozenset()


def clipped_entries(stage: Stage) -> frozenset[tuple[int, int]]:
    """Entries of a clipping step (ReLU) whose input is not positive (certified sign):
    clipped to 0."""
    if not stage.op.clips:
        return frozenset()
    g, hidden = stage.derivation, stage.inputs[0]
    rows, cols = stage.shape
    return frozenset((i, j) for i in range(rows) for j in range(cols)
                     if g.sign(hidden, i, j) <= 0)


def stage_values(stage: Stage, decimals: int) -> list[list[str]]:
    """The entries as printed: integers for an all-integer stage, else certified decimals
    with exact short decimals in full (:func:`~symformer.worked.numbers.printed_values`)."""
    return printed_values(stage, decimals)


def heat_of(text: str, scale: tuple[Fraction, Fraction] = (Fraction(0), Fraction(1))
            ) -> int | None:
    """Shade of a certified decimal string on the scale ``(low, high)``: 0 at ``low``,
    :data:`MAX_HEAT` at ``high`` (default [0, 1]: attention weights, probabilities)."""
    if text == "-inf":
        return None
    low, high = scale
    value = max(low, min(high, display_value(text)))
    return round((value - low) / (high - low) * MAX_HEAT) if high > low else 0


def heat_scale(values: list[list[str]]) -> tuple[Fraction, Fraction]:
    """The heat map's scale for a table's printed values: [0, 1] when every value lies
    in it (weights and probabilities compare across tables), else the table's own
    smallest to largest value (a relative scale, said in the legend)."""
    shown = [display_value(t) for row in values for t in row if t != "-inf"]
    if all(0 <= v <= 1 for v in shown):
        return Fraction(0), Fraction(1)
    return min(shown), max(shown)


def stage_table(stage: Stage, *, decimals: int = DEFAULT_DECIMALS, exact: bool = False,
                max_ops: int = numbers.TABLE_MAX_OPS, highlight: int | None = None,
                heat: bool | None = None, caption: str | None = None,
                label: str | None = None, significant=None) -> Table:
    """The table of one stage.

    ``exact`` prints closed forms with at most ``max_ops`` operations (decimals
    otherwise); ``highlight`` shades one token's row; ``heat`` colours attention
    weights and probabilities by size (default: on for those stages);
    ``significant`` (a :class:`~symformer.worked.significant.SignificantValues`)
    prints every entry at its significant digits instead of ``decimals``.
    """
    integers = integer_values(stage, decimals)
    values = integers or (significant.table(stage) if significant is not None
                          else stage_values(stage, decimals))
    extended = significant is None and integers is None and any(
        numbers.places_of(t) > decimals for row in values for t in row)
    indicator = stage.op.jumps  # the argmax indicator: exact 0s and 1s
    exact = exact or indicator
    masked, clipped = masked_entries(stage), clipped_entries(stage)
    heat = stage.op.heat if heat is None else heat
    scale = heat_scale(values) if heat else (Fraction(0), Fraction(1))
    rows = []
    any_exact = False
    for i, row in enumerate(values):
        cells = []
        for j, text in enumerate(row):
            latex, is_exact = numbers.entry(stage, i, j, decimals,
                                            max_ops if exact else None, values)
            if (i, j) in clipped:  # max(0, h) with h <= 0 certified: exactly 0
                latex, is_exact = "0", True
            marks = set()
            if (i, j) in masked:
                marks.add("masked")
            if (i, j) in clipped:
                marks.add("clipped")
            if is_exact and text != "-inf":
                marks.add("exact")
                any_exact = True
            shade = heat_of(text, scale) if heat and not marks & {"masked"} else None
            cells.append(Cell(latex, frozenset(marks), shade))
        rows.append(tuple(cells))
    legend = [f"Exact values where short, otherwise rounded to {decimals} decimals."
              if any_exact else rounding_legend(decimals)]
    if extended and not any_exact:
        legend = [f"Values correctly rounded to {decimals} decimals; a value exact with at "
                  f"most {decimals + SHORT_EXTRA} decimals is printed in full."]
    if significant is not None and not any_exact:
        legend = [f"Values correctly rounded to {significant.digits_of(stage)} significant "
                  "digits."]
    if integers is not None:
        legend = ["Every value is an exact integer."]
    if indicator:
        legend = ["1 marks the exact argmax of the last position\u2019s logits (several 1s: "
                  "an exact tie)."]
    if clipped:
        legend.append(f"Shaded: clipped to 0 by {stage.op.function_name or 'the activation'}.")
    if masked:
        legend.append("Grey: masked by the causal mask.")
    if heat and not indicator:
        if scale != (0, 1):
            legend.append("Darker: larger value (shaded from this table\u2019s smallest "
                          "to its largest value).")
        else:
            legend.append("Darker: larger weight." if stage.op.columns == "keys"
                          else "Darker: larger probability.")
    legend.extend(getattr(stage.op, "table_legend", ()))  # the op's note (proved ties)
    return Table(
        caption=caption or f"{stage.name} ({stage.shape[0]}\u00d7{stage.shape[1]}).",
        label=label or f"tab:{stage.name}",
        row_labels=tuple(enumerate(stage.rows, start=first_position(stage))),
        col_labels=tuple(column_label(stage, j) for j in range(stage.shape[1])),
        cells=tuple(rows),
        highlight_row=None if indicator else highlight,  # one row: nothing to pick out
        legend=tuple(legend),
        tall=any_exact and not indicator,
        row_header=row_header(stage),
        row_math=row_math(stage),
    )


def row_math(stage: Stage) -> tuple[str, ...] | None:
    """A weight gradient's row labels as math: the input entry each row multiplies
    (``a_{0}`` for a row of dL/dW_2), or nothing for a single row (dL/dγ); None for
    every other table (its rows are tokens)."""
    if not stage.op.of_weight:
        return None
    if stage.shape[0] == 1:
        return ("",)
    source = stage.derivation[stage.inputs[0]]
    if stage.rows != source.cols:  # the embedding table's gradient: rows are tokens
        return None
    return tuple(entry(source, k, fmt="latex") for k in range(stage.shape[0]))


def row_header(stage: Stage) -> tuple[str, str]:
    """The headers of a table's two label columns: a token's position and word, or for
    a weight's gradient the weight's row and the input column it multiplies (the
    embedding table's: the token it holds; a single row: none)."""
    if not stage.op.of_weight:
        return ("pos", "token")
    if stage.shape[0] == 1:
        return ("", "")
    g = stage.derivation
    return ("row", "input" if stage.rows == g[stage.inputs[0]].cols else "token")


def stage_matrix(stage: Stage, lhs: str, *, decimals: int = DEFAULT_DECIMALS, exact: bool = False,
                 max_ops: int = numbers.TABLE_MAX_OPS) -> MatrixBlock:
    """The stage as ``lhs = [bmatrix]`` (certified decimals or short closed forms)."""
    values = stage_values(stage, decimals)
    rows, cols = stage.shape
    return MatrixBlock(scripts.display(lhs), tuple(  # a derivative: a display fraction
        tuple(numbers.entry(stage, i, j, decimals, max_ops if exact else None, values)[0]
              for j in range(cols)) for i in range(rows)))
