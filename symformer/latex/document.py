"""The whole derivation as a document: every stage with equation, table, worked example.

Stages are grouped by what they are, not by name: the part of the block its operation
declares (``stage.op.block_part``) picks its group (:data:`GROUPS`), and its heading is
its operation's title (``stage.op.symbol.title``), so stages of a new part (a
decoder's ``decoder.*`` stages, whose operations match the encoder's) slot in without
changes here; ``side``
prefixes their headings.  The introduction states the notation once: every
symbol the document uses, and that positions and dimensions count from 0.  Every stage becomes
up to four fragments (``NAME-equation``, ``-table``, ``-worked``, ``-matrix``);
``main.tex`` inputs them in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from symformer.blocks import derive
from symformer.engine import Derivation, Stage
from symformer.equations.stage import equation_sizes
from symformer.errors import InputError
from symformer.latex import decoder, matrix_form
from symformer.latex.backward import backward_part, is_backward, packed, with_backward_pass
from symformer.latex.blocks import (
    Equation,
    Fragment,
    Glossary,
    Heading,
    Math,
    Matrices,
    Prose,
    Table,
    Worked,
)
from symformer.latex.decoding import decoding_sections
from symformer.latex.equations import numbered_equation
from symformer.latex.escape import LABEL_CHARS, latex_text, short_name
from symformer.latex.inactive import inactive_fragments
from symformer.latex.outline import Section
from symformer.latex.parameters import (
    MATRIX_WIDTH,
    matrix_lines,
    omits_zero_terms,
    parameter_blocks,
)
from symformer.latex.places import where as part_of
from symformer.latex.positional import input_title, no_positional_input, no_positional_table
from symformer.latex.properties import property_prose
from symformer.latex.render import (
    PACKAGES,
    TEXT_WIDTH,
    table_chars,
    to_latex,
    worked_latex,
    worked_width,
)
from symformer.latex.repeats import Repeats
from symformer.latex.scaling import scale_prose
from symformer.latex.tables import (
    first_position,
    masked_entries,
    rounding_legend,
    stage_matrix,
    stage_table,
)
from symformer.latex.worked import Style, worked_and_left
from symformer.notation import (
    EPSILON_TITLE,
    INDEX_PIECES,
    epsilon_values,
    glossary,
    matrix_latex,
    notation,
    superscript_pieces,
)
from symformer.notation_types import Notation
from symformer.pipeline import Rendering
from symformer.words import plural, with_causal_mask

#: The group (second-level heading) of each part of a block a step declares
#: (:attr:`~symformer.ops.base.Operation.block_part`).
GROUPS = {
    "input": "Embeddings and positional encoding", "head": "head",
    "heads": "Multi-head attention", "add_norm": "Add & Norm",
    "ffn": "Feed-forward network", "output": "Output",
}
#: Of a run of entries worked alike whose lines are too long for one line of the page
#: (``q_0``, ``q_1``: a sum over the input row), how many are worked (the table has
#: every entry), unless ``NotesOptions.full``.
ALIKE = 1


@dataclass(frozen=True)
class NotesOptions(Rendering):
    """What to export: how it is printed (:class:`~symformer.pipeline.Rendering`:
    decimals, the worked examples' token, exact forms, ``full``; the command line's
    defaults), and the stage filter.

    ``target_token`` is the decoder's worked token (None: the last target position);
    ``steps`` > 0 adds a greedy-generation section of that many steps; ``backward``
    adds the Backward part when the example has a ``[loss]``; ``full`` works every
    stage (default: a stage computed as one worked before, the second head or layer,
    shows its weights and table under one sentence, :mod:`symformer.latex.repeats`).
    """

    stages: tuple[str, ...] | None = None
    target_token: int | None = None
    steps: int = 0
    max_work: int | None = None
    backward: bool = True


def resolve_token(g: Derivation, text: str | int, side: str = "encoder") -> int:
    """A token given as a position or as the word itself (its first occurrence).

    ``side="decoder"`` looks among the target tokens of the example's decoder.
    """
    if side == "decoder" and g.example.decoder is None:
        raise InputError(f"{g.example.source}: a target token needs an example with a "
                         "[decoder] table (see symformer/examples/encoder_decoder.toml)")
    tokens = g.example.decoder.tokens if side == "decoder" else g.example.tokens
    what = "target token" if side == "decoder" else "token"
    listing = ", ".join(f"{k} {t!r}" for k, t in enumerate(tokens))
    if isinstance(text, int) or str(text).strip().lstrip("-").isdigit():
        k = int(text)
        if 0 <= k < len(tokens):
            return k
        raise InputError(f"{what} position {k} is out of range; the {what}s are: {listing}")
    if text in tokens:
        return tokens.index(text)
    raise InputError(f"unknown {what} {text!r}; the {what}s are: {listing}")


def select(g: Derivation, patterns: tuple[str, ...] | None) -> list[Stage]:
    """The stages matching the glob patterns, in order; unknown patterns list every stage."""
    try:
        return g.select(list(patterns) if patterns else None)
    except InputError:
        import fnmatch

        bad = [p for p in patterns if not any(fnmatch.fnmatchcase(s.name, p) for s in g)]
        raise InputError(f"no stage matches {', '.join(map(repr, bad))}; the stages are: "
                         f"{', '.join(s.name for s in g)}") from None


def slug(name: str) -> str:
    """A file-name-safe form of a stage name (``layer1.head1.Q`` -> ``layer1-head1-Q``)."""
    return name.replace(".", "-")


#: Pre-norm blocks: the norm and the residual are sub-layers of their own, named for
#: what they are (an "Add & Norm" would add nothing), by the block's stage names.
PRE_NORM = {"norm1": "Norm before attention", "norm2": "Norm before the feed-forward network",
            "add_norm1": "Residual connection around attention",
            "add_norm2": "Residual connection around the feed-forward network",
            "final_norm": "Final norm"}


def _part_group(stage: Stage) -> str | None:
    """The group of the part of the block the stage's operation declares (a
    normalisation, any registered one, and its statistics: "Add & Norm")."""
    return GROUPS.get(stage.op.block_part)


def _pre_norm_group(stage: Stage) -> str | None:
    """The group of a pre-norm block's norm or residual stage (None for a post-norm
    block's, whose norm follows its residual: "Add & Norm")."""
    if _part_group(stage) != "Add & Norm":
        return None
    parts = stage.name.split(".")
    where = parts[0] if parts[0] == "final_norm" else parts[1] if len(parts) > 1 else ""
    if where.startswith("add_norm") and (len(parts) > 2 or not stage.op.residual):
        return None  # post-norm: layer1.add_norm1.sum, .mean, ... and layer1.add_norm1
    return PRE_NORM.get(where)


