"""Build a :class:`~symformer.trace.result.Trace`: one step per stage, from one token's view.

Each operation says which shape of step shows it (``Operation.trace_step``: a vector,
one entry per key, a LayerNorm with its mean and variance, an activation); the
builders (:data:`BUILDERS`) are chosen by that shape, never by stage name or kind, so a
new operation is traced wherever it sits: a second block, a decoder's self- and
cross-attention (``Stage.side == "decoder"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from symformer.blocks.backward import with_gradients
from symformer.engine.graph import Derivation, Stage
from symformer.errors import InputError
from symformer.latex.places import where as part_of
from symformer.notation import index, legend, notation
from symformer.pipeline import DEFAULT_DECIMALS
from symformer.trace.general_formula import general
from symformer.trace.result import Trace
from symformer.trace.steps import (
    ActivationStep,
    AttentionStep,
    Entry,
    NormStep,
    Step,
    VectorStep,
)
from symformer.worked.build import Values, entry_steps, worked_steps
from symformer.worked.model import Step as WorkedStep
from symformer.worked.model import Style
from symformer.worked.numbers import integer_values
from symformer.worked.significant import DEFAULT_DIGITS, SignificantValues, choose_digits


def resolve_token(tokens: tuple[str, ...], token: int | str) -> int:
    """The 0-based position ``token`` names: a position, or a word's first occurrence."""
    listing = ", ".join(f"{i} {t!r}" for i, t in enumerate(tokens))
    if isinstance(token, str) and re.fullmatch(r"-?\d+", token.strip()):
        token = int(token)
    if isinstance(token, int):
        if 0 <= token < len(tokens):
            return token
        raise InputError(f"token position {token} is out of range: the sentence has "
                         f"{len(tokens)} tokens (0-based positions: {listing})")
    if token in tokens:
        return tokens.index(token)
    raise InputError(f"the word {token!r} is not in the sentence (0-based positions: "
                     f"{listing})")




@dataclass
class _Context:
    """What every builder needs: the derivation, the token's row, rounded values."""

    g: Derivation
    row: int
    decimals: int
    _values: dict[str, list[list[str]]] = field(default_factory=dict)
    printed: Values = field(default_factory=Values)
    #: Whether worked lines show the formula over symbols before the numbers (the
    #: backward trace: the chain rule's terms, ∂L/∂α_1 = v_(1,0)·∂L/∂o_0 + ...).
    symbolic: bool = False

    def values(self, name: str) -> list[list[str]]:
        """A stage's numbers as the trace prints them: integers for a stage of exact
        integers (4, not 4.000), the backward trace's at significant digits."""
        if isinstance(self.printed, SignificantValues):
            return self.printed.table(self.g[name])
        if name not in self._values:
            stage = self.g[name]
            self._values[name] = integer_values(stage, self.decimals) or \
                stage.values(decimals=self.decimals)
        return self._values[name]

    def row_of(self, stage: Stage) -> list[str]:
        return self.values(stage.name)[self.row]

    def worked(self, stage: Stage) -> list[WorkedStep | None]:
        """Each entry's local formula with its operands' printed numbers substituted
        (recomputable from them: :func:`symformer.worked.build.entry_steps`).  In the
        backward trace the step's table has :data:`DEFAULT_DIGITS` significant digits
        and its lines' operands the fewest from there with which every line lands on
        the table, as the notes choose them
        (:func:`symformer.worked.significant.choose_digits`, at most
        :data:`~symformer.worked.significant.MOST_DIGITS`); where none does, the
        digits with the fewest lines off (each says its table's value)."""
        if not isinstance(self.printed, SignificantValues):
            return entry_steps(stage, self.row, self.decimals, self.printed, self.symbolic)
        found: dict[int, list[WorkedStep | None]] = {}

        def off(digits: int) -> int:
            if digits not in found:
                found[digits] = entry_steps(stage, self.row, self.decimals, SignificantValues(
                    digits, table_stage=stage.name), self.symbolic)
            return sum(s is not None and s.exact is not None for s in found[digits])

        digits = choose_digits(lambda d: off(d) == 0)
        return found[min(found, key=lambda d: (off(d), d))] if off(digits) else found[digits]


def _entries(ctx: _Context, stage: Stage, labels: list[str] | None = None,
             worked: list[WorkedStep | None] | None = None) -> tuple[Entry, ...]:
    """The token's row: each entry with its label, value, worked line and symbol."""
    labels = labels or list(stage.cols)
    if worked is None:
        worked = ctx.worked(stage)  # first: the backward step's digits are chosen there
    return tuple(
        Entry(label, value, line, notation(stage), index(stage, j))
        for j, (label, value, line) in enumerate(zip(labels, ctx.row_of(stage), worked)))


