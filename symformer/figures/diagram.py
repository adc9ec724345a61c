"""The block diagram of an example's own architecture, in TikZ.

What it shows is planned by :mod:`symformer.figures.architecture` (:func:`plan`, from
the example's structure, with the notes' symbols); here it is laid out and drawn.

A segment (:class:`~symformer.figures.diagram.Segment`: the input, a block, the output)
is drawn bottom to top in a column; segments of one side share a column while they fit
the canvas's height, and a block too tall for it is cut between its sub-layers into
pieces side by side (each framed).  Every size is estimated from the text (an upper
estimate), so boxes, residual arrows and the symbols beside the arrows never overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from symformer.figures.architecture import (
    ADD_CM,
    FILLS,
    LINE_CM,
    NAME,
    PAD_CM,
    PREAMBLE,
    Box,
    Diagram,
    Segment,
    plan,
    printed,
    wrapped,
)
from symformer.figures.tikz import NOTES, Canvas, number

if TYPE_CHECKING:
    from symformer.engine import Derivation

__all__ = ["NAME", "PREAMBLE", "Diagram", "compiled", "draw", "figure_latex", "parts",
           "plan", "render"]


def _text_width(lines: tuple[str, ...], canvas: Canvas) -> float:
    """An upper estimate of the widest line's width in cm."""
    return max((len(printed(t)) * 0.47 + 0.3) * canvas.em for t in lines)


@dataclass(frozen=True)
class Layout:
    """Spacing (cm): between boxes, around a block's boxes inside its frame, between
    the segments stacked in a column and between columns; the room a residual arrow
    takes beside a box and the room of the symbols beside the arrows."""

    gap: float = 0.5
    #: The most characters a line of box text has (longer lines are broken at a space);
    #: 0: as written.
    wrap: int = 0
    side_wrap: int = 0  # the same for the boxes beside (the positional encoding, RoPE)
    frame_pad: float = 0.25
    segment_gap: float = 0.55
    column_gap: float = 0.6
    residual: float = 0.45
    label: float = 0.6


#: The notes' page has room; a slide's frame is low, so its spacing is tighter.
NOTES_LAYOUT = Layout(column_gap=0.4)
SLIDES_LAYOUT = Layout(gap=0.44, frame_pad=0.15, segment_gap=0.42, column_gap=0.25,
                       residual=0.35, label=0.4, wrap=17, side_wrap=12)
#: A slide's plain frame of its own for the diagram (16 cm x 9 cm less its margins and
#: a title line).
SLIDES = Canvas(width=14.6, height=8.0, font=r"\small", em=10 / 72.27 * 2.54)
#: The height the connectors above the columns take (cm), and how far under a column
#: the arrow into it from the column before runs.
OVER = 0.8
ENTRY = 0.3


@dataclass
class _Piece:
    """The boxes of a segment drawn in one column (a tall block is cut between its
    sub-layers, its pieces side by side inside one frame)."""

    segment: Segment
    index: int  # which segment of the diagram
    boxes: tuple[Box, ...]
    first: bool = True

    def height(self, lay: Layout) -> float:
        h = sum(b.row_height for b in self.boxes) + lay.gap * (len(self.boxes) - 1)
        if self.segment.repeat:
            h += 2 * lay.frame_pad + (LINE_CM * len(self.segment.label()) if self.first
                                      else 0.0)
        return h


def _sublayers(boxes: tuple[Box, ...]) -> list[list[Box]]:
    """The boxes cut where a residual connection ends (after each sub-layer)."""
    out: list[list[Box]] = [[]]
    for b in boxes:
        out[-1].append(b)
        if b.joins:
            out.append([])
    return [group for group in out if group]


def _pieces(d: Diagram, canvas: Canvas, lay: Layout) -> list[_Piece]:
    out = []
    for k, seg in enumerate(d.segments):
        whole = _Piece(seg, k, seg.boxes)
        if whole.height(lay) <= canvas.height - OVER or not seg.repeat:
            out.append(whole)
            continue
        current: list[Box] = []
        for group in _sublayers(seg.boxes):
            trial = _Piece(seg, k, tuple(current + group), first=not out or out[-1].index != k)
            if current and trial.height(lay) > canvas.height - OVER:
                out.append(_Piece(seg, k, tuple(current),
                                  first=not out or out[-1].index != k))
                current = list(group)
            else:
                current += group
        if current:
            out.append(_Piece(seg, k, tuple(current), first=not out or out[-1].index != k))
    return out


