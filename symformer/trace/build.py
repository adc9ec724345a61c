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
from symformer.notation import index, legend, notation
from symformer.ops import DotScores, ReLU, RowMean, ScaleMask
from symformer.placement import part_of
from symformer.trace.formulas import general
from symformer.trace.result import Trace
from symformer.trace.steps import (
    ActivationStep,
    AttentionStep,
    Entry,
    NormStep,
    Step,
    VectorStep,
)
from symformer.worked.build import Values, entry_steps
from symformer.worked.model import Step as WorkedStep


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
        if name not in self._values:
            self._values[name] = self.g[name].values(decimals=self.decimals)
        return self._values[name]

    def row_of(self, stage: Stage) -> list[str]:
        return self.values(stage.name)[self.row]

    def worked(self, stage: Stage) -> list[WorkedStep | None]:
        """Each entry's local formula with its operands' printed numbers substituted
        (recomputable from them: :func:`symformer.worked.build.entry_steps`)."""
        return entry_steps(stage, self.row, self.decimals, self.printed, self.symbolic)


def _entries(ctx: _Context, stage: Stage, labels: list[str] | None = None
             ) -> tuple[Entry, ...]:
    """The token's row: each entry with its label, value, worked line and symbol."""
    labels = labels or list(stage.cols)
    return tuple(
        Entry(label, value, worked, notation(stage), index(stage, j))
        for j, (label, value, worked) in enumerate(zip(labels, ctx.row_of(stage),
                                                       ctx.worked(stage))))


def _common(ctx: _Context, stage: Stage) -> dict:
    """The fields every step has; the title and symbol are the operation's."""
    return {"stage": stage.name, "kind": stage.kind, "part": part_of(stage),
            "title": stage.op.symbol.title, "general": general(ctx.g, stage),
            "notation": notation(stage)}


def _vector(ctx: _Context, stage: Stage) -> Step:
    return VectorStep(**_common(ctx, stage), entries=_entries(ctx, stage))


def _attention(ctx: _Context, stage: Stage) -> Step:
    keys = [f"{j} {t}" for j, t in enumerate(stage.cols)]
    note, masked = "", ()
    scaled = stage if isinstance(stage.op, ScaleMask) else ctx.g[stage.inputs[0]]
    blocked = getattr(scaled.op, "masked", frozenset())
    if not isinstance(stage.op, DotScores) and blocked:
        note = "causal mask: keys after the token are blocked"
        masked = tuple((ctx.row, j) in blocked for j in range(stage.shape[1]))
    return AttentionStep(**_common(ctx, stage), entries=_entries(ctx, stage, keys), note=note,
        heat=stage.op.heat, query=ctx.row, masked=masked,
        matrix=tuple(map(tuple, ctx.values(stage.name))) if stage.op.heat else ())


def _layer_norm(ctx: _Context, stage: Stage) -> Step:
    _x, mean_name, var_name = stage.inputs
    mean, var = ctx.g[mean_name], ctx.g[var_name]
    mu = _entries(ctx, mean, ["mean"])[0]
    sigma2 = _entries(ctx, var, ["variance"])[0]
    note = "" if isinstance(mean.op, RowMean) else (
        "mean and variance over the whole matrix (every token), not over the row of this token")
    return NormStep(**_common(ctx, stage), entries=_entries(ctx, stage), mean=mu,
                    variance=sigma2, note=note)


def _activation(ctx: _Context, stage: Stage) -> Step:
    clipped: tuple[bool, ...] = ()
    note, symbol = "", None
    if isinstance(stage.op, ReLU):
        hidden = stage.inputs[0]
        clipped = tuple(ctx.g.sign(hidden, ctx.row, j) <= 0 for j in range(stage.shape[1]))
        symbol = notation(ctx.g[hidden])
        note = f"{sum(clipped)} of {len(clipped)} entries clipped to 0"  # each format says
        # why beside its table, in its own math (the certified sign of h_j ≤ 0)
    return ActivationStep(**_common(ctx, stage), entries=_entries(ctx, stage), note=note,
                          clipped=clipped, hidden=symbol)


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
    loss back to the embeddings (the order the backward pass appends them in)."""
    return [g["loss"], *(s for s in g if s.kind == "gradient" and s.side == side
                         and s.rows == tokens and s.name != "grad.loss")]


def trace_token(g: Derivation, token: int | str, decimals: int = 3,
                side: str = "encoder", backward: bool = False,
                heads: Collection[int] | None = None) -> Trace:
    """Follow one token (a 0-based position or a word) through every stage of ``side``.

    Every number is a certified rounding to ``decimals`` places; the worked formulas
    substitute those rounded numbers into each entry's exact local formula.  With
    ``backward`` the steps are the loss and the token's gradients, from the loss back
    to the embeddings (the example needs a ``[loss]``).  ``heads`` (1-based): only
    those heads' steps (the others are still derived where later steps read them).
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
    if backward:
        g = with_gradients(g)
        ctx = _Context(g, position, decimals, symbolic=True)
        stages = _gradients(g, side, tokens)
        steps.append(_vector(_Context(g, 0, decimals, printed=ctx.printed), stages[0]))
        shown.append(stages[0])
    normalised = {name for s in stages if s.op.trace_step == "norm" for name in s.inputs}
    for stage in stages:
        if heads is not None and stage.head and stage.head not in heads:
            continue
        builder = BUILDERS[stage.op.trace_step]
        if builder is None and stage.name in normalised:
            builder = _vector  # a LayerNorm's mean and variance: steps before s and y
        if builder is not None and stage.rows == tokens:
            steps.append(builder(ctx, stage))
            shown.append(stage)
    return Trace(g.example.title, tuple(tokens), position, g.causal, side, decimals,
                 tuple(steps), legend(shown), backward)
