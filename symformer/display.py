"""Notebook display: stages, derivations and traces as labelled tables and math.

Jupyter calls ``_repr_html_``/``_repr_markdown_``/``_repr_latex_`` on the value of
a cell; :class:`~symformer.engine.graph.Stage` and
:class:`~symformer.engine.graph.Derivation` delegate to the functions here (a
:class:`~symformer.trace.result.Trace` to its renderers), so
``derive(example)["layer1.head1.weights"]`` shows a table with token rows and
column labels.  Every number is a certified rounding, to the decimals every command
prints (:data:`symformer.rendering.DEFAULT_DECIMALS`).
"""

from __future__ import annotations

import html

from symformer.escape import latex_text, markdown_text
from symformer.rendering import DEFAULT_DECIMALS

_e = html.escape
_STYLE = ("<style>.symformer-stage td,.symformer-stage th{text-align:right;"
          "font-variant-numeric:tabular-nums;padding:2px 8px}</style>")


def _row_labels(stage) -> list[str]:
    return [f"{i} {t}" for i, t in enumerate(stage.rows)]


def stage_html(stage, decimals: int = DEFAULT_DECIMALS) -> str:
    """A stage as an HTML table: tokens (with positions) down, column labels across."""
    values = stage.values(decimals=decimals)
    head = "".join(f"<th>{_e(c)}</th>" for c in stage.cols)
    body = "".join(
        f"<tr><th>{_e(label)}</th>" + "".join(f"<td>{_e(v)}</td>" for v in row) + "</tr>"
        for label, row in zip(_row_labels(stage), values))
    r, c = stage.shape
    return (f'{_STYLE}<table class="symformer-stage"><caption><code>{_e(stage.name)}</code> '
            f"({r}×{c}, {_e(stage.kind)}; {decimals} decimals, certified)</caption>"
            f"<tr><th></th>{head}</tr>{body}</table>")


def stage_markdown(stage, decimals: int = DEFAULT_DECIMALS) -> str:
    """A stage as a Markdown table."""
    values = stage.values(decimals=decimals)
    lines = [f"`{stage.name}` ({stage.shape[0]}×{stage.shape[1]}, {stage.kind})", "",
             "| token | " + " | ".join(markdown_text(c) for c in stage.cols) + " |",
             "|---|" + "---:|" * len(stage.cols)]
    lines += [f"| {markdown_text(label)} | " + " | ".join(row) + " |"
              for label, row in zip(_row_labels(stage), values)]
    return "\n".join(lines) + "\n"


def stage_latex(stage, decimals: int = DEFAULT_DECIMALS) -> str:
    """A stage as display math: a labelled ``array`` (rows: tokens, columns: labels)."""
    values = stage.values(decimals=decimals)
    cols = " & ".join(rf"\text{{{latex_text(c)}}}" for c in stage.cols)
    rows = [rf"\text{{{latex_text(label)}}} & " + " & ".join(
        v.replace("-inf", r"-\infty") for v in row) for label, row in zip(_row_labels(stage),
                                                                        values)]
    body = r" \\ ".join([f" & {cols}", r"\hline " + rows[0], *rows[1:]])
    spec = "l|" + "r" * len(stage.cols)
    name = latex_text(stage.name)
    return rf"$$\text{{{name}}} = \begin{{array}}{{{spec}}} {body} \end{{array}}$$"


def derivation_html(g) -> str:
    """A derivation as a summary: the sentence, then every stage's name, shape and kind."""
    rows = "".join(f"<tr><td><code>{_e(s.name)}</code></td><td>{s.shape[0]}×{s.shape[1]}"
                   f"</td><td>{_e(s.kind)}</td></tr>" for s in g)
    mask = " (causal mask)" if g.causal else ""
    tokens = " ".join(f"{i}:{_e(t)}" for i, t in enumerate(g.example.tokens))
    return (f"<div><b>{_e(g.example.title)}</b>{mask} — {tokens}<br>{len(g)} stages; "
            f"show one with <code>g[\"NAME\"]</code>.<table><tr><th>stage</th>"
            f"<th>shape</th><th>kind</th></tr>{rows}</table></div>")


def derivation_markdown(g) -> str:
    """A derivation's stages as a Markdown list."""
    lines = [f"**{markdown_text(g.example.title)}**{' (causal mask)' if g.causal else ''}",
             ""]
    lines += [f"- `{s.name}` {s.shape[0]}×{s.shape[1]} ({s.kind})" for s in g]
    return "\n".join(lines) + "\n"


def derivation_latex(g) -> str:
    """A derivation as the list of its stage names and shapes (display math)."""
    rows = r" \\ ".join(rf"\text{{{latex_text(s.name)}}} & {s.shape[0]}\times{s.shape[1]}"
                        for s in g)
    return rf"$$\begin{{array}}{{ll}} {rows} \end{{array}}$$"