@dataclass
class _Column:
    pieces: list[_Piece]
    width: float = 0.0  # the boxes' width
    side_width: float = 0.0  # the boxes beside them
    x: float = 0.0  # the boxes' centre line
    right_residual: bool = False
    base: float = 0.0  # where its first piece starts (above the arrow coming in under it)

    def height(self, lay: Layout) -> float:
        return self.base + sum(p.height(lay) for p in self.pieces) + lay.segment_gap * (
            len(self.pieces) - 1)


def columns(d: Diagram, canvas: Canvas, lay: Layout) -> list[_Column]:
    """The diagram's pieces packed into columns, left to right: a piece joins the
    column before it when they fit the canvas's height together and belong to one side
    (the encoder's and the decoder's columns stay apart)."""
    out: list[_Column] = []
    two_sides = len({s.side for s in d.segments}) > 1
    for piece in _pieces(d, canvas, lay):
        last = out[-1] if out else None
        if (last is not None and last.pieces[-1].segment.side == piece.segment.side
                and last.pieces[-1].index != piece.index
                and last.height(lay) + lay.segment_gap + piece.height(lay)
                <= canvas.height - OVER):
            last.pieces.append(piece)
        else:
            base = 0.0
            if last is not None and last.pieces[-1].segment.side == piece.segment.side:
                base = max(base, ENTRY + 0.05)  # room for the arrow coming in from below
            out.append(_Column([piece], right_residual=two_sides
                               and piece.segment.side == "decoder", base=base))
    x = 0.0
    for k, col in enumerate(out):
        boxes = [b for p in col.pieces for b in p.boxes]
        col.width = max([_text_width(b.lines, canvas) + 0.2 for b in boxes if b.kind != "add"]
                        + [1.6])
        sides = [_text_width(b.side, canvas) + 0.2 for b in boxes if b.side]
        col.side_width = max(sides) if sides else 0.0
        frame = lay.residual + lay.frame_pad + 0.1
        left = lay.label if col.right_residual else frame
        right = frame if col.right_residual else max(lay.label, frame)
        nxt = out[k + 1] if k + 1 < len(out) else None
        # the boxes beside need room unless the next column starts above them
        if col.side_width and (nxt is None or nxt.base - ENTRY < _side_top(col, lay) + 0.2):
            framed = any(b.side for p in col.pieces if p.segment.repeat for b in p.boxes)
            right = max(right, 0.5 + col.side_width + (lay.frame_pad + 0.1 if framed else 0.0))
        col.x = x + left + col.width / 2
        x = col.x + col.width / 2 + right + lay.column_gap
    return out


def _side_top(col: _Column, lay: Layout) -> float:
    """The top of the highest box beside a box of the column (as :func:`draw` sets it)."""
    y, top = col.base, 0.0
    for piece in col.pieces:
        if piece.segment.repeat:
            y += lay.frame_pad
        for box in piece.boxes:
            if box.side:
                h = len(box.side) * LINE_CM + PAD_CM
                top = max(top, y + box.row_height / 2 + h / 2)
            y += box.row_height + lay.gap
        y += lay.segment_gap - lay.gap
        if piece.segment.repeat:
            y += lay.frame_pad + (LINE_CM * len(piece.segment.label()) if piece.first else 0.0)
    return top


def width(d: Diagram, canvas: Canvas, lay: Layout) -> float:
    """The diagram's estimated width in cm."""
    cols = columns(_wrap_boxes(d, lay), canvas, lay)
    last = cols[-1]
    right = max(lay.label, 0.5 + last.side_width if last.side_width else 0.0,
                lay.residual + lay.frame_pad + 0.1)
    return last.x + last.width / 2 + right


def parts(d: Diagram, canvas: Canvas, lay: Layout) -> list[Diagram]:
    """The diagram, or when it is too wide for ``canvas`` and has two sides, the
    encoder's and the decoder's diagrams (each then has a frame of its own)."""
    sides = list(dict.fromkeys(s.side for s in d.segments))
    if len(sides) < 2 or width(d, canvas, lay) <= canvas.width:
        return [d]
    return [replace(d, segments=tuple(s for s in d.segments if s.side == side),
                    name=f"{d.name}-{side}", extra={**d.extra, "part": side})
            for side in sides]


