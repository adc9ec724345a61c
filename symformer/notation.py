"""One notation in every format: the operation's symbol, with indices counted from 0.

Every format (the LaTeX document, the Markdown export, the trace as text, LaTeX,
Markdown and HTML, and ``check``'s messages) names an entry of a stage the same
way: the symbol of the stage's operation (``stage.op.symbol``, a composition may
give a role's symbol such as ``q``) with the entry's 0-based column as subscript
(``q_0``, ``α_2``: the weight on key position 2).  A whole-row quantity (a
LayerNorm row's mean μ and variance σ²) has no subscript.  Token positions are
counted from 0 too.  :func:`legend` lists the symbols a document uses, stated
once at its start with :data:`INDEX_RULE`.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

from symformer import math_scripts as scripts
from symformer.notation_types import Notation
from symformer.ops import rope

if TYPE_CHECKING:
    from symformer.engine.graph import Derivation, Stage

#: RoPE's position and pair indices (its equations' ``p`` and ``c``): the figures and
#: their captions write the same letters.
ROPE_POSITION, ROPE_PAIR = rope.POSITION, rope.PAIR

#: How every format counts and indexes, stated once at the start of every document and
#: page: plain words and math (a :class:`Notation`, set as math where a format can).
#: It matches the equations (:mod:`symformer.equations`): ``i`` is a row, ``j`` a column,
#: a sum runs over ``j`` or, beside an equation's own ``j``, over ``j′`` (``i′`` over
#: rows) -- never ``k`` (the key) nor ``m`` (the multi-head output).
INDEX_PIECES: tuple[str | Notation, ...] = (
    "Token positions and vector dimensions are counted from 0. In the equations, ",
    Notation("i", "i", ""), " is a token position (a table\u2019s row) and ",
    Notation("j", "j", ""), " a column (in scores and attention weights: the key "
    "position); every sum shows its own index and range: ",
    Notation("j'", "j\u2032", ""), " (", Notation("i'", "i\u2032", ""),
    ") beside an equation\u2019s own ", Notation("j", "j", ""), " (", Notation("i", "i", ""),
    ").")
#: The feature index (:mod:`symformer.equations.symbols`' ``lam``): a sum over a row's
#: entries (a projection's input, a query's and a key's width) runs over a letter of its
#: own, never a position's, a row's or a weight's.  The notes list it in their notation
#: table (:func:`glossary`); a page without one says it after :data:`INDEX_PIECES`.
FEATURE = Notation(r"\lambda", "\u03bb", "Feature index (a sum over the entries of a row "
                   "runs over it: a projection\u2019s input, a query\u2019s and a key\u2019s)")
#: :data:`INDEX_PIECES` and :data:`FEATURE` as plain text (for a page without a notation
#: table).
INDEX_RULE = "".join(p if isinstance(p, str) else p.text for p in INDEX_PIECES) + \
    f" {FEATURE.text} is a f{FEATURE.title[1:]}."
_NUMBERED = re.compile(r"([^\d]*)0")


def notation(stage: Stage) -> Notation:
    """The symbol and title of ``stage`` (its operation's, or the role's it plays), with
    the superscript saying where it sits (:func:`where`): ``q^{(2)}`` in head 2."""
    return symbol(stage).at(where(stage))


def symbol(stage: Stage) -> Notation:
    """The operation's symbol of ``stage``, before its superscript.  The residual sum
    and normalised output of a block's second sub-layer are primed (r′, y′; the
    decoder's third: r″, y″), so that one layer never writes r = r + f; a decoder's
    quantity named like an encoder's is barred (q̄: not the encoder's q) and the final
    normalisation's hatted (ŷ, μ̂: not the first sub-layer's y, μ) (:func:`marked`)."""
    return marked(_primed(stage.op.symbol, _primes(stage)), _marks(stage, stage.op.symbol))


def parameter_symbol(stage: Stage, name: str) -> Notation:
    """The symbol of the weight ``name`` of ``stage``'s operation, before its superscript;
    a second sub-layer's normalisation has its own γ′ and β′, a decoder's weight named
    like an encoder's is barred (W̄_O) and the final normalisation's hatted (γ̂) (as
    :func:`symbol`)."""
    note = stage.op.parameter_notation(name)
    return marked(_primed(note, _primes(stage)), _marks(stage, note))


#: The accents that set a quantity apart (issue 39: one meaning per symbol): LaTeX
#: command (for one letter, for a longer base) and the combining character of the text.
BAR = (r"\bar", r"\overline", "\u0304")
HAT = (r"\hat", r"\widehat", "\u0302")
#: Per derivation: (its size when measured, the unmarked symbols of its encoder side and
#: of its layers, stages and weights).
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _unmarked(g: Derivation) -> tuple[set[str], set[str]]:
    """The operations' own symbols (not primed, not accented) of the encoder side's
    stages and weights, and of every stage and weight outside a final normalisation."""
    known = _SHARED.get(g)
    if known is not None and known[0] == len(g.stages):
        return known[1], known[2]
    encoder, layers = set(), set()
    for s in g.stages.values():
        if s.name.startswith("grad."):
            continue
        notes = [s.op.symbol, *(s.op.parameter_notation(n) for n in s.op.parameters())]
        found = {n.latex for n in notes}
        if s.side != "decoder":
            encoder |= found
        if not _FINAL.match(s.name):
            layers |= found
    _SHARED[g] = (len(g.stages), encoder, layers)
    return encoder, layers


def _marks(stage: Stage, note: Notation) -> tuple[tuple[str, str, str], ...]:
    """The accents of a forward stage's symbol, whose operation writes ``note``: a bar on
    the decoder side when the encoder side's operations write the same (q̄, and q̄′ in
    the cross-attention), a hat in a final normalisation when a layer's write it.  A
    gradient's symbol is made from its stage's (∂L/∂q̄), so it carries none itself."""
    g = stage.derivation
    if stage.name.startswith("grad.") or g is None:
        return ()
    encoder, layers = _unmarked(g)
    out = []
    if stage.side == "decoder" and note.latex in encoder:
        out.append(BAR)
    if _FINAL.match(stage.name) and note.latex in layers:
        out.append(HAT)
    return tuple(out)


_FINAL = re.compile(r"(?:decoder\.)?final_norm(?:\.|$)")
#: A mean square's ⟨x²⟩: its opening and the letter a final normalisation's hat marks.
_INNER = re.compile(r"(\\langle\s*)([a-zA-Z])")
#: A symbol's base as :func:`marked` accents it: a letter or a command (a Greek letter),
#: perhaps under an accent of its own (``\tilde{\sigma}``, ``\hat{t}``).
_LETTER = re.compile(r"(\\(?:tilde|hat|bar|check)\{(?:\\[a-zA-Z]+|[a-zA-Z])\}|\\[a-zA-Z]+"
                     r"|[a-zA-Z])(.*)$", re.S)


def marked(note: Notation, accents: tuple[tuple[str, str, str], ...]) -> Notation:
    r"""``note`` with each accent over its base letter (``q`` -> ``\bar{q}``, ``W_{O}``
    -> ``\bar{W}_{O}``, ``\sigma'^2`` -> ``\bar{\sigma}'^2``), a bar or a hat over the
    whole of a longer symbol (``\overline{\mathrm{PE}}``, the final RMSNorm's
    ``\hat{\mathrm{rms}}``), a mean square's hat over its letter (``\langle \hat{x}^2
    \rangle``: one over the whole would not read); unchanged when it already has that
    accent (the decoder's output z̄)."""
    for short, long, combining in accents:
        if note.latex.startswith(short + "{") or note.latex.startswith(long + "{"):
            continue
        text = note.text[:1] + combining + note.text[1:]
        inner = _INNER.match(note.latex)
        if inner and short == HAT[0]:  # the final RMSNorm's ⟨x̂²⟩: a hat over the letter
            latex = f"{inner.group(1)}{short}{{{inner.group(2)}}}{note.latex[inner.end():]}"
            text = note.text[:2] + combining + note.text[2:]
        elif note.latex.startswith((r"\mathrm", r"\langle", r"\sqrt")):
            if short == HAT[0] and note.latex.startswith(r"\sqrt"):
                continue
            # \overline{\mathrm{PE}}; \hat{\mathrm{rms}} (a \widehat's glyph reads as a "d")
            latex = f"{short if short == HAT[0] else long}{{{note.latex}}}"
        else:
            prefix, base, _ = scripts.split_power(note.latex)
            rest = note.latex[len(prefix) + len(base):]
            m = _LETTER.match(base)
            latex = f"{prefix}{short}{{{m.group(1)}}}{m.group(2)}{rest}" if m else \
                f"{prefix}{long}{{{base}}}{rest}"
        title = f"{note.title}, {'in the decoder' if short == BAR[0] else 'final norm'}"
        note = Notation(latex, text, title, note.bracket)
    return note


def _primes(stage: Stage) -> int:
    """How many primes the stage's symbols carry: k − 1 in sub-layer k's residual sum,
    normalisation and the normalisation's statistics (μ′, σ′², σ̃′); 1 in a decoder's
    cross-attention (its second sub-layer, after the self-attention); else 0."""
    if _CROSS.search(stage.name) and stage.derivation is not None and any(
            ".self." in name for name in stage.derivation.stages):
        return 1  # a decoder's cross-attention, after its self-attention: q̄′, not q̄
    m = _SUBLAYER.search(stage.name)
    op = stage.op  # a residual sum, any normalisation and its statistics
    primed = op.residual or op.norm_statistic or op.norm_keys
    return 0 if m is None or not primed else int(m.group(1)) - 1


def _primed(note: Notation, primes: int) -> Notation:
    """``note`` with ``primes`` primes, before a power of its own: σ² -> σ′²."""
    if primes <= 0:
        return note
    which = ("second", "third", "fourth")[min(primes, 3) - 1]
    prefix, base, power = scripts.split_power(note.latex)
    cut = len(prefix) + len(base)
    latex = note.latex[:cut] + "'" * primes + note.latex[cut:]
    power_text = re.search(r"[²³]*$", note.text).group(0)
    text = note.text[:len(note.text) - len(power_text)] + "\u2032" * primes + power_text
    return Notation(latex, text, f"{note.title} ({which} sub-layer)", note.bracket)


#: A stage of sub-layer k's residual connection or normalisation (``layer1.add_norm2``,
#: ``.add_norm2.sum``, pre-norm's ``layer1.norm2``, a statistic ``.norm2.variance``);
#: its symbol is primed when its operation is a residual sum, a normalisation or one's
#: statistic.
_SUBLAYER = re.compile(
    r"(?:^|\.)(?:add_norm|norm)(\d)(?:\.(?:sum|mean|variance|std|mean_square))?$")
_CROSS = re.compile(r"^decoder\.layer\d+\.cross\.")


def parameter(stage: Stage, name: str) -> Notation:
    """The symbol of the weight ``name`` of ``stage``'s operation, with the stage's
    superscript: head 2's query weights are ``W_Q^{(2)}``."""
    return parameter_symbol(stage, name).at(where(stage))


#: Whether symbols carry their layer and head as a superscript (:func:`where`).  Off
#: until every format's tests and the stored exports expect them: switching it on
#: changes every symbol of a multi-head or multi-layer example in every format.
SUPERSCRIPTS = True
_HEAD = re.compile(r"^(.*?)\.(kv_head|head)(\d+)(?:\.|$)")
#: Per derivation: (its size when measured, the sides with several layers, and the
#: (prefix, family) of head stages that have several heads).
_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _layout(g: Derivation) -> tuple[set[str], set[tuple[str, str]]]:
    known = _LAYOUTS.get(g)
    if known is not None and known[0] == len(g.stages):
        return known[1], known[2]
    layers: dict[str, set[int]] = {}
    heads: dict[tuple[str, str], set[str]] = {}
    for s in g.stages.values():
        if s.name.startswith("grad."):
            continue
        if s.layer:
            layers.setdefault(s.side, set()).add(s.layer)
        m = _HEAD.match(s.name)
        if m:
            heads.setdefault((m.group(1), m.group(2)), set()).add(m.group(3))
    many_layers = {side for side, found in layers.items() if len(found) > 1}
    many_heads = {key for key, found in heads.items() if len(found) > 1}
    _LAYOUTS[g] = (len(g.stages), many_layers, many_heads)
    return many_layers, many_heads


def _anchor(stage: Stage) -> Stage:
    """The forward stage whose place a gradient takes (as :func:`placement.part_of`):
    ``grad.S`` sits where S does, a weight's gradient where the weight's stage does."""
    g = stage.derivation
    if g is None or not stage.name.startswith("grad.") \
            or not stage.op.is_gradient:
        return stage
    source = stage.name.removeprefix("grad.")
    if source in g.stages:
        return _anchor(g[source])
    if stage.op.of_weight and stage.inputs:
        return _anchor(g[stage.inputs[-2] if len(stage.inputs) > 1 else stage.inputs[0]])
    return stage


def where(stage: Stage) -> str:
    """The superscript saying where ``stage`` sits: its layer when its side (encoder,
    decoder) has several, then its head when its layer has several (``"1,2"``: layer 1,
    head 2; ``"2"``: head 2 of a one-layer model); empty in a model with one of each.
    A grouped-query model's keys and values are numbered by their key/value head.
    Off (always empty) unless :data:`SUPERSCRIPTS` is set."""
    if not SUPERSCRIPTS:
        return ""
    anchor = _anchor(stage)
    g = anchor.derivation
    if g is None:
        return ""
    many_layers, many_heads = _layout(g)
    parts = [str(anchor.layer)] if anchor.layer and anchor.side in many_layers else []
    m = _HEAD.match(anchor.name)
    if m and (m.group(1), m.group(2)) in many_heads:
        parts.append(m.group(3))
    return ",".join(parts)


def position_label(p: int) -> str:
    """A learned positional table's row as the notes name a position: ``position 0``
    (never an identifier such as ``pos0``)."""
    return f"position {p}"


def per_row(stage: Stage) -> bool:
    """True when the stage has one number per token row (no subscript: ``μ``); so has
    the gradient at such a stage (``∂L/∂μ``)."""
    source = stage.name.removeprefix("grad.")
    if source != stage.name and stage.derivation is not None and source in stage.derivation:
        return per_row(stage.derivation[source])
    return stage.op.per_row  # as the operation declares (a row mean, a loss L_i)


def index(stage: Stage, j: int) -> int | None:
    """The subscript of column ``j`` (0-based), or None for a whole-row quantity or a
    single number (the loss ``L``)."""
    return None if per_row(stage) or stage.shape == (1, 1) else j


def entry(stage: Stage, j: int, fmt: str = "text") -> str:
    """Column ``j``'s symbol: ``q_0`` (text), ``q_{0}`` (latex); ``μ`` for a whole row."""
    k = index(stage, j)
    return notation(stage).entry(*(() if k is None else (k,)), fmt=fmt)


def matrix_latex(stage: Stage) -> str:
    """The symbol of the whole stage as a matrix: ``Q`` for rows of ``q`` (``\\bar{Q}``
    for rows of ``\\bar{q}``; :func:`capital`), else the symbol."""
    latex = notation(stage).latex
    m = _MATRIX.fullmatch(latex)
    return latex if m is None else m.group(1) + capital(stage, m.group(2)) + m.group(3)


#: The FFN activation's matrix (its rows are ``a``): ``A`` is the attention matrix.
ACTIVATION_MATRIX = r"\tilde{H}"


def capital(stage: Stage, letter: str) -> str:
    """The matrix letter of ``stage``'s rows, whose symbol's letter is ``letter``: its
    capital (``Q`` for ``q``), except an FFN activation's, ``\\tilde{H}`` (the hidden
    layer activated: ``A`` is the attention weights' matrix, one meaning per symbol)."""
    if letter == "a" and stage.name.removeprefix("grad.").endswith("ffn.activation"):
        return ACTIVATION_MATRIX
    return letter.upper()


#: A row symbol that is one letter, perhaps under an accent (its matrix: the capital).
_MATRIX = re.compile(r"((?:\\(?:bar|hat)\{)?)([a-z])(\}?)")


def numbered(stage: Stage) -> bool:
    """True when the stage's columns are numbered dimensions (``q0``, ``d0``, ...),
    False when they name something (a key token, a vocabulary word) or a whole row."""
    if per_row(stage):
        return False
    m = _NUMBERED.fullmatch(stage.cols[0])
    return m is not None and stage.cols == tuple(
        f"{m.group(1)}{j}" for j in range(len(stage.cols)))



#: The kind of a stage that holds constants the example implies, in one row (√d_k,
#: RoPE's θ_i, log V): its row is no token position.
CONSTANT_KIND = "constant"


def first_position(stage: Stage) -> int:
    """The position of the stage's first row: 0, except for ``next_token``, whose one row
    is the last position of its logits."""
    if not stage.op.picks_token:
        return 0
    return stage.derivation[stage.inputs[0]].shape[0] - stage.shape[0]


def _weight_rows(stage: Stage) -> bool:
    """True when the stage's rows are a weight's (a weight, its gradient, Adam's
    moments; in a training run the gradient of a step's weight stage too)."""
    if stage.op.weight_rows:
        return True
    of = stage.name.removeprefix("grad.")
    g = stage.derivation
    return of != stage.name and g is not None and of in g and g[of].op.weight_rows


def _pooled_row(stage: Stage) -> str:
    """What the one row of a pooled classifier head's stage (``head.*``, its gradients)
    stands for: "position 0", "position n-1" or "the mean over positions"; "" otherwise."""
    g = stage.derivation
    head = getattr(g.example, "head", None) if g is not None else None
    name = stage.name.removeprefix("grad.")
    if head is None or head.pooling == "none" or not name.startswith("head."):
        return ""
    if head.pooling == "mean":
        return "the mean over positions"
    n = len(g.example.tokens)
    return f"position {0 if head.pooling == 'first' else n - 1}"


def place(stage: Stage, i: int, j: int) -> str:
    """An entry in words: ``q_0 of 'think' (position 1)``.

    Columns that name something add it: ``α_1 of 'I' (position 0), column 'think'``.
    """
    pooled = _pooled_row(stage)
    if _weight_rows(stage) and stage.shape[0] == 1:  # a bias, a gain, θ: no rows to name
        text = entry(stage, j)
    elif _weight_rows(stage):  # a weight's rows are not token positions
        text = f"{entry(stage, j)} of row {i} ({stage.rows[i]!r})"
    elif stage.op.example_constant and stage.shape[0] == 1:  # √d_k, log V, θ_i
        text = entry(stage, j)
        if stage.shape[1] == 1:
            return text
    elif pooled:  # a classifier head's one row: what it pooled, not a position of its own
        text = f"{entry(stage, j)} of the pooled row ({stage.rows[i]!r}: {pooled})"
    else:
        text = f"{entry(stage, j)} of {stage.rows[i]!r} (position {i + first_position(stage)})"
    if not numbered(stage) and not per_row(stage) and text != stage.cols[j]:
        text += f", column {stage.cols[j]!r}"
    return text


def legend(stages: Iterable[Stage]) -> tuple[Notation, ...]:
    """The symbols the stages use, each once, in order of first use, without the
    superscripts saying where they sit (:func:`superscript_pieces` explains those).

    A symbol used with several titles (``z``: the encoder's and the decoder's output)
    gets them joined.
    """
    found: dict[str, Notation] = {}
    for stage in stages:
        note = symbol(stage)
        known = found.get(note.latex)
        if known is None:
            found[note.latex] = note
        elif note.title not in known.title.split(" / "):
            found[note.latex] = Notation(known.latex, known.text,
                                         f"{known.title} / {note.title}")
    return tuple(found.values())


def legend_text(notes: Iterable[Notation]) -> str:
    """The legend as one line of plain text (terminals): ``Notation: e token ...``."""
    items = "; ".join(f"{n.text}: {n.title}" for n in notes)
    return f"Notation: {items}. {INDEX_RULE}"


def glossary(stages: Iterable[Stage], sizes: Iterable[str] = ()) -> tuple[Notation, ...]:
    """The notation table of a document: every symbol its stages' tables and equations
    use, once, its title saying what it means: the stages' symbols (:func:`legend`),
    then the weights (``W_Q``: query weights), ε and d_k where an operation uses them,
    and d_v when it is among ``sizes``, the size names the document's equations use
    (:func:`symformer.equations.stage.equation_sizes`, which the caller reads: the
    equations read this module's notation)."""
    stages = list(stages)
    rows = list(legend(stages))
    seen = {n.latex for n in rows}

    def add(note: Notation) -> None:
        if note.latex not in seen:
            seen.add(note.latex)
            rows.append(note)

    if any(capital(s, "a") == ACTIVATION_MATRIX for s in stages):
        add(Notation(ACTIVATION_MATRIX, "H\u0303", "FFN activation (the matrix)"))
    for stage in stages:
        for name in stage.op.parameters():
            note = parameter_symbol(stage, name)
            title = note.title.removeprefix("the ")
            add(Notation(note.latex, note.text, title[:1].upper() + title[1:]))
    values = epsilon_values(stages)
    if values:
        add(Notation(r"\varepsilon", "ε", f"{EPSILON_TITLE} (here "
                     + ", ".join(v.text for v in values) + ")"))
    for stage in stages:  # constants an equation names (a dropout's mask D^att)
        for note in getattr(stage.op, "constant_symbols", ()):
            add(note)
    for stage in stages:  # a derivative's named inner quantity, where the notes have one
        if getattr(stage.derivation.example, "loss", None) is not None:
            for note in stage.op.backward_symbols:
                add(note)
    if any(getattr(s.op, "name", "") == "scale_mask" for s in stages):
        add(Notation("d_{k}", "d_k", "Width of a query and a key (the scores are divided "
                     "by its square root)"))
    if "d_v" in set(sizes):
        add(Notation("d_{v}", "d_v", "Width of a value and of a head\u2019s output"))
    if set(sizes) & FEATURE_SIZES:
        add(FEATURE)
    add(Notation("n", "n", "Number of token positions (the rows of a table)"))
    add(Notation(r"d, d_{\text{in}}", "d, d_in", "Width of a row: of the row a step computes, "
                 "of a projection's input"))
    return tuple(rows)


#: The sizes a sum over a row's entries runs up to (:data:`FEATURE`'s ranges).
FEATURE_SIZES = frozenset({"d_in", "d_out", "d_k", "d_v"})


#: What ε is, in the notation table (its values follow: :func:`epsilon_values`).
EPSILON_TITLE = "Small constant that keeps the denominator of a normalisation away from 0"
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075"
                             "\u2076\u2077\u2078\u2079")