def _common(ctx: _Context, stage: Stage) -> dict:
    """The fields every step has; the title and symbol are the operation's; the weights
    its operation reads and, for a gradient, its matrix form (as the notes print them)."""
    from symformer.latex.matrix_form import backward_lines

    return {"stage": stage.name, "kind": stage.kind, "part": part_of(stage),
            "title": stage.op.symbol.title, "general": general(ctx.g, stage),
            "notation": notation(stage), "weights": _weights(stage),
            "matrix_form": tuple(backward_lines(stage)) if stage.op.of_stage else ()}


def _weights(stage: Stage) -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]:
    """The weights ``stage``'s operation reads, each ``(name, rows)`` in LaTeX, exact as
    the notes print them (:func:`symformer.latex.parameters.weight_block`)."""
    from symformer.latex.parameters import weight_block

    return tuple((block.lhs, block.rows) for block in (
        weight_block(stage, name, value)
        for name, value in stage.op.parameters().items() if value is not None))


def _vector(ctx: _Context, stage: Stage) -> Step:
    return VectorStep(**_common(ctx, stage), entries=_entries(ctx, stage))


def _attention(ctx: _Context, stage: Stage) -> Step:
    keys = [f"{j} {t}" for j, t in enumerate(stage.cols)]
    note, masked = "", ()
    scaled = stage if stage.op.scales_and_masks else ctx.g[stage.inputs[0]]
    blocked = getattr(scaled.op, "masked", frozenset())
    if stage.op.matrix_form != "dot_products" and blocked:
        note = "causal mask: keys after the token are blocked"
        masked = tuple((ctx.row, j) in blocked for j in range(stage.shape[1]))
    parts, worked = _parts(ctx, stage)
    return AttentionStep(**_common(ctx, stage), entries=_entries(ctx, stage, keys, worked),
        note=note, heat=stage.op.heat, query=ctx.row, masked=masked, parts=parts,
        matrix=tuple(map(tuple, ctx.values(stage.name))) if stage.op.heat else ())


def _parts(ctx: _Context, stage: Stage
           ) -> tuple[tuple[Entry, ...], list[WorkedStep | None] | None]:
    """A forward softmax row as the notes work it: each e^{s_j} and their sum Σ (the
    operation's worked parts, :func:`symformer.worked.build.worked_steps`), then each
    entry over them; ``((), None)`` for any other step (its entries' own lines)."""
    if isinstance(ctx.printed, SignificantValues) or not stage.op.worked_parts(
            stage, ctx.row, list(stage.local.row(ctx.row))):
        return (), None
    steps = worked_steps(stage, ctx.row, Style(ctx.decimals), ctx.printed,
                         symbolic=False, parts=True).steps
    last = {s.col: k for k, s in enumerate(steps) if s.col is not None}
    entries = {s.col: s for k, s in enumerate(steps) if last.get(s.col) == k}
    parts = tuple(Entry("", _result(s), s) for k, s in enumerate(steps)
                  if last.get(s.col) != k)
    return parts, [entries.get(j) for j in range(stage.shape[1])]


def _result(step: WorkedStep) -> str:
    """A worked step's printed result."""
    node = step.chain[-1][1]
    return getattr(node, "text", "")


def _layer_norm(ctx: _Context, stage: Stage) -> Step:
    _x, mean_name, var_name = stage.inputs
    mean, var = ctx.g[mean_name], ctx.g[var_name]
    mu = _entries(ctx, mean, ["mean"])[0]
    sigma2 = _entries(ctx, var, ["variance"])[0]
    note = "" if not mean.op.whole_matrix else (
        "mean and variance over the whole matrix (every token), not over the row of this token")
    return NormStep(**_common(ctx, stage), entries=_entries(ctx, stage), mean=mu,
                    variance=sigma2, note=note)


def _activation(ctx: _Context, stage: Stage) -> Step:
    clipped: tuple[bool, ...] = ()
    note, symbol, function = "", None, ""
    if stage.op.clips:  # ReLU-like: each entry with h <= 0 is 0
        function = stage.op.function_name or stage.op.symbol.title
        hidden = stage.inputs[0]
        clipped = tuple(ctx.g.sign(hidden, ctx.row, j) <= 0 for j in range(stage.shape[1]))
        symbol = notation(ctx.g[hidden])
        note = f"{sum(clipped)} of {len(clipped)} entries clipped to 0"  # each format says
        # why beside its table, in its own math (the certified sign of h_j ≤ 0)
    return ActivationStep(**_common(ctx, stage), entries=_entries(ctx, stage), note=note,
                          clipped=clipped, hidden=symbol, function=function)