def _wrap_boxes(d: Diagram, lay: Layout) -> Diagram:
    if not lay.wrap:
        return d
    return replace(d, segments=tuple(
        replace(seg, boxes=tuple(replace(b, lines=wrapped(b.lines, lay.wrap),
                                         side=wrapped(b.side, lay.side_wrap or lay.wrap))
                                 for b in seg.boxes)) for seg in d.segments))


def draw(d: Diagram, canvas: Canvas = NOTES, lay: Layout = NOTES_LAYOUT) -> str:
    """The diagram's ``tikzpicture`` for ``canvas``: boxes bottom to top in columns,
    each arrow labelled with the notes' symbol of what flows in it."""
    d = _wrap_boxes(d, lay)
    boxes, placed, frames, top = _placed(d, canvas, lay)
    lines = [f"\\begin{{tikzpicture}}[font={canvas.font}, >=stealth, semithick, "
             "box/.style={draw, rounded corners=2pt, align=center, inner sep=2pt}, "
             "add/.style={draw, circle, inner sep=0pt, "
             f"minimum size={number(ADD_CM)}cm}}, sym/.style={{inner sep=0.8pt}}]", *boxes]
    lines.extend(_frames(frames, d))
    lines.extend(_arrows(placed, d, lay, top))
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def framed(d: Diagram, canvas: Canvas = NOTES, lay: Layout = NOTES_LAYOUT
           ) -> list[tuple[tuple[float, float], tuple[tuple[float, float], ...]]]:
    """Each box of a repeated block as drawn: its centre and the outline of its block's
    frame (:func:`outline`), which must hold it (a test checks it does)."""
    d = _wrap_boxes(d, lay)
    _, placed, frames, _ = _placed(d, canvas, lay)
    shapes = {k: outline([r[:4] for r in rects]) for k, rects in frames.items()}
    return [((col.x, (lo + hi) / 2), shapes[piece.index])
            for _, _, col, piece, lo, hi in placed if piece.segment.repeat]


def _placed(d: Diagram, canvas: Canvas, lay: Layout):
    """The boxes' TikZ, where each is (name, box, column, piece, bottom, top), the
    rectangles of each repeated block's pieces by segment, and the columns' top."""
    cols = columns(d, canvas, lay)
    lines: list[str] = []
    placed: list[tuple[str, Box, _Column, _Piece, float, float]] = []  # name, box, ...
    frames: dict[int, list[tuple[float, float, float, float, _Piece]]] = {}
    counter = 0
    top = max(c.height(lay) for c in cols)
    for col in cols:
        y = col.base
        for piece in col.pieces:
            bottom = y
            if piece.segment.repeat:
                y += lay.frame_pad
            open_branch: list[float] = []
            for k, box in enumerate(piece.boxes):
                counter += 1
                name = f"b{counter}"
                h = box.row_height
                yc = y + h / 2
                lines.extend(_box(name, box, col, yc))
                if box.branch:
                    below = y - (lay.gap / 2 if k else
                                 (lay.frame_pad / 2 if piece.segment.repeat else lay.gap / 2))
                    open_branch.append(below)
                if box.joins and open_branch:
                    lines.extend(_residual(col, open_branch.pop(), name, lay))
                placed.append((name, box, col, piece, yc - box.height / 2, yc + box.height / 2))
                y += h + lay.gap
            y -= lay.gap
            if piece.segment.repeat:
                y += lay.frame_pad
                half = col.width / 2 + lay.residual + lay.frame_pad
                right = half
                if any(b.side for b in piece.boxes):  # RoPE's box beside: inside the frame
                    right = max(half, col.width / 2 + 0.5 + col.side_width + lay.frame_pad)
                if piece.first:
                    y += LINE_CM * len(piece.segment.label())  # its title, inside
                frames.setdefault(piece.index, []).append(
                    (col.x - half, col.x + right, bottom, y, piece))
            y += lay.segment_gap
    return lines, placed, frames, top


def _box(name: str, box: Box, col: _Column, yc: float) -> list[str]:
    out = []
    at = f"({number(col.x)},{number(yc)})"
    if box.kind == "add":
        out.append(f"\\node[add] ({name}) at {at} {{$+$}};")
    else:
        text = " \\\\ ".join(box.lines)
        out.append(f"\\node[box, fill={FILLS[box.kind]}, minimum width={number(col.width)}cm, "
                   f"minimum height={number(box.height)}cm] ({name}) at {at} {{{text}}};")
    if box.side:
        edge = ADD_CM / 2 if box.kind == "add" else col.width / 2
        sx = col.x + edge + 0.5 + col.side_width / 2
        text = " \\\\ ".join(box.side)
        out.append(f"\\node[box, fill={FILLS['embed']}, minimum width={number(col.side_width)}cm]"
                   f" ({name}s) at ({number(sx)},{number(yc)}) {{{text}}};")
        out.append(f"\\draw[->] ({name}s.west) -- ({name}.east);")
    return out


