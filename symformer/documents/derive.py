"""What ``derive``, ``backward`` and ``trace`` print, built from a prepared request
(:mod:`symformer.documents`): :func:`derive_text` is ``symformer derive``'s output,
:func:`backward_text` ``symformer backward``'s, :func:`derive_json` their ``--json``,
:func:`trace_document` with :func:`symformer.trace.render` ``symformer trace``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from symformer.analysis.inactive import summary_lines
from symformer.blocks.slices import Shown, position_labels
from symformer.engine import Derivation, Stage
from symformer.errors import ClosedFormTooLarge
from symformer.lazy import sympy
from symformer.pipeline import Prepared


def listing(shown: list[Shown]) -> str:
    """``--list``: each shown stage's name, shape and kind, aligned."""
    width = max(len(s.stage.name) for s in shown)
    return "\n".join(f"{s.stage.name:<{width}}  {len(s.rows)}x{len(s.cols)}  {s.stage.kind}"
                     for s in shown)


def reader_tables(p: Prepared) -> dict[str, list[list[str]]] | None:
    """With ``reader_rounding``: each shown stage recomputed from the previous stages
    rounded to the request's decimals, as a reader working from printed tables does
    (its shown rows and columns); else None."""
    if not p.request.reader_rounding:
        return None
    from symformer.verify.chain import reader_rounding

    names = [s.stage.name for s in p.shown]
    tables = reader_rounding(p.derivation, p.request.decimals, names)
    return {s.stage.name: [[tables[s.stage.name][i][j] for j in s.cols] for i in s.rows]
            for s in p.shown}


def derive_json(p: Prepared, rounding: dict[str, int],
                exact_max_ops: int | None = None) -> dict:
    """``symformer derive --json``'s document: values rounded as ``rounding`` says
    (``{"decimals": N}`` or ``{"significant": N}``); ``exact_max_ops`` (``--exact``):
    each entry's closed form too when it is that short."""
    g, chosen = p.derivation, p.request.slice
    doc = as_json(g, p.shown, rounding, reader_tables(p))
    if chosen:
        doc["tokens"] = list(p.given.tokens)
        doc["slice"] = {key: None if value is None else list(value)
                        for key, value in vars(chosen).items()}
        doc["slice"]["derived_tokens"] = len(g.example.tokens)
    if exact_max_ops is not None:
        for s in p.shown:
            doc["stages"][s.stage.name]["exact"] = [
                [None if e is None else str(e) for e in row]
                for row in short_closed_forms(s, exact_max_ops)]
    return doc


def derive_lines(p: Prepared, exact_max_ops: int | None = None) -> Iterator[str]:
    """``symformer derive``'s output, one printed piece at a time (each a line or a
    table, without its newline): the header, what the example leaves inactive, and
    every shown stage's table; ``exact_max_ops`` (``--exact``): an entry's closed form
    in place of its decimal when it is that short."""
    g, decimals = p.derivation, p.request.decimals
    tables = reader_tables(p)
    sliced = bool(p.request.slice)
    # a slice evaluates stage by stage: every table made before any is printed
    made = [tables[s.stage.name] if tables else s.values(decimals=decimals)
            for s in p.shown] if sliced else [None] * len(p.shown)
    yield f"{g.example.title}{p.note}"
    # what the example leaves inactive (a clipped FFN), said once; not for a slice that
    # derives fewer tokens (its "every token" would not be the example's)
    inactive = summary_lines(g, [s.stage.name for s in p.shown]) if not p.cut else []
    if inactive:
        yield "\n".join(inactive)
    for s, values in zip(p.shown, made):
        yield ""
        if values is None:
            values = tables[s.stage.name] if tables else s.values(decimals=decimals)
        if exact_max_ops is not None:
            values = [[v if e is None else str(e) for v, e in zip(row, forms)]
                      for row, forms in zip(values, short_closed_forms(s, exact_max_ops))]
        yield format_table(s.stage, decimals, values, shown=s)


def derive_text(p: Prepared, exact_max_ops: int | None = None) -> str:
    """``symformer derive``'s output as one string (:func:`derive_lines`)."""
    return "".join(f"{line}\n" for line in derive_lines(p, exact_max_ops))


def backward_lines(p: Prepared) -> Iterator[str]:
    """``symformer backward``'s output, one printed piece at a time: the header, what
    the example leaves inactive (zero gradients and why), every shown stage's table."""
    g = p.derivation
    yield f"{g.example.title}{p.note}: backward pass ({g.example.loss.kind} loss)"
    inactive = summary_lines(g, [s.stage.name for s in p.shown])
    if inactive:
        yield "\n".join(inactive)
    for s in p.shown:
        yield ""
        yield format_table(s.stage, p.request.decimals, shown=s)