#: The builder of each shape of step an operation asks for (``Operation.trace_step``);
#: a "folded" stage is a step of its own only where a LayerNorm reads it (its mean
#: and variance, in the order the math needs: μ, σ², then s and y), not the checks
#: of the normalised output's mean and variance.
BUILDERS: dict[str, Callable[[_Context, Stage], Step] | None] = {
    "vector": _vector, "attention": _attention, "norm": _layer_norm,
    "activation": _activation, "folded": None,
}


def _gradients(g: Derivation, side: str, tokens: tuple[str, ...]) -> list[Stage]:
    """The loss, then the gradient at every stage of the side's token rows, from the
    loss back to the embeddings in the notes' order (the forward order reversed, a
    layer's first head and the key/value head it reads before the others:
    :func:`symformer.latex.backward.ordered`)."""
    from symformer.latex.backward import ordered

    return [g["loss"], *ordered([s for s in g if s.op.of_stage and s.side == side
                                 and s.rows == tokens and s.name != "grad.loss"])]


def _absent(g: Derivation, stage: Stage) -> bool:
    """A step for something the model does not have: a stage that adds nothing (a
    RoPE model's positional encoding, all zeros) or the gradient at one."""
    source = g[stage.name.removeprefix("grad.")] if stage.op.of_stage and \
        stage.name.removeprefix("grad.") in g else stage
    return source.op.adds_nothing


def _after_the_token(stage: Stage, shown: list[Stage]) -> bool:
    """Is ``stage`` one row read from the traced stages (a head's pooled row, its logits
    and probabilities), not the loss and not the next token (said by generate)?"""
    names = {s.name for s in shown}
    return (stage.shape[0] == 1 and not (stage.op.is_loss or stage.op.picks_token)
            and bool(names.intersection(stage.inputs)))


def trace_token(g: Derivation, token: int | str, decimals: int = DEFAULT_DECIMALS,
                side: str = "encoder", backward: bool = False,
                heads: Collection[int] | None = None) -> Trace:
    """Follow one token (a 0-based position or a word) through every stage of ``side``.

    Every number is a certified rounding to ``decimals`` places (a stage of exact
    integers as integers); the worked formulas substitute those rounded numbers into
    each entry's exact local formula.  With ``backward`` the steps are the loss and the
    token's gradients, from the loss back to the embeddings (the example needs a
    ``[loss]``), every number at significant digits (:data:`DEFAULT_DIGITS` in the
    tables, a step's operands at one number of digits chosen so its lines land on its
    table: gradients span magnitudes, and fixed decimals print 0.001 for 0.001234).
    ``heads`` (1-based): only those heads' steps (the others are still derived where
    later steps read them).
    """
    sides = {s.side for s in g}
    if side not in sides:
        raise InputError(f"this derivation has no {side} stages (it has: "
                         f"{', '.join(sorted(sides))})")
    stages = [s for s in g if s.side == side]
    tokens = stages[0].rows
    position = resolve_token(tokens, token)
    ctx = _Context(g, position, decimals)
    steps, shown = [], []
    if backward:  # gradients span magnitudes: significant digits, not decimals
        g = with_gradients(g)
        ctx = _Context(g, position, decimals, printed=SignificantValues(DEFAULT_DIGITS),
                       symbolic=True)
        stages = _gradients(g, side, tokens)
        steps.append(_vector(_Context(g, 0, decimals, printed=ctx.printed), stages[0]))
        shown.append(stages[0])
    normalised = {name for s in stages if s.op.trace_step == "norm" for name in s.inputs}
    for stage in stages:
        if heads is not None and stage.head and stage.head not in heads:
            continue
        if _absent(g, stage):  # said by the input row's step: x = e
            continue
        builder = BUILDERS[stage.op.trace_step]
        if builder is None and stage.name in normalised:
            builder = _vector  # a LayerNorm's mean and variance: steps before s and y
        if builder is not None and stage.rows == tokens:
            steps.append(builder(ctx, stage))
            shown.append(stage)
        elif builder is not None and not backward and _after_the_token(stage, shown):
            # a classification head's pooled row and what follows it: one row each
            steps.append(builder(_Context(g, 0, decimals), stage))
            shown.append(stage)
    return Trace(g.example.title, tuple(tokens), position, g.causal, side, decimals,
                 tuple(steps), legend(shown), backward)