def _residual(col: _Column, y: float, name: str, lay: Layout) -> list[str]:
    """A residual connection: from the dot on the arrow at height ``y``, around the
    sub-layer, into the side of box ``name``."""
    sign = 1 if col.right_residual else -1
    edge = col.x + sign * (col.width / 2 + lay.residual)
    side = "east" if col.right_residual else "west"
    return [f"\\fill ({number(col.x)},{number(y)}) circle (1.5pt);",
            f"\\draw[->] ({number(col.x)},{number(y)}) -- ({number(edge)},{number(y)}) |- "
            f"({name}.{side});"]


def _frames(frames: dict, d: Diagram) -> list[str]:
    """One frame around each repeated block, everything that repeats inside it: when
    the block is cut over columns, one outline around all its pieces (:func:`outline`);
    its title and ×N inside its top left corner."""
    out = []
    for parts in frames.values():
        if len(parts) == 1:  # one piece: its rectangle
            x0, x1, y0, y1, _ = parts[0]
            shape = f"({number(x0)},{number(y0)}) rectangle ({number(x1)},{number(y1)})"
        else:
            shape = " -- ".join(f"({number(x)},{number(y)})"
                                for x, y in outline([p[:4] for p in parts])) + " -- cycle"
        out.append(f"\\draw[black!50, thin, rounded corners=4pt] {shape};")
        for x0, _, _, y1, piece in parts:
            if piece.first:
                label = " \\\\ ".join(piece.segment.label())
                out.append(f"\\node[anchor=north west, align=left, inner sep=2pt] at "
                           f"({number(x0 + 0.05)},{number(y1)}) {{{label}}};")
    return out


def outline(rects: list[tuple[float, float, float, float]]
            ) -> tuple[tuple[float, float], ...]:
    """The outline of rectangles ``(x0, x1, y0, y1)`` side by side, left to right (the
    pieces of one block cut over columns), each widened to meet the next: along the
    bottoms left to right, then the tops right to left.  One rectangle: its corners."""
    rects = sorted(rects)
    xs = [r[0] for r in rects] + [rects[-1][1]]
    for k in range(1, len(rects)):  # meet halfway across the gap between columns
        xs[k] = (rects[k - 1][1] + rects[k][0]) / 2
    bottom = [pt for k, r in enumerate(rects) for pt in ((xs[k], r[2]), (xs[k + 1], r[2]))]
    top = [pt for k, r in reversed(list(enumerate(rects)))
           for pt in ((xs[k + 1], r[3]), (xs[k], r[3]))]
    return tuple(bottom + top)


def _symbol(symbol: str, x: float, y: float, left: bool) -> str:
    if not symbol:
        return ""
    anchor = "east" if left else "west"
    return f"\\node[sym, anchor={anchor}] at ({number(x)},{number(y)}) {{${symbol}$}};"


