"""The trace as one self-contained HTML page that steps through the block.

Nothing is fetched when the page is viewed: the style and the script are inline
and the math is MathML, which browsers render natively.  Each step is a
``<section class="step">``; without JavaScript every step is shown one after the
other (that is also the notebook view, :func:`cards_html`), with it one step at
a time, with Previous/Next buttons, the arrow keys and ``#step-N`` in the address.
"""

from __future__ import annotations

import html
import re
from functools import singledispatch
from typing import TYPE_CHECKING

from symformer.colors import heat, hex_colour
from symformer.engine.rounding import display_value
from symformer.equations.render import mathml
from symformer.notation import INDEX_RULE
from symformer.notation_types import Notation
from symformer.trace.number_markup import mathml_number, number_text
from symformer.trace.steps import ActivationStep, AttentionStep, Entry, Step
from symformer.worked.model import Step as WorkedStep
from symformer.worked.render_mathml import step_pieces

if TYPE_CHECKING:
    from symformer.trace.result import Trace

#: The page's style sheet (also used by the notebook view, :func:`notebook_html`).
STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{padding:12px 20px;background:#24364b;color:#fff}
header h1{font-size:1.25em;margin:0 0 4px}
.sentence span{display:inline-block;padding:1px 6px;margin-right:4px;border-radius:4px;
 background:#ffffff22}
.sentence span.traced{background:#f0b429;color:#000;font-weight:bold}
.layout{display:flex;gap:20px;padding:16px 20px}
nav.block{flex:0 0 220px}
nav.block ol{list-style:none;padding:0;margin:0}
nav.block li{padding:5px 8px;margin:3px 0;border:1px solid #c8ced6;border-radius:5px;
 background:#fff;font-size:.9em}
nav.block li.current{background:#f0b429;border-color:#b7860b;font-weight:bold}
main{flex:1;min-width:0}
@media (max-width:800px){.layout{flex-direction:column}nav.block{flex:none}
 nav.block ol{display:flex;flex-wrap:wrap;gap:4px}nav.block li{margin:0}}
.controls{display:flex;align-items:center;gap:12px;margin-bottom:10px}
.controls button{font-size:1em;padding:6px 16px}
section.step{background:#fff;border:1px solid #d5d9de;border-radius:8px;padding:12px 18px;
 margin-bottom:14px}
section.step h2{font-size:1.1em;margin:0 0 2px}
.where{color:#5a6470;font-size:.85em;margin-bottom:8px}
.general{margin:8px 0;font-size:1.15em;text-align:center}
.general .remark{font-family:serif;color:#3b4450;margin-left:1em}
table.row{border-collapse:collapse;margin:10px 10px 0 0;display:inline-table;
 vertical-align:top}
div.rows{margin-bottom:10px}
table.row th,table.row td{border:1px solid #d5d9de;padding:4px 10px;text-align:right;
 font-variant-numeric:tabular-nums}
table.row th{background:#f0f2f5;font-weight:normal;color:#3b4450}
td.clipped{background:#e4e4e4;color:#666}
td.masked{color:#999}
.stat{margin:6px 0}
ul.worked{list-style:none;padding-left:0;margin:8px 0}
ul.worked li{margin:8px 0;padding:2px 0 2px 2em;text-indent:-2em;line-height:2.2;
 overflow-x:auto;overflow-y:hidden}
ul.worked math{text-indent:0}
.general,.scroll{max-width:100%;overflow-x:auto;overflow-y:hidden}
.heatmap{margin:10px 0}.heatmap caption{text-align:left;color:#5a6470;font-size:.85em}
.heatmap td{width:3.2em;height:1.6em;text-align:center;font-size:.8em;border:1px solid #fff}
.heatmap th{font-weight:normal;font-size:.8em;padding:0 6px;color:#3b4450}
.heatmap tr.traced th{font-weight:bold;color:#000}
.heatmap tr.traced td{outline:2px solid #24364b}
.note{color:#5a6470;font-style:italic}
details.weights{margin:4px 0 8px;font-size:.9em}details.weights summary{cursor:pointer;
 color:#3b4450}
.legend{font-size:.85em;margin:6px 0 0;max-width:70em}
.legend summary{cursor:pointer}
table.notation{border-collapse:collapse;margin:6px 0;background:#fff;color:#1b1b1b}
table.notation th,table.notation td{border:1px solid #d5d9de;padding:2px 8px;
 text-align:left}
table.notation th{background:#f0f2f5;font-weight:normal}
"""

_SCRIPT = """
(function(){
  var steps = Array.prototype.slice.call(document.querySelectorAll('section.step'));
  var parts = Array.prototype.slice.call(document.querySelectorAll('nav.block li'));
  var prev = document.getElementById('prev'), next = document.getElementById('next');
  var counter = document.getElementById('counter');
  var current = 0;
  function show(i) {
    current = Math.max(0, Math.min(steps.length - 1, i));
    steps.forEach(function(s, k){ s.hidden = k !== current; });
    var part = steps[current].getAttribute('data-part');
    parts.forEach(function(p){
      p.classList.toggle('current', p.getAttribute('data-part') === part); });
    counter.textContent = 'Step ' + (current + 1) + ' of ' + steps.length;
    prev.disabled = current === 0;
    next.disabled = current === steps.length - 1;
    try { history.replaceState(null, '', '#step-' + (current + 1)); } catch (e) {}
  }
  function fromHash() {
    var m = /^#step-(\\d+)$/.exec(location.hash);
    return m ? parseInt(m[1], 10) - 1 : 0;
  }
  prev.addEventListener('click', function(){ show(current - 1); });
  next.addEventListener('click', function(){ show(current + 1); });
  document.addEventListener('keydown', function(e){
    if (e.key === 'ArrowRight') { show(current + 1); e.preventDefault(); }
    if (e.key === 'ArrowLeft') { show(current - 1); e.preventDefault(); }
  });
  window.addEventListener('hashchange', function(){ show(fromHash()); });
  document.querySelector('.controls').hidden = false;
  show(fromHash());
})();
"""

_e = html.escape


def render_html(trace: Trace) -> str:
    """The complete step-through page."""
    parts: list[tuple[str, ...]] = []
    for step in trace.steps:
        if step.part not in parts:
            parts.append(step.part)
    nav = "".join(f'<li data-part="{_e(_part(p))}">{_e(" › ".join(p))}</li>' for p in parts)
    mask = " · causal mask" if trace.causal else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(trace.title)}: “{_e(trace.token)}” through the block</title>
<style>{STYLE}</style></head>
<body>
<header><h1>{_e(trace.title)}: {_e(_what(trace))}{mask}</h1>
{sentence_html(trace)}{legend_html(trace)}</header>
<div class="layout">
<nav class="block" aria-label="where in the block"><ol>{nav}</ol></nav>
<main>
<div class="controls" hidden><button id="prev" type="button">◀ Previous</button>
<span id="counter"></span><button id="next" type="button">Next ▶</button>
<span class="hint">(or the ← → keys)</span></div>
{cards_html(trace)}
</main></div>
<script>{_SCRIPT}</script>
</body></html>
"""


def _what(trace: Trace) -> str:
    return "one token's gradients, from the loss back" if trace.backward \
        else "one token through the block"


def sentence_html(trace: Trace) -> str:
    """The sentence with positions, the traced token highlighted."""
    spans = "".join(
        f'<span{" class=traced" if i == trace.position else ""}>{i}: {_e(t)}</span>'
        for i, t in enumerate(trace.tokens))
    return (f'<div class="sentence">{spans} — token “{_e(trace.token)}” at position '
            f'{trace.position} (positions {trace.positions}), {trace.precision} '
            f'(certified)</div>')


def symbol_mathml(notation: Notation, index: int | None = None) -> str:
    """A symbol (with its 0-based subscript) as inline MathML: ``q_0``, ``α``, ``σ²``,
    from the notation's LaTeX (the spelling every format shares)."""
    return mathml(notation.entry(*(() if index is None else (index,)), fmt="latex"))


def legend_html(trace: Trace) -> str:
    """The notation, collapsed: a table of every symbol the trace uses (symbol, what
    it is), and how indices count."""
    rows = "".join(f"<tr><td>{symbol_mathml(n)}</td><td>{_e(n.title)}</td></tr>"
                   for n in trace.notation)
    return (f'<details class="legend"><summary>Notation: {len(trace.notation)} '
            f'symbols</summary><table class="notation"><tr><th>symbol</th>'
            f'<th>what it is</th></tr>{rows}</table><p>{_e(INDEX_RULE)}</p></details>')


def _symbol(e: Entry) -> str:
    return symbol_mathml(e.notation, e.index) if e.notation is not None else _e(e.label)


def notebook_html(trace: Trace) -> str:
    """A trace as every step's card, one after the other (no script needed)."""
    return (f"<div class=\"symformer-trace\"><style>{STYLE}</style>"
            f"<p><b>{_e(trace.title)}</b></p>{sentence_html(trace)}{legend_html(trace)}"
            f"{cards_html(trace)}</div>")


def cards_html(trace: Trace) -> str:
    """Every step as a card (the page's content; in notebooks, the whole view)."""
    total = len(trace.steps)
    return "\n".join(step_card(s, n, total) for n, s in enumerate(trace.steps, start=1))


def _part(part: tuple[str, ...]) -> str:
    return " / ".join(part)


def step_card(step: Step, n: int, total: int) -> str:
    """One step: where it is, its matrix form (a gradient's, as the notes state it),
    its general formula, its weights (collapsed), the numbers, the worked lines."""
    matrix = "".join(f'<div class="general matrix">{_display(f"{lhs} = {rhs}")}</div>'
                     for lhs, rhs in step.matrix_form)
    general = "".join(f'<div class="general">{g.mathml()}' + (
        f' <span class="remark">({_e(g.remark)})</span>' if g.remark else "") + "</div>"
        for g in step.general)
    note = f'<p class="note">{_e(step.note)}</p>' if step.note else ""
    return (f'<section class="step" id="step-{n}" data-index="{n}" '
            f'data-stage="{_e(step.stage)}" data-part="{_e(_part(step.part))}">'
            f'<h2>{_e(step.title)}</h2><div class="where" title="stage {_e(step.stage)}">'
            f'Step {n} of {total} · {_e(" › ".join(step.part))}</div>'
            f"{matrix}{general}{_weights(step)}{body(step)}{note}</section>")


def _display(latex: str) -> str:
    """LaTeX as a ``<math>`` element in display style."""
    return mathml(latex).replace('<math display="inline">', '<math displaystyle="true">', 1)


def _weights(step: Step) -> str:
    """The weights the step reads, exact as the notes print them, in a collapsed
    ``<details>`` (its summary names them)."""
    if not step.weights:
        return ""
    names = ", ".join(mathml(name) for name, _ in step.weights)
    shown = "".join(
        '<div class="general scroll">' + _display(
            f"{name} = \\begin{{bmatrix}} "
            + r" \\ ".join(" & ".join(row) for row in rows) + r" \end{bmatrix}") + "</div>"
        for name, rows in step.weights)
    what = "weight" if len(step.weights) == 1 else "weights"
    return (f'<details class="weights"><summary>This step\u2019s {what}: {names}</summary>'
            f"{shown}</details>")


#: Entries per table of a row: a wide row (a 16-unit hidden layer, a vocabulary's
#: logits) continues in a second table beneath, as printed tables do, not off the page.
ROW_CHUNK = 8


def _row_table(entries: tuple[Entry, ...], cells: list[str], keys: bool = False) -> str:
    """The token's row; ``keys`` adds each key's position and token under its symbol."""
    head = [f"<th>{_symbol(e)}" + (f"<br><small>key {_e(e.label)}</small>" if keys
                                   else "") + "</th>" for e in entries]
    tables = "".join(
        f'<table class="row"><tr>{"".join(head[k:k + ROW_CHUNK])}</tr>'
        f'<tr>{"".join(cells[k:k + ROW_CHUNK])}</tr></table>'
        for k in range(0, len(entries), ROW_CHUNK))
    return f'<div class="rows scroll">{tables}</div>'


def _cell(e: Entry, cls: str = "", style: str = "") -> str:
    classes = f"value {cls}".strip()
    extra = f' style="{style}"' if style else ""
    return (f'<td class="{classes}" data-label="{_e(e.label)}"{extra}>'
            f'{_e(number_text(e.value))}</td>')


def worked_line(step: WorkedStep, notes: bool = False) -> str:
    """A worked line as a run of ``<math>`` pieces (a relation or a ``+`` starts one)
    that wraps at the page's width like text, continuation lines indented.  ``notes``:
    set as the notes set it (their LaTeX: display fractions ∂L/∂y, a power 3/2), one
    piece per relation (a gradient's line, :func:`_worked`)."""
    if notes:
        return " ".join(_display(p) for p in latex_pieces(step))
    return " ".join(f'<math displaystyle="true"><mrow>{piece}</mrow></math>'
                    for piece in step_pieces(step))


#: A negative number after a relation or an opening bracket: braced, so MathML sets its
#: minus as a sign (``≈ −0.001``), not as an operator spaced on both sides.
_SIGN = re.compile(r"(=|\\approx|\(|\\left\(|\\Bigl\()\s*-(\d[\d.]*)")
#: A line break the notes' ``align*`` puts in a long worked line.
_ALIGN_BREAK = re.compile(r"\s*\\\\\s*&\\qquad\s*")


def latex_pieces(step: WorkedStep) -> list[str]:
    """A worked line's LaTeX as the notes print it, in pieces: the left-hand side, then
    each relation with its right-hand side (a repeated one once)."""
    from symformer.worked.render_latex import chain
    from symformer.worked.render_latex import latex as node_latex

    out, previous = [node_latex(step.lhs)], None
    for relation, rhs in chain(step):
        if rhs != previous:
            text = _SIGN.sub(r"\1 {-\2}", _ALIGN_BREAK.sub(" ", f"{relation} {rhs}"))
            out += [f"{{}} {piece}" for piece in _terms(text)]
        previous = rhs
    return out


#: What opens and closes a group a line may not be broken inside.
_OPEN = re.compile(r"\\left\b|\\[Bb]igg?l\b|\{")
_CLOSE = re.compile(r"\\right\b|\\[Bb]igg?r\b|\}")


#: The visible characters of a piece that still fits a narrow page's line.
PIECE = 60
#: A sized bracket, unsized in a piece too long to keep whole.
_SIZED = re.compile(r"\\(?:left|right|[Bb]igg?[lr])\s*([()\[\]])")


def _terms(latex: str) -> list[str]:
    """``latex`` cut before each ``+`` or ``-`` between terms (outside every brace and
    sized bracket), so a long sum wraps at the page's width like the notes' lines; a
    piece still longer than :data:`PIECE` (a long sum in brackets) is cut inside its
    brackets too, which are then set at their natural size."""
    from symformer.worked.render_latex import width

    out = []
    for piece in _top_terms(latex):
        if width(piece) > PIECE and _SIZED.search(piece):
            out += _top_terms(_SIZED.sub(r"\1", piece))
        else:
            out.append(piece)
    return out


def _top_terms(latex: str) -> list[str]:
    """``latex`` cut before each ``+`` or ``-`` outside every brace and sized bracket."""
    pieces, depth, start, k = [], 0, 0, 0
    while k < len(latex):
        opened, closed = _OPEN.match(latex, k), _CLOSE.match(latex, k)
        if opened:
            depth += 1
            k = opened.end()
            continue
        if closed:
            depth -= 1
            k = closed.end()
            continue
        if depth == 0 and k > start + 2 and latex.startswith((" + ", " - "), k):
            pieces.append(latex[start:k].strip())
            start = k + 1
        k += 1
    pieces.append(latex[start:].strip())
    return [p for p in pieces if p]


def _worked(entries: list[Entry] | tuple[Entry, ...], notes: bool = False) -> str:
    items = "".join(f"<li>{worked_line(e.worked, notes)}</li>"
                    for e in entries if e.worked)
    return f'<ul class="worked">{items}</ul>' if items else ""


def _heat_style(value: str) -> str:
    """Background for one weight on the project's one sequential scale, [0, 1]
    (colour only: the shown number is the certified one)."""
    fill, ink = heat(display_value(value) if value != "-inf" else 0)
    return f"background:{hex_colour(fill)};color:{hex_colour(ink)}"


def _heatmap(step: AttentionStep) -> str:
    keys = "".join(f"<th>{_e(k)}</th>" for k in step.labels)
    rows = []
    for i, (label, row) in enumerate(zip(step.labels, step.matrix)):
        traced = ' class="traced"' if i == step.query else ""
        cells = "".join(f'<td style="{_heat_style(v)}">{_e(number_text(v))}</td>'
                        for v in row)
        rows.append(f"<tr{traced}><th>{_e(label)}</th>{cells}</tr>")
    return (f'<div class="scroll"><table class="heatmap"><caption>All queries (rows) '
            f'against all keys (columns); the traced token\'s row is outlined.</caption>'
            f"<tr><th></th>{keys}</tr>{''.join(rows)}</table></div>")


@singledispatch
def body(step: Step) -> str:
    """The token's row and its worked formulas (vector steps; a gradient's set as the
    notes set them)."""
    return _row_table(step.entries, [_cell(e) for e in step.entries]) + _worked(
        step.lines, bool(step.matrix_form) or step.stage.startswith(("grad.", "loss")))


@body.register
def _(step: AttentionStep) -> str:
    cells = []
    masked = step.masked or (False,) * len(step.entries)
    for e, blocked in zip(step.entries, masked):
        if blocked or e.value == "-inf":
            cells.append(_cell(e, "masked"))
        elif step.heat:
            cells.append(_cell(e, "heat", _heat_style(e.value)))
        else:
            cells.append(_cell(e))
    heatmap = _heatmap(step) if step.matrix else ""
    return _row_table(step.entries, cells, keys=True) + heatmap + _worked(step.lines)


def _hidden(step: ActivationStep) -> str:
    """The clipped input's entry, ``h_j``, in the hidden layer's notation."""
    return mathml(step.hidden.entry("j", fmt="latex"))


@body.register
def _(step: ActivationStep) -> str:
    clipped = step.clipped or (False,) * len(step.entries)
    cells = [_cell(e, "clipped" if c else "") for e, c in zip(step.entries, clipped)]
    legend = (f'<p class="note">Grey entries were clipped: {html.escape(step.function)} '
              'set them to 0 (the '
              f"certified sign of {_hidden(step)} is ≤ 0).</p>") if any(clipped) else ""
    return _row_table(step.entries, cells) + legend + _worked(step.lines)


__all__ = ["STYLE", "cards_html", "mathml_number", "notebook_html", "render_html",
           "step_card"]
