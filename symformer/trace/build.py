"""Build a :class:`~symformer.trace.result.Trace`: one step per stage, from one token's view.

The builders are registered by stage kind (:data:`BUILDERS`), not by stage name, so
every stage of a kind the registry knows becomes a step wherever it sits: a second
block, or a decoder's self- and cross-attention (``Stage.side == "decoder"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import sympy

from symformer.engine.graph import Derivation, Stage
from symformer.errors import InputError
from symformer.notation import entry_symbol, index, legend
from symformer.ops import ReLU, RowMean
from symformer.placement import part_of
from symformer.trace.formula import Formula, substitute
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

    def values(self, name: str) -> list[list[str]]:
        if name not in self._values:
            self._values[name] = self.g[name].values(decimals=self.decimals)
        return self._values[name]

    def row_of(self, stage: Stage) -> list[str]:
        return self.values(stage.name)[self.row]

    def worked(self, stage: Stage, j: int, lhs: sympy.Expr) -> Formula | None:
        """Entry j's local formula with its operands' rounded numbers substituted."""
        local = stage.local[self.row, j]
        value = self.row_of(stage)[j]
        if isinstance(local, sympy.Symbol):
            return None  # a copy (concatenation, output): nothing to work out
        if not local.free_symbols:  # a constant: its exact value
            plain = local.is_Integer or local.is_infinite  # nothing to work out
            return None if plain else Formula(local, {}, lhs, value)

        def decimal_of(symbol: sympy.Symbol) -> tuple[str, tuple[int, int, int]]:
            name, i, k = self.g.owner(symbol)
            return self.values(name)[i][k], (stage.inputs.index(name), i, k)

        return substitute(local, decimal_of, lhs, value)


def _entries(ctx: _Context, stage: Stage, labels: list[str] | None = None
             ) -> tuple[Entry, ...]:
    """The token's row: each entry with its label, value, worked line and symbol."""
    labels = labels or list(stage.cols)
    return tuple(
        Entry(label, value, ctx.worked(stage, j, entry_symbol(stage, j)),
              stage.op.symbol, index(stage, j))
        for j, (label, value) in enumerate(zip(labels, ctx.row_of(stage))))


def _common(ctx: _Context, stage: Stage) -> dict:
    """The fields every step has; the title and symbol are the operation's."""
    return {"stage": stage.name, "kind": stage.kind, "part": part_of(stage),
            "title": stage.op.symbol.title, "general": general(ctx.g, stage),
            "notation": stage.op.symbol}


def _vector(ctx: _Context, stage: Stage) -> Step:
    return VectorStep(**_common(ctx, stage), entries=_entries(ctx, stage))


def _attention(ctx: _Context, stage: Stage) -> Step:
    keys = [f"{j} {t}" for j, t in enumerate(stage.cols)]
    note, masked = "", ()
    scaled = stage if stage.kind == "scores" else ctx.g[stage.inputs[0]]
    blocked = getattr(scaled.op, "masked", frozenset())
    if stage.kind != "raw_scores" and blocked:
        note = "causal mask: keys after the token are blocked"
        masked = tuple((ctx.row, j) in blocked for j in range(stage.shape[1]))
    return AttentionStep(**_common(ctx, stage), entries=_entries(ctx, stage, keys), note=note,
        heat=stage.kind == "weights", query=ctx.row, masked=masked,
        matrix=tuple(map(tuple, ctx.values(stage.name))) if stage.kind == "weights" else ())


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
    note = ""
    if isinstance(stage.op, ReLU):
        hidden = stage.inputs[0]
        clipped = tuple(ctx.g.sign(hidden, ctx.row, j) <= 0 for j in range(stage.shape[1]))
        count = sum(clipped)
        h = ctx.g[hidden].op.symbol.text
        note = (f"{count} of {len(clipped)} entries clipped to 0 (certified sign of "
                f"{h}_j <= 0)")
    return ActivationStep(**_common(ctx, stage), entries=_entries(ctx, stage), note=note,
                          clipped=clipped)


#: One builder per stage kind; kinds mapped to None are folded into another step
#: (a LayerNorm step shows its mean and variance).
BUILDERS: dict[str, Callable[[_Context, Stage], Step] | None] = {
    "embeddings": _vector, "positional_encoding": _vector, "input": _vector,
    "Q": _vector, "K": _vector, "V": _vector, "raw_scores": _attention,
    "scores": _attention, "weights": _attention, "head_output": _vector,
    "concat": _vector, "attention_output": _vector, "residual": _vector,
    "mean": None, "variance": None, "layer_norm": _layer_norm, "ffn_hidden": _vector,
    "ffn_activation": _activation, "ffn_output": _vector, "output": _vector,
}


def trace_token(g: Derivation, token: int | str, decimals: int = 3,
                side: str = "encoder") -> Trace:
    """Follow one token (a 0-based position or a word) through every stage of ``side``.

    Every number is a certified rounding to ``decimals`` places; the worked formulas
    substitute those rounded numbers into each entry's exact local formula.
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
    for stage in stages:
        builder = BUILDERS.get(stage.kind, _vector)
        if builder is not None and stage.rows == tokens:
            steps.append(builder(ctx, stage))
            shown.append(stage)
            shown.extend(ctx.g[name] for name in stage.inputs if BUILDERS.get(
                ctx.g[name].kind, _vector) is None)  # folded in: a LayerNorm's mean
    return Trace(g.example.title, tuple(tokens), position, g.causal, side, decimals,
                 tuple(steps), legend(shown))