def epsilon_values(stages: Iterable[Stage]) -> tuple[Notation, ...]:
    """Each distinct ε of the stages' operations as the notes print numbers (LaTeX and
    text): below 10^-4 in scientific form (``10^{-6}``, ``10⁻⁶``), else its exact
    decimal (``0.001``); a rational that is no finite decimal as its fraction."""
    from symformer.worked.numbers import scientific

    out = []
    for text in dict.fromkeys(_plain_number(s.op.eps) for s in stages
                              if getattr(s.op, "eps", 0)):
        small = scientific(text)
        if small is None:
            out.append(Notation(text, text, ""))
            continue
        mantissa, exponent = small
        power = f"10^{{{exponent}}}", "10" + str(exponent).translate(_SUPERSCRIPT)
        if mantissa.lstrip("-") == "1":
            sign = mantissa[:-1]
            out.append(Notation(sign + power[0], sign + power[1], ""))
        else:
            out.append(Notation(rf"{mantissa} \times {power[0]}",
                                f"{mantissa} \u00d7 {power[1]}", ""))
    return tuple(out)


def _plain_number(value: object) -> str:
    """An exact rational as a reader writes it: a finite decimal in full (``1/1000000``
    as ``0.000001``, ``1/400000`` as ``0.0000025``), any other as its fraction."""
    text = str(value)
    try:
        q = Fraction(text)
    except ValueError:
        return text
    rest, places = q.denominator, 0
    for prime in (2, 5):
        count = 0
        while rest % prime == 0:
            rest, count = rest // prime, count + 1
        places = max(places, count)
    if rest != 1 or places == 0:
        return text
    digits = str(abs(q.numerator) * 10 ** places // q.denominator).rjust(places + 1, "0")
    return f"{'-' if q < 0 else ''}{digits[:-places]}.{digits[-places:]}"


def superscript_pieces(stages: Iterable[Stage]) -> tuple[str | Notation, ...]:
    """The sentence explaining the superscripts :func:`where` gives (empty when no
    stage has one): what ``(1,2)`` means in this document."""
    stages = list(stages)
    located = [s for s in stages if where(s)]
    if not located:
        return ()
    layered = any(s.layer and s.side in _layout(s.derivation)[0] for s in located)
    headed = any("," in where(s) or not layered for s in located
                 if _HEAD.match(s.name))
    example = next((s for s in located if _HEAD.match(s.name)
                    and _HEAD.match(s.name).group(2) == "head"), located[0])
    note = notation(example)
    meaning = {(True, True): "its layer, then its head", (True, False): "its layer",
               (False, True): "its head"}[(layered, headed)]
    pieces: list[str | Notation] = [
        "A superscript in parentheses says where a quantity sits: ", meaning, " (",
        Notation(note.latex, note.text, ""), ": ", _where_words(example), ")"]
    if any(_HEAD.match(s.name) and _HEAD.match(s.name).group(2) == "kv_head"
           for s in located):
        pieces.append("; keys and values are numbered by their key/value head")
    pieces.append(".")
    return tuple(pieces)


def _where_words(stage: Stage) -> str:
    anchor = _anchor(stage)
    parts = []
    many_layers, many_heads = _layout(anchor.derivation)
    if anchor.layer and anchor.side in many_layers:
        parts.append(f"layer {anchor.layer}")
    m = _HEAD.match(anchor.name)
    if m and (m.group(1), m.group(2)) in many_heads:
        kind = "key/value head" if m.group(2) == "kv_head" else "head"
        parts.append(f"{kind} {m.group(3)}")
    return ", ".join(parts)


def pieces_text(pieces: Iterable[str | Notation]) -> str:
    """Words and math pieces as plain text."""
    return "".join(p if isinstance(p, str) else p.text for p in pieces)