def _arrows(placed: list, d: Diagram, lay: Layout, top: float) -> list[str]:
    """The arrows between consecutive boxes of a side (up a column, or over into the
    next column), the encoder's output into each cross-attention, the last output."""
    out = []
    encoder_out = None
    for k, (name, box, col, piece, _y0, y1) in enumerate(placed):
        nxt = placed[k + 1] if k + 1 < len(placed) else None
        side = piece.segment.side
        if nxt is not None and nxt[3].segment.side == side:
            n_name, _, n_col, n_piece, n_y0, _ = nxt
            if n_col is col:
                out.append(f"\\draw[->] ({name}.north) -- ({n_name}.south);")
                lo, hi = y1, n_y0
                if n_piece is not piece:  # the label outside the frames
                    if piece.segment.repeat:
                        lo += lay.frame_pad + (LINE_CM * len(piece.segment.label())
                                               if piece.first else 0.0)
                    if n_piece.segment.repeat:
                        hi -= lay.frame_pad
                out.append(_symbol(box.out, col.x + (-0.08 if col.right_residual else 0.08),
                                   (lo + hi) / 2, col.right_residual))
            else:  # up, over the gap, down and into the next column from below
                over = top + 0.35
                gap_x = n_col.x - n_col.width / 2 - (
                    lay.label if n_col.right_residual else lay.residual + lay.frame_pad) - 0.25
                entry = n_col.base - ENTRY
                out.append(f"\\draw[->] ({name}.north) |- ({number(gap_x)},{number(over)}) -- "
                           f"({number(gap_x)},{number(entry)}) -| ({n_name}.south);")
                out.append(f"\\node[sym, anchor=south] at ({number((col.x + gap_x) / 2)},"
                           f"{number(over)}) {{${box.out}$}};" if box.out else "")
        elif side == "encoder" and d.segments[-1].side == "decoder":
            encoder_out = (name, col, y1)
        elif nxt is None:
            last_title = d.segments[-1].title if not d.segments[-1].boxes else ""
            symbol = last_title or box.out
            if d.extra.get("part") == "encoder":  # the encoder's own frame: its output z
                symbol = d.extra.get("encoder_output", "") or symbol
            rise = max(0.45, (top - y1) + 0.3) if last_title else 0.45
            out.append(f"\\draw[->] ({name}.north) -- ++(0,{number(rise)})"
                       + (f" node[anchor=south, sym] {{${symbol}$}}" if symbol else "") + ";")
    if encoder_out is not None:
        name, col, _ = encoder_out
        z = d.extra.get("encoder_output", "")
        rise = col.height(lay) + 0.3
        for c_name, c_box, c_col, _, c_y0, c_y1 in placed:
            if c_box.encoder:
                gap_x = c_col.x - c_col.width / 2 - lay.label / 2
                out.append(f"\\draw[->] ({name}.north) -- ({number(col.x)},{number(rise)}) -| "
                           f"({number(gap_x)},{number((c_y0 + c_y1) / 2)}) -- ({c_name}.west);")
        out.append(f"\\node[sym, anchor=south west] at ({number(col.x)},{number(rise)}) "
                   f"{{${z}$}};" if z else "")
    return [line for line in out if line]


def render(d: Diagram, canvas: Canvas = NOTES) -> str:
    """The diagram's ``figure`` environment, captioned and labelled."""
    return ("\\begin{figure}[htbp]\n\\centering\n" + draw(d, canvas)
            + f"\\caption{{{d.caption}}}\n\\label{{fig:{d.name}}}\n\\end{{figure}}\n")


def figure_latex(g: Derivation) -> str:
    """The block diagram of ``g``'s example as a ``figure`` environment (the notes
    start with it; the preamble needs ``\\usepackage{tikz}``)."""
    return render(plan(g.example, g, g.causal), NOTES)


#: A standalone document of the picture alone (``symformer figures --format pdf|png|svg``).
STANDALONE = r"""\documentclass[border=6pt]{standalone}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage{tikz}
\begin{document}
%s\end{document}
"""


def compiled(g: Derivation, fmt: str) -> bytes | None:
    """The diagram as a PDF, a 200 dpi PNG or an SVG, compiled from its TikZ with
    pdflatex (and converted by Poppler's ``pdftoppm``/``pdftocairo``); None when those
    are not installed.  Its heading is drawn over it (:func:`headed`); an SVG names the
    caption in its ``<title>``; its text is drawn as outlines (no ``<text>``)."""
    import shutil

    from symformer.errors import InputError
    from symformer.escape import plain_text
    from symformer.tex import compile_log, convert_pdf

    if shutil.which("pdflatex") is None:
        return None
    d = plan(g.example, g, g.causal)
    try:
        pdf = compile_log({"d.tex": STANDALONE % headed(d, draw(d, NOTES))}, main="d.tex",
                          passes=1)[0]
    except InputError:
        return None
    if fmt == "pdf":
        return pdf
    converted = convert_pdf(pdf, fmt)
    if converted is None or fmt == "png":
        return converted
    title = f"<title>{_xml(plain_text(d.title))}</title>"
    return re.sub(rb"(<svg[^>]*>)", lambda m: m.group(1) + title.encode(), converted,
                  count=1)


def headed(d: Diagram, tikz: str) -> str:
    """A standalone diagram with its heading drawn over it, as every figure file has:
    its caption's first clause (*The architecture of this example, a Transformer
    encoder, bottom to top*)."""
    heading = d.caption.split(": ", 1)[0].rstrip(".")
    return (f"\\begin{{tabular}}{{@{{}}c@{{}}}}\\bfseries {heading}\\\\[6pt]\n"
            f"{tikz}\\end{{tabular}}\n")


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
