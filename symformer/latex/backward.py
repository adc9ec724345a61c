"""The export's Backward part: the loss, then every gradient from the loss back to the
embeddings, as a lecturer teaches backpropagation.

When the example has a ``[loss]``, :func:`symformer.blocks.backward.backward` appends
the loss and the gradient stages (``grad.S`` = dL/dS) to the derivation, latest stage
first -- the order this part follows.  Each gradient stage of a token's rows gets

* its general equation: the backward rule of each step that reads S (its consumers),
  the operation's declared index equation (``Operation.backward_equation``, printed
  by :mod:`symformer.equations.render` and proved equal to its exact local formula)
  -- for instance dL/ds_j = alpha_j (dL/dalpha_j - sum_k alpha_k dL/dalpha_k);
* the chosen token's chain-rule lines: the gradient stage's local formula (a sum of
  its consumers' rules over stage symbols) with every number substituted, built by the
  generic worked-line machinery (:mod:`symformer.worked`), so every line is
  recomputable from numbers printed before it.

A weight's gradient (a sum over every token) follows the gradient at its step.  Gradients span
magnitudes, so each block (a gradient's table and worked lines) prints its numbers at
one number of significant digits, the fewest from 4 up with which every worked line
lands on its table (:mod:`symformer.worked.significant`).  A gradient computed by the
same rules as one worked before (the other heads, the other layers) comes after it and
shows its table under a heading of its part and one sentence
(:mod:`symformer.latex.repeats`), unless ``full``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from symformer import math_scripts as scripts
from symformer.blocks.backward import with_gradients
from symformer.engine import Derivation, Stage
from symformer.latex import decoder, matrix_form
from symformer.latex.blocks import (
    Equation,
    Fragment,
    Heading,
    Math,
    Matrices,
    MatrixBlock,
    Prose,
)
from symformer.latex.equations import numbered_equation
from symformer.latex.inactive import inactive_fragments
from symformer.latex.numbers import decimal
from symformer.latex.outline import Section
from symformer.latex.parameters import MATRIX_WIDTH, fits_line, matrix_lines
from symformer.latex.places import where as part_of
from symformer.latex.positional import input_title
from symformer.latex.render import TEXT_WIDTH, width
from symformer.latex.repeats import Repeats
from symformer.latex.tables import first_position, stage_table
from symformer.latex.worked import Style, worked_and_left
from symformer.notation import notation
from symformer.worked.significant import DEFAULT_DIGITS, SignificantValues, choose_digits

#: More decimals than the forward part prints, for closed forms' decimals (``--exact``).
EXTRA_DECIMALS = 2


def is_backward(stage: Stage) -> bool:
    """True for the loss and the gradient stages."""
    return loss_step(stage) or stage.op.is_gradient


def loss_step(stage: Stage) -> bool:
    """True for the loss or its per-position terms (by their operations' declarations)."""
    return stage.op.is_loss or stage.op.per_position_of is not None


def with_backward_pass(g: Derivation) -> Derivation:
    """``g`` with the loss and the gradients when the example has a ``[loss]`` (a copy:
    ``g`` is left as it is), else ``g``."""
    return g if g.example.loss is None else with_gradients(g)


def taught(stage: Stage) -> bool:
    """A stage with worked lines: the loss, or the gradient at a stage of token rows
    (not the seed dL/dL = 1)."""
    if loss_step(stage):
        return True
    source = stage.name.removeprefix("grad.")
    g = stage.derivation
    return stage.op.of_stage and source in g and source != "loss" \
        and g[source].rows == stage.rows


def worked_row(stage: Stage, token: int, target: int | None) -> int:
    if stage.op.per_position_of:  # the loss of the token followed
        return min(token if target is None else target, stage.shape[0] - 1)
    if not stage.op.of_stage:
        return 0
    source = stage.derivation[stage.name.removeprefix("grad.")]
    row = decoder.worked_row(source, token, target) if target is not None else token
    return min(row, stage.shape[0] - 1)


def _where(stage: Stage) -> tuple[str, tuple[str, ...]]:
    """The part a stage's section sits in (``Layer 1``, ``Decoder, Layer 1``, ``Output``)
    and where within it (``Head 1``)."""
    if loss_step(stage):
        return "Loss", ()
    where = part_of(stage)
    k = next((i for i, p in enumerate(where) if p.startswith("Layer")), len(where) - 1)
    return ", ".join(where[:k + 1]), where[k + 1:]


def _title(stage: Stage) -> str:
    """The stage's heading: where it sits within its part, and its gradient's title."""
    return ", ".join([*_where(stage)[1], _gradient_title(stage)])


#: The words of a symbol's title that say where it sits (:mod:`symformer.notation`'s
#: primes and bars), said again by a heading's or caption's place.
_SUBLAYER_WORDS = re.compile(r" \((?:second|third|fourth) sub-layer\)")
_DECODER_WORDS = ", in the decoder"


def _gradient_title(stage: Stage) -> str:
    """The gradient's title without the words its place already says: "(third
    sub-layer)" under "Add & Norm 3" (or any place within a layer), ", in the decoder"
    in the decoder's part."""
    part, within = _where(stage)
    title = stage.op.symbol.title
    source = stage.name.removeprefix("grad.")
    if stage.op.of_stage and source in stage.derivation:  # x = e where no PE is added
        title = input_title(stage.derivation[source], title)
    if within:
        title = _SUBLAYER_WORDS.sub("", title)
    if part.startswith("Decoder"):
        title = title.replace(_DECODER_WORDS, "")
    return title


#: Of a run of entries worked alike (``dL/dq_0``, ``dL/dq_1``, ...), how many lines a
#: gradient's block works (its table has every entry), unless ``full``.
ALIKE = 1


def worked_values(stage: Stage, row: int, decimals: int, exact: bool, alike: int | None):
    """The worked lines and the values they and the table print: at the fewest
    significant digits (from :data:`DEFAULT_DIGITS`) with which every line lands on
    its table (no line's result differs from the table's); when none up to
    :data:`~symformer.worked.significant.MOST_DIGITS` does, the digits with the
    fewest lines off (each then gives its table's value too)."""
    found: dict[int, tuple] = {}

    def lands(digits: int) -> bool:
        values = SignificantValues(digits, table_stage=stage.name)
        # a part's sum (Σ_k α_k ∂L/∂α_k) is rounded at the style's decimals: enough
        # for its significant digits too
        style = Style(max(decimals, digits + 2), exact)
        worked, left = worked_and_left(stage, row, style, values, alike=alike)
        off = 0 if worked is None else sum(i.exact is not None for i in worked.items)
        found[digits] = (worked, values, left, off)
        return off == 0

    digits = choose_digits(lands)
    if found[digits][3]:
        digits = min(found, key=lambda d: (found[d][3], d))
    return found[digits][:3]


def weight_kind(stage: Stage) -> tuple | None:
    """What kind of weight a weight's gradient is of: its step's operation and the
    weight's place among the operation's (a projection's matrix, its bias; a norm's
    gain, its shift; an embedding table), None for a stage's gradient."""
    if not stage.op.of_weight or not getattr(stage.op, "terms", ()):
        return None
    term = stage.op.terms[0]
    names = list(term.op.parameters())
    return type(term.op), names.index(term.wrt) if term.wrt in names else term.wrt


def _fragments(stage: Stage, row: int, decimals: int, exact: bool,
               repeated: bool = False, full: bool = False,
               said: set | None = None) -> list[Fragment]:
    """A stage's fragments: its matrix form (said as such the first time, ``said``
    remembering), index form, table and worked lines; a weight's gradient is worked
    at one entry for the first weight of each kind (:func:`weight_kind`) not exactly 0
    (``said`` remembers those too; every one with ``full``)."""
    said = set() if said is None else said
    name = stage.name.replace(".", "-")
    out = []
    through = passes_through(stage)  # its index form and numbers would repeat the row's
    equation = None if repeated else numbered_equation(stage)
    if equation is not None and equation.lines:
        out += _matrix_fragments(stage, name, "matrix" not in said)
        said.add("matrix")
        if not through:
            out.append(Fragment(f"{name}-equation", [equation]))
    inactive = inactive_fragments(stage, name)  # a weight's gradient exactly 0, and why
    weight = not repeated and stage.op.of_weight and not inactive and (
        full or weight_kind(stage) not in said)
    if weight:
        said.add(weight_kind(stage))
    works = weight or (not repeated and not stage.op.of_weight and taught(stage)
                       and not through)
    alike = None if full or not (stage.op.of_stage or weight) else ALIKE
    worked, values, left = worked_values(stage, row, decimals, exact, alike) if works else \
        (None, SignificantValues(DEFAULT_DIGITS), 0)
    matrix = said_before(stage, gradient_matrix(stage, values), repeated)
    if ((stage.op.of_weight and as_matrix(stage)) or (
            repeated and stage.op.of_stage)) and fits_line(matrix):
        out.append(Fragment(f"{name}-table", [Matrices(((matrix,),))]))
        out += inactive
        return out + _weight_worked(stage, name, worked, row)
    if stage.op.of_weight or stage.op.per_position_of or repeated or left:
        table = stage_table(stage, decimals=decimals, exact=exact, caption=_caption(stage),
                            label=f"tab:{stage.name}", significant=values,
                            highlight=row if stage.op.of_stage else None)
        said = f"Values correctly rounded to {DEFAULT_DIGITS} significant digits."
        out.append(Fragment(f"{name}-table", [  # the introduction says the default
            replace(table, legend=tuple(t for t in table.legend if t != said))]))
        out += inactive
        if stage.op.of_weight or repeated:
            return out + _weight_worked(stage, name, worked, row)
    if worked is not None:
        text = "The loss, from every token\u2019s output:" if stage.op.is_loss else (
            f"For \u201c{stage.rows[row]}\u201d (position {row + first_position(stage)})"
            + ("; the other entries are computed alike, and the table has them:" if left
               else ":"))
        out.append(Fragment(f"{name}-worked", [Prose((text,)), worked]))
    return out


def said_before(stage: Stage, matrix: MatrixBlock, repeated: bool) -> MatrixBlock:
    """A gradient the page need not print entry by entry: exactly 0 at every entry (each
    printed ``0`` is proved 0) as ``∂L/∂W = 0``; a repeated step that hands its upstream
    gradient on unchanged (:func:`passes_through`: a residual's branch), printed just
    before, as ``∂L/∂m = ∂L/∂r′``."""
    if all(v == "0" for row in matrix.rows for v in row):
        return replace(matrix, value="0")
    if repeated and stage.op.of_stage and passes_through(stage):
        upstream = [u for *_, u in matrix_form.terms(stage)]
        if len(upstream) == 1:
            g = stage.derivation
            return replace(matrix, value=scripts.display(notation(g[upstream[0]]).latex))
    return matrix


def passes_through(stage: Stage) -> bool:
    """Does the step hand its upstream gradient on unchanged (a residual's branch, the
    input without an additive positional encoding, a final output): its matrix form is
    ∂L/∂A = ∂L/∂B, and its index form would say the same entry by entry."""
    rows = matrix_form.backward_lines(stage)
    return bool(rows) and all(
        rhs.startswith(r"\frac{\partial L}{\partial ") and rhs.count(r"\frac") == 1
        and not any(op in rhs for op in ("+", "-", r"\,", r"\odot", r"\cdot", r"\bigl"))
        for _, rhs in rows)


def _weight_worked(stage: Stage, name: str, worked, row: int) -> list[Fragment]:
    """A weight's gradient worked at one entry of its row ``row``: a sum over the tokens
    (the other entries are computed alike; the table above has them)."""
    if worked is None or not stage.op.of_weight:
        return []
    what = "" if stage.shape == (1, 1) else " (the other entries are computed alike)"
    return [Fragment(f"{name}-worked", [Prose((
        f"Worked for one entry, a sum over the tokens{what}:",)), worked])]


def _broken(lhs: str, rhs: str) -> str:
    """A sum of consumers' rules too wide for the page, broken after its terms (each
    continuation line indented under the ``=``)."""
    if width(f"{lhs} = {rhs}") <= TEXT_WIDTH - 6 or " + " not in rhs:  # 6: the number
        return rhs
    lines: list[str] = []
    for term in rhs.split(" + "):
        if lines and width(f"{lhs} = {lines[-1]} + {term}") <= TEXT_WIDTH - 6:
            lines[-1] += f" + {term}"
        else:
            lines.append(term)
    return r" \\ &\qquad + ".join(lines)


def _matrix_fragments(stage: Stage, name: str, first: bool) -> list[Fragment]:
    """The step in matrix form before its index form (:func:`matrix_form.backward_lines`;
    said so the ``first`` time); at the logits of a cross-entropy's probabilities the
    textbook's one line, the softmax's general rule (which the worked lines follow)
    then a remark."""
    rows = matrix_form.backward_lines(stage)
    if not rows:
        return []
    if matrix_form.cross_entropy_logits(stage) is not None:
        words = ("In matrix form, the softmax and the cross-entropy in one line (",
                 Math("Y"), ": the targets one-hot, one row per position; ", Math("n"),
                 ": the positions with a target):")
        after = ("The softmax\u2019s general rule, which the worked lines follow, gives "
                 "the same:",)
    else:
        words, after = ("Each step in matrix form (a capital letter is a table as a "
                        "matrix, one row per token), then entry by entry:",) \
            if first else (), None
    rows = tuple((lhs, _broken(lhs, rhs)) for lhs, rhs in rows)
    out = [Fragment(f"{name}-matrix-form", [
        *([Prose(words)] if words else []), Equation(rows, f"eq:matrix:{stage.name}")])]
    if after is not None:
        out.append(Fragment(f"{name}-general", [Prose(after)]))
    return out


def preferred(shown: list[Stage]) -> Repeats:
    """The gradients worked in full: of stages computed alike, the first met from the
    loss (:func:`ordered` puts a layer's first head first)."""
    repeats = Repeats(sides=False)  # the encoder's gradients follow the decoder's rules
    for stage in shown:
        repeats.first(stage)
    return repeats


def as_matrix(stage: Stage) -> bool:
    """Whether a weight's gradient prints as a matrix, as the weight itself does: its
    rows are the weight's (not the embedding table's tokens)."""
    source = stage.derivation[stage.inputs[0]]
    return stage.shape[0] == 1 or stage.rows == source.cols


def gradient_matrix(stage: Stage, values: SignificantValues) -> MatrixBlock:
    """A gradient as ``dL/dW = [matrix]`` at significant digits (a weight's, or the
    rows of a stage computed as one worked before)."""
    return MatrixBlock(scripts.display(notation(stage).latex), tuple(
        tuple(decimal(t) for t in row) for row in values.table(stage)))


def packed(outline: list) -> list:
    """The outline with each run of heading-less sections that hold one matrix each
    (the gradients of weights shown before) merged into one display, the matrices side
    by side where they fit (:func:`symformer.latex.parameters.matrix_lines`)."""
    out: list = []
    for item in outline:
        block = _lone_matrix(item)
        last = _lone_matrix(out[-1]) if out and block is not None else None
        if block is not None and last is not None:
            previous = out[-1].fragments[0]
            blocks = [m for line in previous.blocks[0].lines for m in line]
            previous.blocks = [Matrices(matrix_lines([*blocks, block], MATRIX_WIDTH))]
            continue
        out.append(item)
    return out


def _lone_matrix(item) -> MatrixBlock | None:
    if not isinstance(item, Section) or item.heading is not None or len(item.fragments) != 1:
        return None
    blocks = item.fragments[0].blocks
    if len(blocks) == 1 and isinstance(blocks[0], Matrices):
        return blocks[0].lines[-1][-1] if len(blocks[0].lines) == 1 and len(
            blocks[0].lines[0]) == 1 else None
    return None


def _caption(stage: Stage) -> str:
    """A table's caption: where the gradient sits, and its title."""
    part, within = _where(stage)
    where = ", ".join(p for p in (part if part != "Loss" else "", *within) if p)
    return f"{where}: {_gradient_title(stage)}." if where else f"{stage.op.symbol.title}."


def _introduction(g: Derivation, token: int, target: int | None) -> Prose:
    loss = g.example.loss
    how = "the sum" if loss.reduction == "sum" else "the mean"
    some = "" if loss.positions is None and "" not in (loss.targets or ()) else \
        " that have a target"
    if loss.kind == "upstream":
        what = ("the sum of ", Math("G_{ij} S_{ij}"), " over the stage ", Math("S"),
                " where the backward pass starts (", Math("G"), ": the gradient given "
                "there)")
    elif loss.kind == "mse":
        rows = f" of the rows{some}" if some else ""
        what = (f"{how} over every entry{rows} of ", Math("(z - T)^2"), ", where ",
                Math("T"), " is the target")
    elif loss.kind == "bce":
        what = (f"{how} over every entry of ", Math(r"-[T \log \hat{y} + (1 - T) "
                                                   r"\log(1 - \hat{y})]"),
                " (binary cross-entropy), where ", Math("T"), " is the target")
    elif loss.kind == "objective":
        what = ("the objective ", Math("f"), " itself, a function of the parameters ",
                Math(r"\theta"))
    else:
        what = (f"{how} over the positions{some} of ", Math(r"-\log p"),
                " of the target " + ("class" if g.example.head is not None else "token"))
    follow = f"\u201c{g.example.tokens[token]}\u201d at position {token}"
    if target is not None:
        follow += (f" (the decoder\u2019s: \u201c{g.example.decoder.tokens[target]}\u201d "
                   f"at position {target})")
    return Prose((
        "The loss ", Math("L"), " is ", *what, ". Read backwards, each gradient ",
        Math(r"\partial L/\partial x"), " (the derivative of ", Math("L"), " with respect "
        "to every entry of ", Math("x"), ") sums the chain-rule terms of the steps that "
        "read ", Math("x"), f"; the worked lines follow {follow}. Gradients span magnitudes: "
        f"tables print {DEFAULT_DIGITS} significant digits, worked lines their operands at "
        f"the fewest digits ({DEFAULT_DIGITS} or more) that land on the table. A gradient "
        "computed by the same rules as one worked before shows its table only.",))


def no_gradient(stage: Stage) -> bool:
    """A gradient the notes do not teach: at a stage that adds nothing (a RoPE model's
    absent positional encoding: the model has none to differentiate)."""
    source = stage.name.removeprefix("grad.")
    g = stage.derivation
    return stage.op.of_stage and source in g and g[source].op.adds_nothing


#: A head's number in its part's name (``Head 2``, ``Key/value head 1``).
_HEAD = re.compile(r"[Hh]ead (\d+)$")


def _head_number(stage: Stage) -> int | None:
    """The number of the (query or key/value) head a stage sits in, None outside heads."""
    within = _where(stage)[1]
    found = _HEAD.search(within[-1]) if within else None
    return int(found.group(1)) if found else None


def ordered(shown: list[Stage]) -> list[Stage]:
    """The stages in the forward order reversed (the backward pass's own: each weight's
    gradient right after the gradient at the step it belongs to), except that of a
    layer's heads the first (query head 1, then the key/value head it reads) comes
    first, the worked instance before the repeats tabulated after it."""
    out: list[Stage] = []
    k = 0
    while k < len(shown):
        if _head_number(shown[k]) is None:
            out.append(shown[k])
            k += 1
            continue
        run = []
        layer = (shown[k].side, shown[k].layer)
        while k < len(shown) and _head_number(shown[k]) is not None \
                and (shown[k].side, shown[k].layer) == layer:
            run.append(shown[k])
            k += 1
        position = {id(s): i for i, s in enumerate(run)}
        out += sorted(run, key=lambda s: (_head_number(s) != 1, _head_number(s),
                                          position[id(s)]))
    return out


def _group(stage: Stage) -> str:
    """The heading over a repeated stage's table: the part of its layer it sits in
    (``Head 2``, ``Add & Norm 1``), or its own title."""
    within = _where(stage)[1]
    return ", ".join(within) if within else stage.op.symbol.title


def _place(stage: Stage) -> str:
    """Where a stage sits, in words (``Layer 1, Head 1``, ``the output``)."""
    return ", ".join(_where(stage)[0:1] + _where(stage)[1]) if _where(stage)[1] else \
        _where(stage)[0]


def backward_part(g: Derivation, stages: list[Stage], token: int, target: int | None,
                  decimals: int, exact: bool, top: int, full: bool = False) -> list:
    """The Backward part's outline (headings at ``top``, ``top + 1``, ``top + 2``):
    the loss, then each gradient from the loss back to the embeddings in the forward
    order reversed, a weight's gradient at the step it belongs to, each under its own
    heading; a stage computed by the same rules as one worked before (another head or
    layer) shows its table under a heading of its part (``Head 2``)."""
    decimals += EXTRA_DECIMALS
    shown = ordered([s for s in stages if (taught(s) or s.op.of_weight)
                     and not no_gradient(s)])
    if not shown:
        return []
    out: list = [Heading("Backward pass", top), _introduction(g, token, target)]
    part, repeats, group, said = None, preferred(shown), None, set()
    for stage in shown:
        if stage.op.is_loss:  # a part of its own ("Loss / Loss" would say it twice)
            part = "Loss"
            out.append(Section(Heading(part, top + 1), _fragments(stage, 0, decimals, exact,
                                                                    said=said)))
            continue
        if stage.op.per_position_of:  # in the loss's part, under its own title
            out.append(Section(Heading(_title(stage), top + 2), _fragments(
                stage, worked_row(stage, token, target), decimals, exact, said=said)))
            continue
        if _where(stage)[0] != part:
            part, group = _where(stage)[0], None
            out.append(Heading(part, top + 1))
        first = repeats.first(stage)
        if first is not stage and not full:
            alike = _where(first) != _where(stage)  # another head, layer or sub-layer
            # another part's step outside any head or sub-layer (the encoder's input):
            # under the part's own heading, every such step after one sentence
            under_part = group == part or (isinstance(out[-1], Heading) and out[-1].text == part)
            heading = _title(stage) if not alike else _group(stage) if _where(stage)[1] \
                or not under_part else part
            if heading != group:
                group = heading
                said_as = _gradient_title(first)  # its place is this one
                rule = f"in {_place(first)}" if alike else \
                    f"the {said_as[0].lower()}{said_as[1:]}"
                if heading != part:
                    out.append(Heading(heading, top + 2))
                out.append(Prose((f"Computed by the same rules as {rule} above:",)))
            out.append(Section(None, _fragments(stage, worked_row(stage, token, target), decimals,
                                                exact, repeated=True, full=full)))
            continue
        group = None
        out.append(Section(Heading(_title(stage), top + 2),
                           _fragments(stage, worked_row(stage, token, target), decimals, exact,
                                      full=full, said=said)))
    return packed(out)