def _group(stage: Stage) -> str:
    if stage.op.about_input:  # a softmax row's Jacobian sits with its softmax
        stage = stage.derivation[stage.inputs[0]]
    if stage.side == "decoder":
        return decoder.group(stage)
    group = _pre_norm_group(stage) or _part_group(stage) or _title(stage)
    if group == "head":
        kv = re.search(r"\bkv_head(\d+)\.", stage.name)  # grouped-query attention
        group = (f"Key/value head {kv.group(1)}" if kv else f"Attention head {stage.head}"
                 if stage.head else "Scaled dot-product attention")  # given Q, K, V
    return group


def gqa_prose(stage: Stage) -> list[Prose]:
    """Grouped-query attention's mapping, said once: which query heads of ``stage``'s
    layer read which key/value head (from the dot products' inputs)."""
    layers: dict[int, dict[int, list[int]]] = {}
    for s in stage.derivation:
        if s.side == stage.side and s.head and s.op.matrix_form == "dot_products":
            kv = next((re.search(r"\bkv_head(\d+)\.", n) for n in s.inputs
                       if re.search(r"\bkv_head(\d+)\.", n)), None)
            if kv is not None:
                layers.setdefault(s.layer, {}).setdefault(int(kv.group(1)), []).append(
                    s.head)
    reads = layers.get(stage.layer)
    if not reads:
        return []
    alike = " (every layer alike)" if all(r == reads for r in layers.values()) else \
        f" (in layer {stage.layer})"

    def heads(h: list[int]) -> str:
        h = sorted(h)
        if len(h) == 1:
            return f"query head {h[0]} reads"
        run = h == list(range(h[0], h[-1] + 1))
        return (f"query heads {h[0]}\u2013{h[-1]} read" if run else
                "query heads " + ", ".join(map(str, h)) + " read")
    said = "; ".join(f"{heads(h)} key/value head {kv}" for kv, h in sorted(reads.items()))
    return [Prose((f"Grouped-query attention: {said}{alike}.",))]


def _part(stage: Stage) -> str:
    if stage.side == "decoder":
        return decoder.part(stage)
    if stage.layer:
        return f"Layer {stage.layer}"
    return part_of(stage)[-1]  # "Input" before the layers, "Output" after them


def _title(stage: Stage) -> str:
    """The stage's heading: its operation's title (a decoder adds where keys come from)."""
    if stage.side == "decoder":
        return decoder.title(stage)
    return stage.op.symbol.title


def caption(stage: Stage) -> str:
    """A table's caption: where the stage sits and its title (``Layer 1, Head 1: Query``)."""
    where, title = ", ".join(part_of(stage)), _title(stage)
    if title.split()[0].lower() == where.lower():  # "Input row", not "Input: Input row"
        return title + decoder.caption_note(stage)
    return f"{where}: {title}" + decoder.caption_note(stage)


def renames(stage: Stage) -> bool:
    """True for a stage inside a part that only names its input anew (a block without
    W_O: ``m = c``); it gets a sentence, not a section.  A part's final output keeps its
    section."""
    return stage.op.renames and not stage.op.final


def renaming_prose(stage: Stage) -> Prose:
    """The sentence that stands for a renaming stage's section (``m = c``, and why)."""
    g = stage.derivation
    source = g[stage.inputs[0]]
    equation = stage.op.equation([g[name].shape for name in stage.inputs])
    remark = (equation.remark if equation is not None else "") \
        or f"{_title(stage)} is {_title(source)}"
    text = remark[0].upper() + remark[1:] + ": "
    parts: list[str | Math] = []
    for k, piece in enumerate(text.split("W_O")):  # the matrix's name set as math
        parts += [Math("W_O")] if k else []
        parts += [piece] if piece else []
    return Prose((*parts, Math(f"{notation(stage).latex} = {notation(source).latex}"), "."))


