"""The block diagram of an example's own architecture, in TikZ.

What the diagram shows is read from the example's structure (:class:`~symformer.example.
schema.Example`: its layers, heads, key/value heads, FFN, norm placement, positional
encoding, final norm, LM head, decoder) and the names of the blocks' activations
(:data:`~symformer.blocks.sublayers.ACTIVATION_OPS`); the symbols written beside its
arrows are the notes' own (:func:`symformer.notation.symbol` of the stages of the first
layer), so the diagram and the notes never spell a quantity differently.

It is drawn as a textbook draws it (Vaswani et al.'s figure 1, Prince's figure 12.7):
boxes bottom to top, the residual connections as arrows around the sub-layer they skip,
the repeated block framed and marked *×N*.  :func:`plan` describes it as data
(segments of boxes, laid out in columns that fit the canvas: one column on the notes'
page, several side by side on a slide); :func:`draw` writes the ``tikzpicture``;
:func:`figure_latex` the ``figure`` environment the notes start with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from symformer.figures.tikz import NOTES, Canvas, number

if TYPE_CHECKING:
    from symformer.engine import Derivation
    from symformer.example.schema import Block, Example

#: The figure's file name and label (``fig:block-diagram``).
NAME = "block-diagram"
#: What a document needs for the diagram (besides ``tikz``'s own package).
PREAMBLE = "\\usepackage{tikz}\n"

#: Fill colours of the kinds of box (xcolor expressions; light, so black text reads on
#: them in print and in greyscale).
FILLS = {"attention": "orange!18", "ffn": "cyan!14", "norm": "yellow!28",
         "embed": "black!6", "head": "green!12", "add": "white"}

#: Height of a line of box text and the padding of a box (cm, at 10 pt).
LINE_CM = 0.43
PAD_CM = 0.26
#: The diameter of a residual sum's circle (cm).
ADD_CM = 0.46


@dataclass(frozen=True)
class Box:
    """One step of the diagram: its lines of text (LaTeX), its kind (its fill, or
    ``add``: a circle with a plus), the symbol (LaTeX math) of what leaves it, and
    optionally a box beside it whose arrow comes in from the right (the positional
    encoding added, RoPE's rotation).  ``branch``: a residual connection leaves from
    the arrow entering this box; ``joins``: one ends here.  ``encoder``: the encoder's
    output comes in from the left (cross-attention)."""

    lines: tuple[str, ...]
    kind: str
    out: str = ""
    side: tuple[str, ...] = ()
    branch: bool = False
    joins: bool = False
    encoder: bool = False

    @property
    def height(self) -> float:
        """The box's height in cm (a circle for a sum)."""
        if self.kind == "add":
            return ADD_CM
        return len(self.lines) * LINE_CM + PAD_CM

    @property
    def row_height(self) -> float:
        """The height its row takes: the box or the box beside it."""
        # a box beside reaches into the gaps above and below (only arrows pass there)
        return max(self.height, len(self.side) * LINE_CM + PAD_CM - 0.3 if self.side else 0.0)


@dataclass(frozen=True)
class Segment:
    """A run of boxes drawn in one column: the input, a repeated block (``repeat``
    layers, framed and marked ``×N``, ``title`` above the frame), the output."""

    boxes: tuple[Box, ...]
    side: str = "encoder"
    repeat: int = 0
    title: str = ""

    def label(self) -> tuple[str, ...]:
        """The frame's title, in lines short enough for the left half of the frame
        (the arrow out of the block runs up its middle): ``×2 layers``."""
        text = self.title
        if self.repeat > 1:
            text = (f"{text} ($\\times\\,{self.repeat}$)" if any(c.isdigit() for c in text)
                    else f"$\\times\\,{self.repeat}$ {text.lower()}s")
        return _wrapped((text,), TITLE_CHARS)


#: The most characters of a line of a frame's title.
TITLE_CHARS = 11



@dataclass(frozen=True)
class Diagram:
    """The diagram: its segments in order, its caption (LaTeX) and title (plain)."""

    segments: tuple[Segment, ...]
    caption: str
    title: str
    name: str = NAME
    extra: dict = field(default_factory=dict)


# -- what the example is -------------------------------------------------------------


class _Symbols:
    """The notes' symbols of one side's quantities, in the order the first layer
    computes them (:func:`symformer.notation.symbol`): the norms' outputs y, y′, ...,
    the residual sums r, r′, ..., and the stages before and after the layers."""

    def __init__(self, g: Derivation | None, side: str) -> None:
        from symformer.notation import symbol

        self.queues: dict[str, list[str]] = {}
        self.single: dict[str, str] = {}
        if g is None:
            return
        for stage in g:
            if stage.name.startswith("grad.") or stage.side != side:
                continue
            kind = "norm" if stage.kind in _NORM_KINDS else stage.kind
            text = symbol(stage).latex
            if stage.layer == 1:
                self.queues.setdefault(kind, []).append(text)
            elif stage.layer == 0:
                # before the layers: embeddings, positional encoding, input; after: the
                # final norm, the output, logits, probabilities
                self.single.setdefault(("final_" if kind == "norm" else "") + kind, text)

    def next(self, kind: str) -> str:
        """The symbol of the next stage of ``kind`` in the first layer ('' if none)."""
        queue = self.queues.get(kind, [])
        return queue.pop(0) if queue else ""

    def get(self, kind: str) -> str:
        return self.single.get(kind, "")


_NORM_KINDS = ("layer_norm", "rms_norm")


def _norm_name(convention: str) -> str:
    return "RMSNorm" if convention == "rms" else "LayerNorm"


def _activation(name: str) -> str:
    """The activation's name as its operation's notation gives it (``GELU, tanh
    approximation``)."""
    from symformer.blocks.sublayers import ACTIVATION_OPS

    op = ACTIVATION_OPS.get(name)
    title = op.default_notation.title if op is not None else name
    m = re.search(r"\((.*)\)", title)
    name = m.group(1) if m else title
    # "GELU, tanh approximation" -> "GELU (tanh)": one short line in a box
    return re.sub(r"^(\w+), (\w+) approximation$", r"\1 (\2)", name)


#: The gated FFNs' names by their activation (Shazeer, "GLU variants", 2020).
GATED_NAMES = {"silu": "SwiGLU", "gelu": "GEGLU", "gelu_tanh": "GEGLU", "relu": "ReGLU"}


def _heads(n: int) -> str:
    return f"{n} head" + ("" if n == 1 else "s")


def _attention_box(layer: Block, heads: int, kv: int, d_k: int, causal: bool,
                   rope: bool, cross: bool, symbols: _Symbols) -> Box:
    """The attention sub-layer: its kind, heads, key/value heads, mask and scale."""
    if cross:
        name = "Cross-attention"
    elif kv and kv < heads:
        name = "Grouped-query attention" if kv > 1 else "Multi-query attention"
    else:
        name = "Multi-head attention" if heads > 1 else "Self-attention"
    if causal and not cross:
        name = "Masked " + name[0].lower() + name[1:]
    detail = _heads(heads) + (f", {kv} key/value heads" if kv and kv < heads else "")
    detail += f", $d_{{k}} = {d_k}$"
    lines = [name, detail]
    scale = getattr(layer, "scale", None)
    if scale is not None and scale == 1:
        lines.append("scores not scaled")
    if getattr(layer, "alibi_slopes", None):
        lines.append("ALiBi distance bias")
    if cross:
        lines.append("keys, values: encoder output")
    side = ("RoPE:", "rotate $q$, $k$") if rope else ()
    return Box(tuple(lines), "attention", out=symbols.next("attention_output"), side=side,
               encoder=cross)


def _ffn_box(layer: Block, symbols: _Symbols) -> Box:
    act = layer.activation
    if layer.W_gate is not None:
        lines = (f"Gated FFN ({GATED_NAMES.get(act, _activation(act) + ' gate')})",
                 f"{_activation(act)} gate, $d_{{\\mathrm{{ff}}}} = {layer.d_ff}$")
    else:
        lines = ("Feed-forward network",
                 f"{_activation(act)}, $d_{{\\mathrm{{ff}}}} = {layer.d_ff}$")
    return Box(lines, "ffn", out=symbols.next("ffn_output"))


def _wrap(sub: Box, layer: Block, symbols: _Symbols) -> list[Box]:
    """A sub-layer with its norm and residual connection where the block puts them:
    pre-norm (norm, sub-layer, sum), post-norm (sub-layer, then Add & Norm), none."""
    norm = _norm_name(layer.layer_norm)
    residual = layer.residual
    if layer.norm == "pre":
        boxes = [Box((norm,), "norm", out=symbols.next("norm"), branch=residual), sub]
        if residual:
            boxes.append(Box(("+",), "add", out=symbols.next("residual"), joins=True))
        return boxes
    first = replace(sub, branch=residual)
    if layer.norm == "post":
        out = symbols.next("norm")
        symbols.next("residual")
        title = (f"Add \\& {norm}",) if residual else (norm,)
        return [first, Box(title, "norm", out=out, joins=residual)]
    if residual:
        return [first, Box(("+",), "add", out=symbols.next("residual"), joins=True)]
    return [sub]


def _layer_boxes(example: Example, layer: Block, side: str, symbols: _Symbols,
                 causal: bool) -> list[Box]:
    rope = example.positional_encoding == "rope" and side == "encoder"
    boxes: list[Box] = []
    if side == "decoder":
        heads = layer.self_heads
        boxes += _wrap(_attention_box(layer, len(heads), 0, heads[0].d_k, True, False, False,
                                      symbols), layer, symbols)
        cross = layer.cross_heads
        boxes += _wrap(_attention_box(layer, len(cross), 0, cross[0].d_k, False, False, True,
                                      symbols), layer, symbols)
    elif layer.heads:
        boxes += _wrap(_attention_box(layer, len(layer.heads), len(layer.kv_heads),
                                      layer.heads[0].d_k, causal, rope, False, symbols),
                       layer, symbols)
    if layer.W_1 is not None:
        boxes += _wrap(_ffn_box(layer, symbols), layer, symbols)
    return boxes


def _signature(layer: Block) -> tuple:
    """What the diagram shows of a layer: equal signatures are drawn once, ×N."""
    heads = getattr(layer, "heads", None) or getattr(layer, "self_heads", ())
    return (len(heads), len(getattr(layer, "kv_heads", ())), heads[0].d_k if heads else 0,
            len(getattr(layer, "cross_heads", ())), layer.d_ff, layer.W_gate is not None,
            layer.activation, layer.norm, layer.layer_norm, layer.residual, layer.scale,
            bool(layer.alibi_slopes))


def _blocks(example: Example, layers: tuple, side: str, causal: bool, g) -> list[Segment]:
    """The side's layers, consecutive alike layers drawn once with their count."""
    groups: list[list] = []
    for layer in layers:
        if groups and _signature(groups[-1][0]) == _signature(layer):
            groups[-1].append(layer)
        else:
            groups.append([layer])
    out = []
    first = 1
    for group in groups:
        symbols = _Symbols(g, side)  # the first layer's symbols (the others reuse them)
        boxes = _layer_boxes(example, group[0], side, symbols, causal)
        if not boxes:
            continue
        what = "Decoder layer" if side == "decoder" else (
            "Layer" if side == "encoder" and example.decoder is None else "Encoder layer")
        title = what if len(groups) == 1 else (
            f"{what}s {first}\u2013{first + len(group) - 1}" if len(group) > 1
            else f"{what} {first}")
        out.append(Segment(tuple(boxes), side, repeat=len(group), title=title))
        first += len(group)
    return out


def _input(example: Example, side: str, symbols: _Symbols) -> Segment:
    """The input rows: the embedding table's rows, the positions added."""
    pe = example.positional_encoding if side == "encoder" else example.decoder.positional_encoding
    x = symbols.get("input")
    e = symbols.get("embeddings")
    boxes: list[Box] = []
    if example.positions_only:
        return Segment((Box(("Positional encoding only",), "embed", out=x),), side)
    if example.given_inputs:
        boxes.append(Box(("Given input rows",), "embed", out=x if pe in ("rope", "none") else e))
    else:
        what = "Token embedding" if side == "encoder" or example.decoder is None else \
            "Target token embedding"
        boxes.append(Box((what,), "embed", out=e))
    if side == "encoder" and example.token_type_embeddings is not None:
        boxes.append(Box(("+",), "add", side=("Token-type", "embedding")))
    if pe in ("sinusoidal", "learned"):
        source = ("Sinusoidal positional", "encoding $\\mathrm{PE}$") if pe == "sinusoidal" \
            else ("Learned positional", "embedding $\\mathrm{PE}$")
        boxes.append(Box(("+",), "add", out=x, side=source))
    elif boxes:
        boxes[-1] = replace(boxes[-1], out=x or boxes[-1].out)
    if side == "encoder" and example.embedding_norm is not None:
        boxes.append(Box((f"Embedding {_norm_name(example.embedding_norm.layer_norm)}",),
                         "norm"))
    return Segment(tuple(boxes), side)


def _output(example: Example, symbols: _Symbols, final, side: str) -> Segment:
    """After the last block: the final norm, the LM head and the softmax."""
    boxes: list[Box] = []
    if final is not None:
        boxes.append(Box((f"Final {_norm_name(final.layer_norm)}",), "norm",
                         out=symbols.get("final_norm")))
    head = example.lm_head
    vocab = example.decoder.vocab if side == "decoder" else example.vocab
    if side == "decoder" and example.decoder.W_vocab is not None:
        boxes.append(Box(("Linear $W_{\\mathrm{vocab}}$",), "head", out=symbols.get("logits")))
    elif head is not None:
        if head.W_transform is not None:
            boxes.append(Box(("Prediction-head transform",), "head",
                             out=symbols.get("transform")))
        lines = ("LM head, tied:", "$W_{\\mathrm{vocab}} = E^{\\top}$") if head.tied else \
            ("LM head (untied)", "$W_{\\mathrm{vocab}}$")
        boxes.append(Box(lines, "head", out=symbols.get("logits")))
    else:
        z = symbols.get("output")
        if boxes:
            boxes[-1] = replace(boxes[-1], out=z)
            return Segment(tuple(boxes), side)
        return Segment((), side, title=z)
    boxes.append(Box(("Softmax over the", f"vocabulary ({len(vocab)} words)"), "head",
                     out=symbols.get("probabilities")))
    return Segment(tuple(boxes), side)


def _given(example: Example, symbols: _Symbols) -> tuple[Segment, ...]:
    """An example that starts from given queries, keys and values: one attention step."""
    a = example.attention
    scaled = a.scale is None or a.scale != 1
    score = ("Scores $s = Q K^{\\top}/\\sqrt{d_{k}}$" if a.scale is None else
             "Scores $s = Q K^{\\top}$" if not scaled else "Scores $s = Q K^{\\top}$, scaled")
    boxes = [Box(("Given queries $Q$,", "keys $K$, values $V$"), "embed"),
             Box((score,) + (("causal mask",) if example.causal else ()) +
                 (("ALiBi distance bias",) if a.alibi_slope is not None else ()),
                 "attention", out=symbols.get("scores")),
             Box(("Softmax over the keys",), "attention", out=symbols.get("weights")),
             Box(("Weighted sum of the values",), "attention", out=symbols.get("head_output"))]
    return (Segment(tuple(boxes)),)


def plan(example: Example, g: Derivation | None = None, causal: bool | None = None
         ) -> Diagram:
    """The diagram of ``example`` (symbols from ``g``, its derivation, when given)."""
    causal = example.causal if causal is None else causal
    enc = _Symbols(g, "encoder")
    if example.attention is not None:
        segments = _given(example, enc)
    else:
        segments = (_input(example, "encoder", enc),
                    *_blocks(example, example.layers, "encoder", causal, g))
        if example.decoder is not None:
            dec = _Symbols(g, "decoder")
            segments += (_input(example, "decoder", dec),
                         *_blocks(example, example.decoder.layers, "decoder", True, g),
                         _output(example, dec, example.decoder.final_norm, "decoder"))
        else:
            segments += (_output(example, enc, example.final_norm, "encoder"),)
    segments = tuple(s for s in segments if s.boxes or s.title)
    caption, title = _caption(example, causal, any(s.repeat > 1 for s in segments))
    return Diagram(segments, caption, title, extra={"encoder_output": enc.get("output")})


def _caption(example: Example, causal: bool, repeated: bool) -> tuple[str, str]:
    """The caption: what the model is, how to read the figure."""
    if example.attention is not None:
        text = ("The attention step of this example, from its given queries, keys and "
                "values, bottom to top.")
        return text, text
    if example.decoder is not None:
        what = "n encoder\u2013decoder Transformer: the encoder (left) and the decoder (right)"
    elif example.lm_head is not None or causal:
        what = "decoder-only Transformer"
    else:
        what = "Transformer encoder"
    norms = {layer.norm for layer in example.layers}
    placement = {"pre": "pre-norm: each sub-layer reads a normalised copy of its input",
                 "post": "post-norm: each sum is normalised",
                 "none": "no normalisation in the block"}
    where = "; ".join(placement[n] for n in sorted(norms))
    residual = any(layer.residual for layer in example.layers)
    article = "" if what.startswith("n ") else " "
    text = (f"The architecture of this example, a{article}{what}, bottom to top: a box per step, "
            f"in the order the notes work them ({where}"
            + ("; the arrows around a sub-layer are its residual connections" if residual
               else "") + "). The symbols beside the arrows are the notes\u2019 names of "
            "what flows there" + ("; a framed block marked \u00d7N is N layers alike, each with "
                          "its own weights." if repeated else "."))
    plain = re.sub(r"\$|\\", "", text)
    return text, plain


# -- drawing --------------------------------------------------------------------------


def _plain(latex: str) -> str:
    """Roughly what a line of box text prints, for its width."""
    text = re.sub(r"\\(mathrm|text|mathit)\{([^}]*)\}", r"\2", latex)
    text = re.sub(r"\\[a-zA-Z]+", "x", text)
    return re.sub(r"[{}$_^\\]", "", text)


def _text_width(lines: tuple[str, ...], canvas: Canvas) -> float:
    """An upper estimate of the widest line's width in cm."""
    return max((len(_plain(t)) * 0.47 + 0.3) * canvas.em for t in lines)


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
        replace(seg, boxes=tuple(replace(b, lines=_wrapped(b.lines, lay.wrap),
                                         side=_wrapped(b.side, lay.side_wrap or lay.wrap))
                                 for b in seg.boxes)) for seg in d.segments))