def backward_text(p: Prepared) -> str:
    """``symformer backward``'s output as one string (:func:`backward_lines`)."""
    return "".join(f"{line}\n" for line in backward_lines(p))


def trace_document(p: Prepared, token: int | str, *, side: str = "encoder",
                   backward: bool = False):
    """``symformer trace``'s document (a :class:`~symformer.trace.result.Trace`, for
    :func:`symformer.trace.render`): ``token`` followed through the prepared
    derivation, only the slice's heads, its title followed by the header note."""
    from symformer.trace import trace_token

    traced = trace_token(p.derivation, token, p.request.decimals, side=side,
                         backward=backward, heads=p.request.slice.heads)
    return replace(traced, title=traced.title + p.note) if p.note else traced


def as_json(g: Derivation, stages: list[Stage] | list[Shown], rounding: dict[str, int],
            tables: dict[str, list[list[str]]] | None = None) -> dict:
    """The JSON document of ``derive --json``: values rounded as ``rounding`` says
    (``{"decimals": N}`` or ``{"significant": N}``); ``tables`` replaces the values, e.g.
    with reader-rounded ones, which are then marked by ``"reader_rounding": true``.
    A slice's stages (:class:`~symformer.blocks.slices.Shown`) give their shown rows and
    columns, with their indices (``"positions"``, ``"columns"``) when not whole."""
    doc = {
        "title": g.example.title,
        "tokens": list(g.example.tokens),
        "causal": g.causal,
        "stages": {},
    }
    for item in stages:
        s = item if isinstance(item, Shown) else Shown(item, tuple(range(item.shape[0])),
                                                        tuple(range(item.shape[1])))
        entry = {"shape": [len(s.rows), len(s.cols)],
                 "rows": [s.stage.rows[i] for i in s.rows],
                 "cols": [s.stage.cols[j] for j in s.cols],
                 "values": tables[s.stage.name] if tables else s.values(**rounding)}
        if not s.whole:
            entry["positions"] = position_labels(s)
            entry["columns"] = list(s.cols)
        doc["stages"][s.stage.name] = entry
    if tables:
        doc["reader_rounding"] = True
    return doc


def short_closed_forms(shown: Stage | Shown, max_ops: int) -> list[list[sympy.Expr | None]]:
    """Each (shown) entry's closed form if it has at most ``max_ops`` operations, else
    None."""
    if isinstance(shown, Stage):
        shown = Shown(shown, tuple(range(shown.shape[0])), tuple(range(shown.shape[1])))
    forms: list[list[sympy.Expr | None]] = []
    for i in shown.rows:
        row = []
        for j in shown.cols:
            try:
                form = shown.stage.closed_form(i, j, max_ops=max_ops)
            except ClosedFormTooLarge:
                form = None
            row.append(form if form is None or form.is_finite is not False else None)
        forms.append(row)
    return forms


def format_table(stage: Stage, decimals: int, values: list[list[str]] | None = None,
                 shown: Shown | None = None) -> str:
    """A stage as an aligned plain-text table with token and column labels.

    ``values`` replaces the stage's certified values (e.g. reader-rounded ones);
    ``shown``: only a slice's rows and columns (``values`` are then the slice's),
    labelled with their positions and columns.
    """
    if shown is None:
        shown = Shown(stage, tuple(range(stage.shape[0])), tuple(range(stage.shape[1])))
    values = values if values is not None else shown.values(decimals=decimals)
    positions = range(stage.shape[0]) if shown.whole else position_labels(shown)
    rows = [f"{pos} {stage.rows[i]}" for pos, i in zip(positions, shown.rows)]
    cols = [stage.cols[j] for j in shown.cols]
    head_width = max(len(r) for r in rows)
    widths = [max(len(c), *(len(v[j]) for v in values)) for j, c in enumerate(cols)]
    size = f"{stage.shape[0]}x{stage.shape[1]}"
    if not shown.whole:
        size = f"{len(shown.rows)}x{len(shown.cols)} of {size}"
    lines = [f"{stage.name}  ({size})",
             " " * head_width + "  " + "  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    for label, row in zip(rows, values):
        lines.append(label.ljust(head_width) + "  "
                     + "  ".join(v.rjust(w) for v, w in zip(row, widths)))
    return "\n".join(lines)