def rope_prose(stage: Stage) -> Prose:
    """Why a RoPE model (or one without positions) shows no positional-encoding table."""
    pe = notation(stage).latex
    if stage.op.kind == "none":
        return Prose(("This model adds no positional encoding (", Math(f"{pe} = 0"),
                      ", so ", Math("x = e"), ": the input rows are the embeddings): "
                      "nothing in it depends on a token\u2019s position except through "
                      "the causal mask, if any.",))
    return Prose(("This model adds no positional encoding to the embeddings (",
                  Math(f"{pe} = 0"), ", so ", Math("x = e"), "). Positions enter inside "
                  "attention instead, by rotary position embeddings (RoPE): in every head "
                  "the query and the key of position ", Math("i"), " are rotated by angles "
                  "proportional to ", Math("i"), " (the rotated query ", Math(r"\tilde{q}"),
                  " and key ", Math(r"\tilde{k}"), " below), so a score depends on how far "
                  "apart the two positions are.",))


def masked_note(stage: Stage, row: int) -> str:
    """What the worked lines of ``row`` say of the entries the causal mask sets (they
    are not worked), or ``""`` when the row has none."""
    masked = [j for i, j in masked_entries(stage) if i == row]
    if not masked:
        return ""
    keys = "the later keys are" if all(j > row for j in masked) else \
        "the keys outside the attention window are"
    return f"; {keys} masked (their weight is exactly 0) and not worked"


def stage_fragments(stage: Stage, token: int, options: NotesOptions,
                    prefix: str = "", seen: set | None = None,
                    repeated: bool = False) -> list[Fragment]:
    """The equation, weights, table, worked example and matrix fragments of one stage.

    ``seen`` holds the weights printed so far (:func:`parameter_blocks`): a stage
    prints those it is the first to use; None prints none.  A ``repeated`` stage
    (computed as one worked before) prints its weights and its table only."""
    name = prefix + slug(stage.name)
    label = ("causal:" if prefix else "") + stage.name
    style = Style(options.decimals, options.exact)
    fragments = []
    equation = None if repeated else numbered_equation(stage)
    if equation is not None:
        fragments.append(Fragment(f"{name}-equation", [
            type(equation)(equation.lines, f"eq:{label}")]))
    weights = parameter_blocks(stage, seen) if seen is not None else []
    if weights:
        fragments.append(Fragment(f"{name}-weights", weights))
    if repeated:  # its values as a matrix, beside the others computed alike
        fragments.append(Fragment(f"{name}-table", [Matrices(((stage_matrix(
            stage, matrix_form.symbol(stage), decimals=options.decimals,
            exact=options.exact),),))]))
        return fragments
    text = caption(stage) + (", causal mask" if prefix else "")
    table = stage_table(stage, decimals=options.decimals, exact=options.exact,
                        highlight=token, caption=text + ".", label=f"tab:{label}")
    said = rounding_legend(options.decimals)  # the introduction says it once
    fragments.append(Fragment(f"{name}-table", [
        replace(table, legend=tuple(t for t in table.legend if t != said))]))
    proved = property_prose(stage, again=bool(prefix))  # prove's facts (issue 39, item 8)
    if proved is not None:
        fragments.append(Fragment(f"{name}-property", [proved]))
    worked, left = (None, 0) if repeated else worked_and_left(
        stage, token, style, masked=False, alike=None if options.full else ALIKE,
        long_only=True)
    if stage.op.jumps:  # the argmax indicator: the decision in words
        fragments.append(Fragment(f"{name}-decision", [decoder.next_token_prose(
            stage.derivation)]))
    if worked is not None:
        word, position = stage.rows[token], token + first_position(stage)
        omitted = ("; terms with a weight of exactly 0 are left out"
                   if omits_zero_terms(stage) else "") + masked_note(stage, token) + (
            "; the other entries are computed alike, and the table has them" if left
            else "")
        fragments.append(Fragment(f"{name}-worked", [Prose((
            f"Worked example for \u201c{word}\u201d (position {position}){omitted}:",)),
            worked]))
    fragments += inactive_fragments(stage, name)  # what the example leaves inactive
    fragments.append(Fragment(f"{name}-matrix", [stage_matrix(
        stage, matrix_latex(stage), decimals=options.decimals, exact=options.exact)]))
    if not prefix:  # the first head's scaled scores: why √d_k, with its numbers
        fragments += [Fragment(f"{name}-scale", [p]) for p in
                      scale_prose(stage, options.decimals)]
    return fragments


def target_token(g: Derivation, options: NotesOptions) -> int | None:
    """The decoder's worked token: the chosen one, or the last target position."""
    if g.example.decoder is None:
        return None
    last = len(g.example.decoder.tokens) - 1
    return last if options.target_token is None else options.target_token


