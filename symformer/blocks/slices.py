"""A slice of a derivation: chosen positions, heads and columns, and what showing it needs.

Tables of a real tiny model are large (64 tokens, 8 heads, 64 to 256 columns); a
reader wants a few rows of a few heads.  A :class:`Slice` says which:

* ``positions``: the rows of every stage (a token's position; the attention maps'
  key columns too, which are positions);
* ``heads``: the heads whose stages are shown (1-based; stages of no head always are);
* ``dims``: the columns of every other stage with more than one column (a feature, a
  hidden unit, a vocabulary entry), by index; a stage with none of them left is not
  shown.

Showing a slice costs less than showing everything in two ways: only the shown entries
are rounded and printed (most of the cost at these sizes), and only the stages they
read are evaluated (:meth:`~symformer.engine.graph.Derivation.evaluate`'s ``upto``: a
head's table needs neither the other heads nor the layers after it; a later layer
needs every head of the earlier ones, and has them).  And where it is exact, the
sentence itself is cut (:func:`truncated`): under a causal mask with -inf, row i of
every stage reads rows 0..i only, so positions up to p need only the first p + 1
tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from symformer.engine.graph import Stage
from symformer.errors import InputError
from symformer.example.schema import Example

#: The most indices a slice's option may name (a range counts its members).
MAX_INDICES = 100_000


@dataclass(frozen=True)
class Slice:
    """Positions (0-based), heads (1-based) and columns (0-based) to show; None: all."""

    positions: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    dims: tuple[int, ...] | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.positions, self.heads, self.dims))

    def describe(self) -> str:
        """``positions 0:4, heads 1, dims 0:3,5``: the options' own notation."""
        return ", ".join(f"{key} {spans(value)}" for key, value in vars(self).items()
                         if value is not None)

    def share(self, example: Example) -> float:
        """About the share of ``example``'s entries the slice shows (its positions,
        heads and columns over the example's): what the work estimate charges printing
        for (:func:`symformer.blocks.cost.derive_work`'s ``shown``)."""
        n, d = len(example.tokens), example.d_model
        share = 1.0
        if self.positions is not None:
            share *= min(1.0, sum(p < n for p in self.positions) / n)
        if self.dims is not None:
            share *= min(1.0, len(self.dims) / d)
        heads = max((len(layer.heads) for layer in example.layers), default=0)
        if self.heads is not None and heads:
            share *= min(1.0, len(self.heads) / heads)
        return share


def spans(indices: tuple[int, ...]) -> str:
    """``(0, 1, 2, 5)`` as ``0:3,5``, the options' own notation."""
    parts, start = [], None
    for k, i in enumerate(indices):
        if start is None:
            start = i
        if k + 1 == len(indices) or indices[k + 1] != i + 1:
            parts.append(str(start) if i == start else f"{start}:{i + 1}")
            start = None
    return ",".join(parts)


def parse_indices(text: str, option: str) -> tuple[int, ...]:
    """``"0:4"`` (0 to 3), ``"1,3"``, ``"2"``, ``"0:4,8"``: sorted distinct indices.

    A one-line :class:`InputError` naming ``option`` for anything else (an empty or
    reversed range, a negative number, more than :data:`MAX_INDICES` indices).
    """
    found: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"([0-9]{1,9})(?::([0-9]{1,9}))?", part, re.ASCII)
        if match is None:
            raise InputError(f"{option} {text[:40]!r}: expected indices such as 0:4 (0 to "
                             f"3), 1,3 or 2")
        start = int(match.group(1))
        stop = start + 1 if match.group(2) is None else int(match.group(2))
        if stop <= start:
            raise InputError(f"{option} {part!r}: the range is empty (A:B runs from A to "
                             f"B - 1)")
        if len(found) + stop - start > MAX_INDICES:
            raise InputError(f"{option} {text[:40]!r}: more than {MAX_INDICES:,} indices")
        found.update(range(start, stop))
    return tuple(sorted(found))