def draw(d: Diagram, canvas: Canvas = NOTES, lay: Layout = NOTES_LAYOUT) -> str:
    """The diagram's ``tikzpicture`` for ``canvas``: boxes bottom to top in columns,
    each arrow labelled with the notes' symbol of what flows in it."""
    d = _wrap_boxes(d, lay)
    cols = columns(d, canvas, lay)
    lines = [f"\\begin{{tikzpicture}}[font={canvas.font}, >=stealth, semithick, "
             "box/.style={draw, rounded corners=2pt, align=center, inner sep=2pt}, "
             "add/.style={draw, circle, inner sep=0pt, "
             f"minimum size={number(ADD_CM)}cm}}, sym/.style={{inner sep=0.8pt}}]"]
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
    lines.extend(_frames(frames, d))
    lines.extend(_arrows(placed, d, lay, top))
    lines.append("\\end{tikzpicture}")
    return "\n".join(lines) + "\n"


def _wrapped(lines: tuple[str, ...], most: int) -> tuple[str, ...]:
    """The lines broken at spaces (never inside math) to at most ``most`` characters
    as printed, where they can be."""
    out: list[str] = []
    for line in lines:
        words = re.findall(r"\$[^$]*\$[,;:]?|\([^)]*\)[,;:]?|[^\s$(]+", line)
        current = ""
        for w in words:
            trial = f"{current} {w}" if current else w
            if current and len(_plain(trial)) > most:
                out.append(current)
                current = w
            else:
                current = trial
        out.append(current)
    return tuple(out)


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
    """A frame around each repeated block (around each of its pieces, when it is cut
    over columns), its title and ×N inside its top left corner."""
    out = []
    for parts in frames.values():
        for x0, x1, y0, y1, piece in parts:
            out.append(f"\\draw[black!50, thin, rounded corners=4pt] ({number(x0)},{number(y0)})"
                       f" rectangle ({number(x1)},{number(y1)});")
            if piece.first:
                label = " \\\\ ".join(piece.segment.label())
                out.append(f"\\node[anchor=north west, align=left, inner sep=2pt] at "
                           f"({number(x0 + 0.05)},{number(y1)}) {{{label}}};")
    return out


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
            n_name, n_box, n_col, n_piece, n_y0, _ = nxt
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
    are not installed.  An SVG names the caption in its ``<title>``; its text is drawn
    as outlines (no ``<text>``)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    tools = {"pdf": "pdflatex", "png": "pdftoppm", "svg": "pdftocairo"}
    if shutil.which("pdflatex") is None or shutil.which(tools[fmt]) is None:
        return None
    d = plan(g.example, g, g.causal)
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        (here / "d.tex").write_text(STANDALONE % draw(d, NOTES), encoding="utf-8")
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                               "d.tex"], cwd=here, capture_output=True)
        if done.returncode != 0:
            return None
        if fmt == "pdf":
            return (here / "d.pdf").read_bytes()
        if fmt == "png":
            subprocess.run(["pdftoppm", "-r", "200", "-png", "-singlefile", "d.pdf", "d"],
                           cwd=here, check=True, capture_output=True)
            return (here / "d.png").read_bytes()
        subprocess.run(["pdftocairo", "-svg", "d.pdf", "d.svg"], cwd=here, check=True,
                       capture_output=True)
        svg = (here / "d.svg").read_text(encoding="utf-8")
        from symformer.escape import plain_text

        title = f"<title>{_xml(plain_text(d.title))}</title>"
        return re.sub(r"(<svg[^>]*>)", lambda m: m.group(1) + title, svg, count=1).encode()


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