def _introduction(g: Derivation, options: NotesOptions) -> list[Prose]:
    token = options.token
    lead = (f"The model: {architecture(g)}. "
            "Every number below is derived exactly and rounded with certified ball arithmetic "
            f"to {options.decimals} decimals (a table says so where it differs). "
            "A worked line computes with the numbers the "
            "tables print and rounds its result to the same decimals (an exact tie to "
            "even); where that differs from the table, the line gives the table\u2019s "
            "value too, as in ")
    text = (". The worked examples follow the token "
            f"\u201c{g.example.tokens[token]}\u201d at position {token}. "
            f"The sentence: {' '.join(g.example.tokens)}.")
    target = target_token(g, options)
    if target is not None:
        tokens = g.example.decoder.tokens
        text += (f" The decoder\u2019s worked examples follow the target token "
                 f"\u201c{tokens[target]}\u201d at position {target}. "
                 f"The target so far: {' '.join(tokens)}.")
    selected = select(g, options.stages)
    stages = [s for s in selected if not is_backward(s)]
    example = Math(r"\approx 2.788\ (\text{exact: } 2.789)")
    return [Prose((lead, example, text + _long_names(g))),
            *notation_blocks(stages, equation_sizes(selected))]


def notation_blocks(stages: list[Stage], sizes: Iterable[str] = ()
                    ) -> list[Glossary | Prose]:
    """The notation, declared once: a table of every symbol (:func:`glossary`, made
    true for this example by :func:`true_rows`; ``sizes``: the size names the
    equations use), how indices run and what a superscript says."""
    rows = true_rows(stages, tuple((n.latex, n.title) for n in glossary(stages, sizes)))
    inputs = {notation(s).latex: s for s in stages if no_positional_input(s)}
    rows = tuple((latex, input_title(inputs[latex], meaning) if latex in inputs else meaning)
                 for latex, meaning in rows)
    caption = "Notation: every symbol of these notes, once."
    rows, barred = _decoder_rows(rows)
    values = epsilon_values(stages)  # ε's value as math, as the notes print numbers
    pieces = [EPSILON_TITLE + " (here "]
    for k, value in enumerate(values):
        pieces += [", "] * (k > 0) + [Math(value.latex)]
    epsilon = Prose((*pieces, ")"))
    rows = tuple((latex, epsilon if latex == r"\varepsilon" and values else meaning)
                 for latex, meaning in rows)
    return [Glossary(caption, rows),
            _prose(INDEX_PIECES + (" ",) + superscript_pieces(stages) + barred)]


#: What :func:`symformer.notation.marked` adds to a decoder quantity's title.
IN_THE_DECODER = ", in the decoder"


def _decoder_rows(rows: tuple[tuple[str, str], ...]
                  ) -> tuple[tuple[tuple[str, str], ...], tuple[str | Notation, ...]]:
    """The notation table's rows with a barred symbol's "in the decoder" said once, in
    a sentence after the table (returned as pieces; none without a barred symbol)."""
    barred = [latex for latex, meaning in rows if meaning.endswith(IN_THE_DECODER)]
    if not barred:
        return rows, ()
    example = next((latex for latex in barred if latex == r"\bar{q}"), barred[0])
    meaning = dict(rows)[example].removesuffix(IN_THE_DECODER).lower()
    rows = tuple((latex, meaning.removesuffix(IN_THE_DECODER)) for latex, meaning in rows)
    return rows, (" A bar marks the decoder’s quantity named like the encoder’s (",
                  Notation(example, "", ""), f": the {meaning} in the decoder).")


#: The notation table's row of d_k, and what it says of the scores.
D_K = "d_{k}"


def true_rows(stages: list[Stage], rows: tuple[tuple[str, str], ...]
              ) -> tuple[tuple[str, str], ...]:
    """The notation table's rows as true for these stages: d_k says the scores are
    divided by its square root only when some are (an unscaled or otherwise scaled
    model divides by tau, defined in a row of its own, or by nothing)."""
    scales = {getattr(s.op, "scale", None) for s in stages
              if getattr(s.op, "name", "") == "scale_mask"}
    if not scales:
        return rows
    out = []
    for latex, meaning in rows:
        if latex == D_K and None not in scales:  # no score is divided by sqrt(d_k)
            meaning = "Width of a query and a key"
        out.append((latex, meaning))
    taus = sorted(str(c) for c in scales if c is not None)
    if taus:
        what = ("1: the scores are not scaled" if taus == ["1"] else
                "the scores are divided by it; here " + ", ".join(taus))
        out.append((r"\tau", f"Divisor of the scores ({what})"))
    return tuple(out)


def _prose(pieces) -> Prose:
    """Words and math pieces (:data:`symformer.notation.INDEX_PIECES`) as prose."""
    return Prose(tuple(p if isinstance(p, str) else Math(p.latex) for p in pieces if p))


def architecture(g: Derivation) -> str:
    """What the model is, in words: ``a decoder-only Transformer, 2 layers of 2 heads``."""
    example = g.example
    if example.decoder is not None:
        kind = "an encoder\u2013decoder Transformer"
    elif example.lm_head is not None or g.causal:
        kind = "a decoder-only Transformer (causal self-attention)"
    else:
        kind = "a Transformer encoder"
    layers = len(example.layers)
    heads = sorted({len(layer.heads) for layer in example.layers})
    text = f"{kind}; {plural(layers, 'layer')}"
    if heads:
        text += " of " + " or ".join(plural(h, "head") for h in heads)
    kv = sorted({len(layer.kv_heads) for layer in example.layers if layer.kv_heads})
    if kv:
        text += " sharing " + " or ".join(plural(h, "key/value head") for h in kv) + \
            " (grouped-query attention)"
    if example.decoder is not None:
        decoder = example.decoder.layers
        text = (text.replace("; ", "; the encoder: ", 1) + ", the decoder: "
                + plural(len(decoder), "layer") + _decoder_heads(decoder))
    return text


