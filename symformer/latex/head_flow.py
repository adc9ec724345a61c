"""One attention head's data flow, X → Q, K, V → S → A → O, as a TikZ figure.

The figure is read off the stage graph, nothing is drawn that the derivation does not
compute: the first head's output stage and every stage it reads back to the layer's
input (the queries, the keys and values it reads, a shared key/value head's under
grouped-query attention, RoPE's rotations, the dot products, the scaled scores, the
weights).  Each box is a stage as a matrix, named as the notes name it
(:func:`symformer.latex.matrix_form.symbol`) with its shape; an arrow out of a
projection is labelled with its weight; columns are the stages' depths from the input.
The caption states the head's matrix form (:func:`matrix_form.equation_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.engine import Derivation, Stage
from symformer.figures.tikz import number
from symformer.latex.matrix_form import equation_lines, symbol
from symformer.notation import parameter

#: Column pitch, the least vertical gap between boxes and the extra room after the
#: input's column, where the projections' weights are named (cm).
PITCH = 2.05
GAP = 1.3
FIRST = 0.9


@dataclass(frozen=True)
class Node:
    """A stage as a box: its name, matrix symbol, shape, column and height."""

    stage: str
    symbol: str
    shape: tuple[int, int]
    depth: int
    y: float


def first_head_output(g: Derivation) -> Stage | None:
    """The first layer's first head's output (the encoder's, or the only side's)."""
    return next((s for s in g if s.op.matrix_form == "product" and s.layer == 1
                 and s.head == 1 and not s.name.startswith("grad.")), None)


def in_head(stage: Stage, output: Stage) -> bool:
    """A stage of the head (its prefix) or of a shared key/value head it reads."""
    prefix = output.name.rsplit(".", 1)[0] + "."
    layer = output.name.split(".head")[0] + "."
    return stage.name.startswith(prefix) or (
        stage.name.startswith(layer) and ".kv_head" in stage.name)


def nodes(g: Derivation, output: Stage) -> tuple[list[Node], list[tuple[str, str, str]]]:
    """The head's boxes and arrows ``(from, to, label)``: its stages back to its
    sources (the layer's input, an encoder's output read by cross-attention)."""
    depth: dict[str, int] = {}
    edges: list[tuple[str, str, str]] = []

    def visit(name: str) -> int:
        if name in depth:
            return depth[name]
        stage = g[name]
        if not in_head(stage, output):
            depth[name] = 0
            return 0
        depth[name] = 1 + max(visit(i) for i in stage.inputs)
        for i in stage.inputs:
            edges.append((i, name, _label(stage)))
        return depth[name]

    visit(output.name)
    columns: dict[int, list[str]] = {}
    for name, d in depth.items():
        columns.setdefault(d, []).append(name)
    y: dict[str, float] = {}
    for d in sorted(columns):
        names = sorted(columns[d], key=lambda n: (_order(g[n]), n))
        if d == 0 or d == 1:
            ys = [(len(names) - 1) / 2 * GAP - k * GAP for k in range(len(names))]
        else:
            ys = [sum(y[i] for i in g[n].inputs) / len(g[n].inputs) for n in names]
            for k in range(1, len(ys)):  # keep a gap between boxes of one column
                ys[k] = min(ys[k], ys[k - 1] - GAP)
        y.update(zip(names, ys))
    out = [Node(n, symbol(g[n]), g[n].shape, depth[n], y[n]) for n in depth]
    return sorted(out, key=lambda n: (n.depth, -n.y)), edges


def _label(stage: Stage) -> str:
    """What an arrow into ``stage`` does (LaTeX), from its operation: a projection's
    weight, RoPE, the division by √d_k (or τ), the softmax; ``""`` otherwise."""
    op = stage.op
    if op.matrix_form == "affine":
        weights = [n for n, v in op.parameters().items() if v is not None]
        return parameter(stage, weights[0]).latex if weights else ""
    if op.matrix_form == "scores":
        return "" if op.scale == 1 else \
            r"\div\sqrt{d_k}" if op.scale is None else r"\div\tau"
    return {"rotate": r"\text{RoPE}", "softmax": r"\text{softmax}",
            "dot_products": r"QK^{\top}", "product": r"AV"}.get(op.matrix_form, "")


def _x(depth: int, pitch: float = PITCH) -> float:
    return depth * pitch + (FIRST if depth else 0.0)


#: Queries above keys above values (a projection's declared ``role``).
_ORDER = {"queries": 0, "keys": 1, "values": 2}


def _order(stage: Stage) -> int:
    """Queries above keys above values (the projections), then the rest."""
    return _ORDER.get(stage.op.role, 3) if stage.op.matrix_form == "affine" else 3


#: The upright figure (beside the block diagram): levels this far apart, boxes of one
#: level this far apart side by side (cm).
RISE = 1.45
SIDE = 1.75


def draw(g: Derivation, output: Stage, font: str = r"\small", pitch: float = PITCH,
         upright: bool = False, spread: float = 1.0) -> str:
    """The ``tikzpicture`` of the head's data flow: left to right, its columns ``pitch``
    cm apart (the boxes of one column ``spread`` times :data:`GAP` apart), or
    ``upright``, bottom to top as the block diagram is drawn."""
    boxes, edges = nodes(g, output)

    def at(b: Node) -> str:
        if upright:  # the projections' weights named in the room above the input
            return (f"({number(-b.y / GAP * SIDE)},"
                    f"{number(b.depth * RISE + (FIRST if b.depth else 0.0))})")
        return f"({number(_x(b.depth, pitch))},{number(b.y * spread)})"
    ids = {b.stage: f"h{k}" for k, b in enumerate(boxes)}
    lines = [f"\\begin{{tikzpicture}}[font={font}, >=stealth, semithick, "
             "hb/.style={draw, rounded corners=2pt, align=center, inner sep=2pt, "
             "fill=black!4, minimum width=1.35cm}, wl/.style={inner sep=1pt, font=\\scriptsize}]"]
    for b in boxes:
        rows, cols = b.shape
        stage = g[b.stage]
        what = _label(stage) if b.depth and stage.op.matrix_form != "affine" else ""
        what = f"{{\\scriptsize ${what}$}} \\\\ " if what else ""
        lines.append(f"\\node[hb] ({ids[b.stage]}) at {at(b)} "
                     f"{{{what}${b.symbol}$ \\\\ ${rows} \\times {cols}$}};")
    for a, b, label in edges:  # a projection's weight on its arrow (the others: in the box)
        label = label if g[b].op.matrix_form == "affine" else ""
        side, start, end, pos = "above", "east", "west", 0.55
        if upright:  # the weight on the outer side of its arrow, a straight one's higher
            x = {n.stage: -n.y for n in boxes}
            side = "left" if x[b] <= x[a] else "right"
            start, end, pos = "north", "south", 0.8 if x[b] == x[a] else 0.4
        text = f" node[wl, pos={pos}, {side}] {{${label}$}}" if label else ""
        lines.append(f"\\draw[->] ({ids[a]}.{start}) --{text} ({ids[b]}.{end});")
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def caption(g: Derivation, output: Stage, forms: bool = True) -> str:
    """What the figure shows, in LaTeX: the head, then (``forms``) its matrix form."""
    if not forms:
        return ("One attention head\u2019s data flow (layer 1, head 1): each box a matrix, "
                "one row per token, with its shape; an arrow out of a projection names its "
                "weight.")
    boxes, _ = nodes(g, output)
    stages = [g[b.stage] for b in boxes if b.depth > 0]
    forms = "; ".join(f"${lhs} = {rhs.split(chr(92) + 'quad')[0].strip()}$"
                      for lhs, rhs in equation_lines(stages))
    return ("One attention head's data flow (layer 1, head 1): each box a matrix, one "
            "row per token, with its shape; an arrow out of a projection names its "
            f"weight. In matrix form: {forms}.")


def width(g: Derivation, output: Stage) -> float:
    """An upper estimate (cm) of the upright figure's width: its boxes side by side and
    the weights named left of their arrows."""
    ys = [b.y for b in nodes(g, output)[0]]
    return (max(ys) - min(ys)) / GAP * SIDE + 1.45 + 0.9


#: The notes' text width (cm, A4 with 2.2 cm margins) and the gap between two figures.
TEXT_CM = 16.6
BETWEEN = 0.6


def opening_latex(g: Derivation) -> str:
    """The notes' opening figures: the block diagram, and one head's data flow upright
    beside it where both fit the text width (else under it, left to right); the block
    diagram alone when the example has no attention head."""
    from symformer.figures import diagram

    d = diagram.plan(g.example, g, g.causal)
    output = first_head_output(g)
    if output is None:
        return diagram.render(d, diagram.NOTES)
    block = diagram.width(d, diagram.NOTES, diagram.NOTES_LAYOUT)
    flow = width(g, output)
    words = caption(g, output, forms=False)
    if block + BETWEEN + flow > TEXT_CM:
        return (diagram.render(d, diagram.NOTES) + "\\begin{figure}[htbp]\n\\centering\n"
                + draw(g, output, r"\footnotesize") + f"\\caption{{{words}}}\n"
                "\\label{fig:head-flow}\n\\end{figure}\n")
    left = TEXT_CM - BETWEEN - flow
    # one caption under both, the full width (two narrow ones take more lines)
    return ("\\begin{figure}[htbp]\n\\centering\n"
            f"\\begin{{minipage}}[b]{{{number(left)}cm}}\\centering\n"
            + diagram.draw(d, diagram.NOTES) + "\\end{minipage}\\hfill\n"
            f"\\begin{{minipage}}[b]{{{number(flow)}cm}}\\centering\n"
            + draw(g, output, r"\footnotesize", upright=True) + "\\end{minipage}\n"
            f"\\caption{{Left: {d.caption} Right: {words[0].lower()}{words[1:]}}}\n"
            f"\\label{{fig:{d.name}}}\\label{{fig:head-flow}}\n"
            "\\end{figure}\n")