def check_slice(example: Example, chosen: Slice) -> None:
    """Refuse positions past the sentence and heads past every layer (one line each)."""
    n = len(example.tokens)
    if example.decoder is not None:
        n = max(n, len(example.decoder.tokens))
    if chosen.positions is not None and chosen.positions[-1] >= n:
        raise InputError(f"--positions {chosen.positions[-1]}: the sentence has {n} "
                         f"tokens (positions 0 to {n - 1})")
    if chosen.heads is not None:
        most = max((len(layer.heads) for layer in example.layers), default=0)
        if example.decoder is not None:
            most = max([most] + [max(len(layer.self_heads), len(layer.cross_heads))
                                 for layer in example.decoder.layers])
        wrong = [h for h in chosen.heads if not 1 <= h <= most]
        if wrong:
            raise InputError(f"--heads {wrong[0]}: the layers have heads 1 to {most}")


def truncated(example: Example, chosen: Slice, *, causal: bool) -> Example:
    """``example`` cut to the tokens the slice's positions read, where that is exact.

    Exact when every stage's row i reads rows 0..i only: a causal mask of -inf (a
    finite mask such as -1e9 lets later tokens in, exp(-1e9)-small), no whole-matrix
    LayerNorm (its mean mixes rows), no decoder (its cross-attention reads every
    source token), no loss (it sums over positions).  Otherwise the example itself.
    The next-token stage (the last position's) then belongs to the cut sentence: a
    slice that cuts is shown without it (:func:`view`).
    """
    if chosen.positions is None or not causal or example.mask_value is not None \
            or example.decoder is not None or getattr(example, "loss", None) is not None:
        return example
    norms = [layer.layer_norm for layer in example.layers]
    if example.final_norm is not None:
        norms.append(example.final_norm.layer_norm)
    if "whole_matrix" in norms:
        return example
    keep = chosen.positions[-1] + 1
    if keep >= len(example.tokens):
        return example
    return replace(example, tokens=example.tokens[:keep])


@dataclass(frozen=True)
class Shown:
    """One stage of a slice: the stage, and the rows and columns shown (indices)."""

    stage: Stage
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    #: Part of a slice: only the shown entries are rounded, and only the stages they
    #: read evaluated (else the stage as a whole, after every stage).
    sliced: bool = False

    @property
    def whole(self) -> bool:
        """Whether the whole stage is shown."""
        return self.stage.shape == (len(self.rows), len(self.cols))

    def values(self, **rounding: int) -> list[list[str]]:
        """The shown entries' certified strings (only they are rounded)."""
        if not self.sliced:
            return self.stage.values(**rounding)
        return self.stage.values(rows=self.rows, cols=self.cols, **rounding)


def view(stages: list[Stage], chosen: Slice, full_length: int) -> list[Shown]:
    """The selected ``stages`` restricted to the slice, in order (stages left with no
    row or column are dropped).  ``full_length``: the sentence's length before
    :func:`truncated` (a cut sentence's next-token stage is not the sentence's)."""
    shown = []
    for stage in stages:
        if chosen.heads is not None and stage.head and stage.head not in chosen.heads:
            continue
        n, m = stage.shape
        rows = _positions(stage, chosen, full_length)
        if chosen.positions is not None and stage.op.columns == "keys":  # key positions
            cols = tuple(j for j in chosen.positions if j < m)
        elif chosen.dims is not None and m > 1:
            cols = tuple(j for j in chosen.dims if j < m)
        else:
            cols = tuple(range(m))
        if rows and cols:
            shown.append(Shown(stage, rows, cols, bool(chosen)))
    return shown


def _positions(stage: Stage, chosen: Slice, full_length: int) -> tuple[int, ...]:
    """The stage's rows shown: its rows are positions 0..n-1 of its side, except the
    next-token stage's one row (the last position's), shown when that position is and
    the sentence was not cut."""
    if chosen.positions is None:
        return tuple(range(stage.shape[0]))
    if stage.op.picks_token:
        side = _side(stage)
        cut = stage.side != "decoder" and len(side) < full_length
        return (0,) if not cut and len(side) - 1 in chosen.positions else ()
    return tuple(i for i in chosen.positions if i < stage.shape[0])


def _side(stage: Stage) -> tuple[str, ...]:
    """The tokens a stage's rows belong to (the source sentence or the target's)."""
    example = stage.derivation.example
    return example.decoder.tokens if stage.side == "decoder" else example.tokens


def position_labels(shown: Shown) -> list[int]:
    """The sentence positions of the shown rows (the next-token stage's is n - 1)."""
    if shown.stage.op.picks_token:
        return [len(_side(shown.stage)) - 1]
    return list(shown.rows)