def _decoder_heads(layers) -> str:
    """The decoder layers' attention in words, a kind only where a layer has it:
    `` (masked self-attention of 2 heads and cross-attention of 1 head)``; layers that
    differ are said one by one (``layer 1: cross-attention of 1 head; layer 2: ...``),
    and a layer without self-attention is never said to have 0 heads."""
    def said(layer) -> str:
        kinds = [f"{kind} of {plural(len(heads), 'head')}" for kind, heads in
                 (("masked self-attention", layer.self_heads),
                  ("cross-attention", layer.cross_heads)) if heads]
        return " and ".join(kinds) or "no attention"
    each = [said(layer) for layer in layers]
    if len(set(each)) == 1:
        return f" ({each[0]})"
    return " (" + "; ".join(f"layer {k}: {s}" for k, s in enumerate(each, 1)) + ")"


def _long_names(g: Derivation) -> str:
    """Says that tables and formulas shorten long names (:func:`short_name`), and gives
    in full those not in the sentences above."""
    decoder = g.example.decoder
    names = [*g.example.vocab, *(decoder.vocab if decoder is not None else ())]
    if all(short_name(n) == n for n in names):
        return ""
    shown = {*g.example.tokens, *(decoder.tokens if decoder is not None else ())}
    rest = [n for n in dict.fromkeys(names) if short_name(n) != n and n not in shown]
    full = ("; in full: " + "; ".join(f"\u201c{n}\u201d" for n in rest)) if rest else ""
    return f" Names longer than {LABEL_CHARS} characters are shortened in the tables and " \
           f"formulas{full}."


def legend_prose(notes: Iterable[Notation]) -> Prose:
    """The legend as a paragraph with inline math (LaTeX documents, Markdown exports)."""
    parts: list[str | Math] = ["Notation: "]
    for k, n in enumerate(notes):
        parts += ["; " if k else "", Math(n.latex), f": {n.title}"]
    parts += [". ", *_prose(INDEX_PIECES).parts]
    return Prose(tuple(p for p in parts if p != ""))



def build(g: Derivation, options: NotesOptions,
          progress: Callable[[int, int, str], None] | None = None
          ) -> list[Section | Heading | Prose]:
    """The document's outline: headings, prose, and each stage's fragments.

    ``progress(k, total, name)`` is called before stage ``k`` of ``total`` is rendered.

    With a decoder, the encoder and the decoder are two parts, and ``options.steps``
    adds a greedy-generation section at the end.  When the example has a ``[loss]``
    (and ``options.backward``), a Backward part follows
    (:mod:`symformer.latex.backward`), built on a copy of ``g`` with its gradients.
    """
    if options.backward:
        g = with_backward_pass(g)
    selected = select(g, options.stages)
    stages = [s for s in selected if not is_backward(s)]
    token, target = options.token, target_token(g, options)
    out: list = [*_introduction(g, options)]
    part = group = side = None
    # no variant where the model is causal, or where its decoder's masked
    # self-attention is worked (the variant would show that step twice)
    causal_done = g.causal or g.example.decoder is not None
    chosen = {s.name for s in stages}
    seen: set = set()  # the weights printed so far
    repeats, said = Repeats(), None  # the first stage of each computation; the sentence
    matrix_said = False  # the sentence that introduces the matrix forms
    gqa_said = False  # grouped-query attention's mapping
    for k, stage in enumerate(stages, start=1):
        if progress:
            progress(k, len(stages), stage.name)
        if target is not None and stage.side != side:
            side = stage.side
            out.append(Heading(side.capitalize(), 0))
        if _part(stage) != part:
            part, group = _part(stage), None
            out.append(Heading(part, 1))
            if stage.layer > 1:
                out.append(Prose((f"Layer {stage.layer} is stacked on layer {stage.layer - 1}: "
                                  "its input is the previous layer\u2019s output.",)))
        if not causal_done and stage.layer == 1 and group and group.startswith(
                "Attention head") and not _group(stage).startswith("Attention head"):
            out.extend(causal_section(g, chosen, token, options))
            causal_done = True
        if renames(stage):
            out.append(renaming_prose(stage))
            continue
        if no_positional_input(stage):  # x = e, said with the positional encoding
            continue
        if no_positional_table(stage):
            out.append(Section(Heading(_title(stage), 3 if _group(stage) != part else 2),
                               [Fragment(f"{slug(stage.name)}-rope", [rope_prose(stage)])]))
            group = _group(stage)
            continue
        if _group(stage) != group:
            group = _group(stage)
            if group != part:  # "3 Output / 3.1 Output" says it twice
                out.append(Heading(group, 2))
            if group == "Key/value head 1" and not gqa_said:  # said once, where first met
                out += gqa_prose(stage)
                gqa_said = True
            if not options.full:
                shown = [s for s in _run(stages, k - 1, part, group)
                         if not repeats.seen(s)]
                out.extend(matrix_blocks(shown, first=not matrix_said))
                matrix_said = matrix_said or bool(shown and matrix_lines_of(shown))
        row = decoder.worked_row(stage, token, target) if target is not None else token
        row = min(row, stage.shape[0] - 1)  # next_token: one row, the last position's
        level = 2 if group == part else 3
        first = repeats.first(stage)
        if first is not stage and not options.full:
            sentence = repeat_prose(first)
            if sentence != said or out[-1] == Heading(group, 2):
                out.append(sentence)
                said = sentence
            out.append(Section(None, stage_fragments(stage, row, options, seen=seen,
                                                     repeated=True)))
            continue
        said = None
        out.append(Section(Heading(_title(stage), level),
                           stage_fragments(stage, row, options, seen=seen)))
    out = packed(_weights_first(out))
    if options.steps:
        out.extend(decoder.generation_section(g, options.steps, options.decimals,
                                              options.max_work))
    out.extend(decoding_sections(g, options.steps, options.decimals, options.max_work))
    if options.backward:
        out.extend(backward_part(g, [s for s in selected if is_backward(s)], token, target,
                                 options.decimals, options.exact,
                                 0 if target is not None else 1, options.full))
    return out


