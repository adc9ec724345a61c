"""What the block diagram of an example's own architecture shows (as data).

What the diagram shows is read from the example's structure (:class:`~symformer.example.
schema.Example`: its layers, heads, key/value heads, FFN, norm placement, positional
encoding, final norm, LM head, decoder) and the names of the blocks' activations
(:func:`~symformer.registry.activations`); the symbols written beside its
arrows are the notes' own (:func:`symformer.notation.symbol` of the stages of the first
layer), so the diagram and the notes never spell a quantity differently.

It is drawn as a textbook draws it (Vaswani et al.'s figure 1, Prince's figure 12.7):
boxes bottom to top, the residual connections as arrows around the sub-layer they skip,
the repeated block framed and marked *×N*.  :func:`plan` describes it as data
(segments of boxes); :mod:`symformer.figures.diagram` lays them out and draws them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from symformer.registry import activations, norm_label

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
        return wrapped((text,), TITLE_CHARS)


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
            kind = "norm" if stage.op.norm_keys else stage.kind
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


def _norm_name(convention: str) -> str:
    """The normalisation's box label, as it declares it (``LayerNorm``, ``RMSNorm``);
    one that declares none is refused, never drawn as another."""
    return norm_label(convention, "the block diagram")


def _activation(name: str) -> str:
    """The activation's name as its operation's notation gives it (``GELU, tanh
    approximation``)."""
    op = activations().get(name)
    title = op.default_notation.title if op is not None else name
    m = re.search(r"\((.*)\)", title)
    name = m.group(1) if m else title
    # "GELU, tanh approximation" -> "GELU (tanh)": one short line in a box
    return re.sub(r"^(\w+), (\w+) approximation$", r"\1 (\2)", name)


def _gated(name: str) -> str:
    """The gated FFN's name by its activation (Shazeer, "GLU variants", 2020), as the
    activation declares it (``SwiGLU``); else the activation's name and "gate"."""
    op = activations().get(name)
    return op.gated_name if op is not None and op.gated_name else f"{_activation(name)} gate"


def _heads(n: int) -> str:
    return f"{n} head" + ("" if n == 1 else "s")


def _kv_reads(layer: Block) -> list[str]:
    """Grouped-query attention's mapping, a line per shared key/value head
    (``heads 1–2 → K,V 1``: query heads 1 and 2 read key/value head 1), from the head
    each query head reads; nothing when none is shared."""
    reads: dict[int, list[int]] = {}
    for h, head in enumerate(getattr(layer, "heads", ()), start=1):
        kv = getattr(head, "kv_head", None)
        if kv is not None and getattr(layer, "kv_heads", ()):
            reads.setdefault(kv + 1, []).append(h)
    if len(reads) < 1 or all(len(h) == 1 for h in reads.values()):
        return []

    def heads(h: list[int]) -> str:
        run = h == list(range(h[0], h[-1] + 1))
        return (f"head {h[0]}" if len(h) == 1 else f"heads {h[0]}\u2013{h[-1]}" if run
                else "heads " + ", ".join(map(str, h)))
    return [f"{heads(h)} $\\to K,V$ {kv}" for kv, h in sorted(reads.items())]


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
    reads = _kv_reads(layer)  # says the key/value heads, and which head reads which
    detail = _heads(heads) + (f", {kv} key/value heads" if kv and kv < heads and not reads
                              else "")
    detail += f", $d_{{k}} = {d_k}$"
    lines = [name, detail, *reads]
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
        lines = (f"Gated FFN ({_gated(act)})",
                 f"{_activation(act)} gate, $d_{{\\mathrm{{ff}}}} = {layer.d_ff}$")
    else:
        lines = ("Feed-forward network",
                 f"{_activation(act)}, $d_{{\\mathrm{{ff}}}} = {layer.d_ff}$")
    return Box(lines, "ffn", out=symbols.next("ffn_output"))


def _moe_box(layer: Block, symbols: _Symbols) -> Box:
    """A mixture of experts in the FFN's place: its experts, top-k and gates."""
    moe = layer.moe
    width = moe.experts[0].W_1.cols
    gates = "renormalised gates" if moe.renormalize else "gates: router probabilities"
    rows, cols = moe.router.shape  # the router matrix, d_model x E
    return Box(("Mixture of experts",
                f"{len(moe.experts)} {_activation(layer.activation)} experts "
                f"$W_{{1}}^{{[e]}}, W_{{2}}^{{[e]}}$, $d_{{\\mathrm{{ff}}}} = {width}$",
                f"router $W_{{\\mathrm{{router}}}}$ (${rows} \\times {cols}$): "
                f"top-{moe.top_k}, {gates}"), "ffn", out=symbols.next("moe_output"))


def _dropped(sub: Box, dropout: object, symbols: _Symbols) -> Box:
    """A sub-layer's box with its dropout (a given mask) named under it: what leaves it
    is the dropped-out output."""
    if dropout is None:
        return sub
    return replace(sub, lines=(*sub.lines, f"dropout $p = {dropout.p}$ (given mask)"),
                   out=symbols.next("dropout") or sub.out)


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
        heads = layer.self_heads  # either may be absent (a decoder-only or cross-only block)
        if heads:
            boxes += _wrap(_attention_box(layer, len(heads), 0, heads[0].d_k, True, False,
                                          False, symbols), layer, symbols)
        cross = layer.cross_heads
        if cross:
            boxes += _wrap(_attention_box(layer, len(cross), 0, cross[0].d_k, False, False,
                                          True, symbols), layer, symbols)
    elif layer.heads:
        boxes += _wrap(_dropped(_attention_box(
            layer, len(layer.heads), len(layer.kv_heads), layer.heads[0].d_k, causal, rope,
            False, symbols), layer.attention_dropout, symbols), layer, symbols)
    if layer.W_1 is not None:
        boxes += _wrap(_dropped(_ffn_box(layer, symbols), layer.ffn_dropout, symbols), layer,
                       symbols)
    elif layer.moe is not None:
        boxes += _wrap(_dropped(_moe_box(layer, symbols), layer.ffn_dropout, symbols), layer,
                       symbols)
    return boxes


def _signature(layer: Block) -> tuple:
    """What the diagram shows of a layer: equal signatures are drawn once, ×N."""
    heads = getattr(layer, "heads", None) or getattr(layer, "self_heads", ())
    return (len(heads), len(getattr(layer, "kv_heads", ())), heads[0].d_k if heads else 0,
            len(getattr(layer, "cross_heads", ())), layer.d_ff, layer.W_gate is not None,
            layer.activation, layer.norm, layer.layer_norm, layer.residual, layer.scale,
            bool(layer.alibi_slopes), layer.moe, layer.attention_dropout, layer.ffn_dropout)


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


def printed(latex: str) -> str:
    """Roughly what a line of box text prints, for its width."""
    text = re.sub(r"\\(mathrm|text|mathit)\{([^}]*)\}", r"\2", latex)
    text = re.sub(r"\\[a-zA-Z]+", "x", text)
    return re.sub(r"[{}$_^\\]", "", text)


def wrapped(lines: tuple[str, ...], most: int) -> tuple[str, ...]:
    """The lines broken at spaces (never inside math) to at most ``most`` characters
    as printed, where they can be."""
    out: list[str] = []
    for line in lines:
        words = re.findall(r"\$[^$]*\$[,;:]?|\([^)]*\)[,;:]?|[^\s$(]+", line)
        current = ""
        for w in words:
            trial = f"{current} {w}" if current else w
            if current and len(printed(trial)) > most:
                out.append(current)
                current = w
            else:
                current = trial
        out.append(current)
    return tuple(out)