def _weights_first(outline: list) -> list:
    """Each run of heading-less sections (stages shown by their tables) with their
    weights' matrices gathered into one display before the tables, side by side
    where they fit, so the tables can stand side by side too."""
    out: list = []
    run: list[Section] = []

    def flush() -> None:
        weights = [f for s in run for f in s.fragments if f.name.endswith("-weights")]
        if weights:
            blocks = [m for f in weights for b in f.blocks if isinstance(b, Matrices)
                      for line in b.lines for m in line]
            words = "Their weights:" if len(blocks) > 1 else "Its weight:"
            out.append(Section(None, [Fragment(weights[0].name, [
                Prose((words,)), Matrices(matrix_lines(blocks, MATRIX_WIDTH))])]))
        for s in run:
            out.append(Section(None, [f for f in s.fragments
                                      if not f.name.endswith("-weights")]))
        run.clear()

    for item in outline:
        if isinstance(item, Section) and item.heading is None:
            run.append(item)
            continue
        flush()
        out.append(item)
    flush()
    return out


def _run(stages: list[Stage], k: int, part: str, group: str) -> list[Stage]:
    """The stages from ``stages[k]`` on that stay in ``part`` and ``group``."""
    out = []
    for stage in stages[k:]:
        if _part(stage) != part or _group(stage) != group:
            break
        out.append(stage)
    return out


def matrix_lines_of(stages: list[Stage]) -> tuple[tuple[str, str], ...]:
    """The matrix-form display lines of a group's stages (:mod:`.matrix_form`)."""
    return matrix_form.equation_lines(stages, shapes=True)


def matrix_blocks(stages: list[Stage], first: bool) -> list:
    """A group's sub-layer in matrix form, as textbooks write it, before its stages'
    index forms: a sentence (the first time saying what the capitals are) and one
    numbered display."""
    rows = matrix_lines_of(stages)
    if not rows:
        return []
    words = ("In matrix form, as textbooks write it (a capital letter is a table as a "
             "matrix, one row per token; a one-row bias is added to every row):"
             if first else "In matrix form:")
    return [Prose((words,)), Equation(rows, f"eq:matrix:{stages[0].name}")]


def repeat_prose(first: Stage) -> Prose:
    """The sentence over the tables of stages computed as ``first`` was worked."""
    where = ", ".join(part_of(first))
    return Prose((f"Computed as in {where} above, with its own inputs and weights:",))


def causal_section(g: Derivation, chosen: set[str], token: int, options: NotesOptions) -> list:
    """Layer 1's scores and weights again under the causal mask (a head computed as
    one before shows its tables only, unless ``options.full``)."""
    causal = derive(g.example, causal=True, max_work=options.max_work)
    stages = [s for s in causal if s.layer == 1 and s.op.shows_mask
              and s.side == "encoder" and s.name in chosen]
    if not stages:
        return []
    out: list = [Heading("Variant: causal self-attention", 2), Prose((
        "A variant the rest of these notes does not use: a decoder may not look ahead; "
        "the causal mask sets every score of a later key to ",
        Math(r"-\infty"), ", so its weight is exactly 0.",))]
    repeats = Repeats()  # the masked scores are worked again: their rule differs
    said = None
    for stage in stages:
        first = repeats.first(stage)
        if first is not stage and not options.full:
            sentence = Prose((f"Computed as for head {first.head} under the mask, by the "
                              "same equations; the results, one row per token:",))
            if sentence != said:
                out.append(sentence)
                said = sentence
            out.append(Section(None, stage_fragments(stage, token, options, prefix="causal-",
                                                     repeated=True)))
            continue
        out.append(Section(Heading(f"{_title(stage)}, head {stage.head}, causal", 3),
                           stage_fragments(stage, token, options, prefix="causal-")))
    return out


#: The notes' preamble.  ``\hfuzz=0.5pt``: a line at most half a point (0.18 mm) past
#: the margin is not reported overfull (TeX's default tolerance is 0.1 pt; a worked
#: line's width is estimated from its characters, and a prime can tip one over by a
#: fraction of a point, invisible in print).
PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{lmodern}
\usepackage[a4paper,hmargin=2.1cm,top=1.7cm,bottom=1.9cm]{geometry}
%(packages)s
\usepackage{float}
\usepackage{longtable}
\usepackage{tikz}
\floatplacement{table}{H}
\usepackage[position=top,skip=4pt,font=small]{caption}
\setlength{\intextsep}{6pt plus 2pt minus 2pt}
\setlength{\emergencystretch}{2em}
\hfuzz=0.5pt
\allowdisplaybreaks
\makeatletter
\renewcommand\subsection{\@startsection{subsection}{2}{\z@}{-2ex\@plus -1ex \@minus -.2ex}%%
  {1ex \@plus .2ex}{\normalfont\large\bfseries}}
\renewcommand\subsubsection{\@startsection{subsubsection}{3}{\z@}%%
  {-1.75ex\@plus -.75ex \@minus -.2ex}{.75ex \@plus .2ex}{\normalfont\normalsize\bfseries}}
\g@addto@macro\normalsize{\setlength\abovedisplayskip{6pt \@plus 2pt \@minus 2pt}%%
  \setlength\belowdisplayskip{6pt \@plus 2pt \@minus 2pt}%%
  \setlength\abovedisplayshortskip{2pt \@plus 2pt}%%
  \setlength\belowdisplayshortskip{4pt \@plus 2pt \@minus 2pt}}
\makeatother
"""

#: A step (heading, equation, weights, table) is set in a box first.  When it fits on
#: the rest of this page it stays; when it does not and less than :data:`BREAK_ROOM`
#: of the page is left, it starts a new page (what the needspace package does, measured
#: instead of guessed); with more room left, its contents break where TeX may (never
#: right after a heading, never inside a table), so no page is left half empty.  The
#: worked lines follow outside the box: they may start the next page, between their
#: displays' lines.
BREAK_ROOM = r"0.1\textheight"
STEP_MACROS = r"""\makeatletter
\newsavebox{\symformer@step}
\newcommand{\symformerneed}[1]{\par\penalty-100\begingroup\setlength{\dimen@}{#1}%
  \dimen@ii\pagegoal\advance\dimen@ii-\pagetotal
  \ifdim\dimen@>\dimen@ii\ifdim\dimen@ii<ROOM
    \ifdim\dimen@ii>\z@\vfil\fi\penalty-\@M\fi\fi\endgroup}
\newenvironment{step}{\par\setbox\symformer@step\vbox\bgroup}{\par\egroup
  \ifdim\dimexpr\ht\symformer@step+\dp\symformer@step\relax<\textheight
    \symformerneed{\dimexpr\ht\symformer@step+\dp\symformer@step\relax}\fi
  \unvbox\symformer@step}
\makeatother
""".replace("ROOM", BREAK_ROOM)


#: The most tables set side by side (in small type), and the widest table
#: (:func:`table_chars`; a character is about 5 pt in small type, the line 470 pt; a
#: table up to a tenth wider than its share is shrunk to it) for each count.
SIDE_BY_SIDE = {3: 31, 2: 49}


def _share(count: int) -> str:
    """The width of one of ``count`` minipages side by side, as a share of the line."""
    return {1: "1.0", 2: "0.48", 3: "0.31"}[count]


def _tables_only(item) -> Table | None:
    """The table of a heading-less section that shows nothing but it."""
    if not isinstance(item, Section) or item.heading is not None:
        return None
    shown = [f for f in item.fragments if not f.name.endswith("-matrix")]
    if len(shown) != 1 or not shown[0].name.endswith("-table"):
        return None
    block = shown[0].blocks[0]
    return block if isinstance(block, Table) else None


def _side_by_side(outline: list) -> list:
    """The outline with each run of heading-less table-only sections grouped into rows
    of tables set side by side (a list of rows, each a list of sections), as many to
    a row as :data:`SIDE_BY_SIDE` lets fit."""
    out: list = []
    run: list[Section] = []

    def flush() -> None:
        rows: list[list[Section]] = []
        for section in run:
            chars = table_chars(_tables_only(section))
            if rows:
                row = rows[-1]
                count = len(row) + 1
                widest = max(chars, *(table_chars(_tables_only(s)) for s in row))
                if count in SIDE_BY_SIDE and widest <= SIDE_BY_SIDE[count]:
                    row.append(section)
                    continue
            rows.append([section])
        if rows:
            out.append(rows)
        run.clear()

    for item in outline:
        if _tables_only(item) is not None:
            run.append(item)
            continue
        flush()
        out.append(item)
    flush()
    return out


#: The widest table (:func:`table_chars`) set beside its worked lines, and the fewest
#: characters those lines keep.
BESIDE_TABLE, BESIDE_ROOM = 30, 30


def _parts(section: Section) -> tuple[Table | None, Worked | None]:
    table = next((b for f in section.fragments if f.name.endswith("-table")
                  for b in f.blocks if isinstance(b, Table)), None)
    worked = next((b for f in section.fragments if f.name.endswith("-worked")
                   for b in f.blocks if isinstance(b, Worked)), None)
    return table, worked


def _beside(section: Section) -> int:
    """The characters left to a section's worked lines when its table is set beside
    them (0: under them): a narrow table, and lines that fit the rest of the line."""
    table, worked = _parts(section)
    if table is None or worked is None or section.heading is None:
        return 0
    chars = table_chars(table)
    room = TEXT_WIDTH - chars - 4
    if chars > BESIDE_TABLE or room < BESIDE_ROOM or worked_width(worked) > room:
        return 0
    return room


def _beside_latex(section: Section, pending: list[str], directory: str,
                  files: dict[str, str]) -> str:
    """A step whose worked lines stand left of its table (minipages, top-aligned)."""
    room = _beside(section)
    step = [*pending, to_latex(section.heading)]
    left = right = ""
    for fragment in section.fragments:
        path = f"{directory}/{fragment.name}.tex"
        if fragment.name.endswith("-worked"):
            files[path] = "\n\n".join(worked_latex(b, room) if isinstance(b, Worked)
                                        else to_latex(b) for b in fragment.blocks) + "\n"
            left = f"\\input{{{path}}}"
            continue
        files[path] = to_latex(fragment)
        if fragment.name.endswith("-table"):
            right = f"\\input{{{path}}}"
        elif not fragment.name.endswith("-matrix"):
            step.append(f"\\input{{{path}}}")
    share = round((TEXT_WIDTH - room - 2) / TEXT_WIDTH, 2)
    step.append(f"\\noindent\\begin{{minipage}}[t]{{{1 - share - 0.02:.2f}\\linewidth}}\n"
                f"{left}\n\\end{{minipage}}\\hfill\n"
                f"\\begin{{minipage}}[t]{{{share:.2f}\\linewidth}}\n{right}\n"
                "\\end{minipage}")
    return "\\begin{step}\n" + "\n\n".join(step) + "\n\\end{step}"


def latex_files(g: Derivation, outline: list, directory: str = "fragments",
                figures: dict[str, str] | None = None, figure_preamble: str = ""
                ) -> dict[str, str]:
    """``main.tex`` and one ``.tex`` file per fragment (paths relative to the output).

    ``figures`` (relative path -> LaTeX, e.g. ``figures/NAME.tex``), when given, are
    written too and ``\\input`` in a final *Figures* part, with ``figure_preamble``
    (the packages they need) added to the preamble; without them nothing changes.
    """
    files: dict[str, str] = {}
    body: list[str] = []
    pending: list[str] = []  # headings and prose that open the next step: kept with it
    for item in _side_by_side(outline):
        if isinstance(item, list):  # tables only, set side by side
            for row in item:
                cells = []
                for section in row:
                    fragment = next(f for f in section.fragments
                                    if f.name.endswith("-table"))
                    path = f"{directory}/{fragment.name}.tex"
                    files[path] = to_latex(fragment)
                    for other in section.fragments:
                        if other is not fragment:
                            files[f"{directory}/{other.name}.tex"] = to_latex(other)
                    small = "\\small" if len(row) > 1 else ""
                    cells.append(f"\\begin{{minipage}}[t]{{{_share(len(row))}\\linewidth}}"
                                 f"{small}\n\\input{{{path}}}\n\\end{{minipage}}")
                body.append("\\begin{step}\n" + "".join(p + "\n\n" for p in pending)
                            + "\\noindent" + "\\hfill\n".join(cells) + "\n\\end{step}")
                pending = []
            continue
        if isinstance(item, Section) and _beside(item):
            body.append(_beside_latex(item, pending, directory, files))
            pending = []
            continue
        if isinstance(item, Section):
            heading = [to_latex(item.heading)] if item.heading is not None else []
            step, after, pending = [*pending, *heading], [], []
            for fragment in item.fragments:
                path = f"{directory}/{fragment.name}.tex"
                files[path] = to_latex(fragment)
                if fragment.name.endswith("-worked"):  # may start the next page
                    after.append(f"\\input{{{path}}}")
                elif not fragment.name.endswith("-matrix"):
                    step.append(f"\\input{{{path}}}")
            body.append("\\begin{step}\n" + "\n\n".join(step) + "\n\\end{step}"
                        + "".join(f"\n{line}" for line in after))
        elif isinstance(item, Glossary):  # may break across pages: never in a step's box
            body += [*pending, to_latex(item)]
            pending = []
        else:
            pending.append(to_latex(item))
    body += pending
    packages = "\n".join(PACKAGES)
    if figures:
        packages += "\n" + figure_preamble.rstrip("\n")
        top = 0 if any(isinstance(i, Heading) and i.level == 0 for i in outline) else 1
        body.append(to_latex(Heading("Figures", top)))
        for path, text in figures.items():
            files[path] = text
            body.append(f"\\input{{{path}}}")
    title = latex_text(with_causal_mask(g.example.title, g.causal), breaks=True)
    # the block diagram opens the notes, one head's data flow beside it
    from symformer.latex import head_flow

    main = (PREAMBLE % {"packages": packages} + STEP_MACROS
            + f"\\title{{{title}}}\n\\author{{Derived exactly by symformer}}\n\\date{{}}\n"
            + "\\begin{document}\n\\maketitle\n\n" + head_flow.opening_latex(g) + "\n"
            + "\n\n".join(body)
            + "\n\n\\end{document}\n")
    files["main.tex"] = main
    return files
