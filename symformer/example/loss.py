"""The optional ``[loss]`` table: what the backward pass differentiates.

``kind = "mse"`` with ``target = [[...]]`` (the shape of the encoder's ``output``):
the mean of (z - target)^2 over every entry.  ``kind = "cross_entropy"`` with
``targets = [TOKEN, ...]`` (one target token per row of a ``probabilities`` stage,
e.g. a decoder's): -(1/n) sum_i log p[i, t_i].  Numbers are exact, as everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from symformer.errors import InputError
from symformer.example.fields import choice, matrix, no_unknown_keys
from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.example.fields import Where

KINDS = ("mse", "cross_entropy")
_KEYS = {"kind", "target", "targets"}


@dataclass(frozen=True)
class Loss:
    """A loss: ``kind`` with its exact ``target`` matrix (mse) or ``targets`` tokens."""

    kind: str
    where: str
    target: sympy.Matrix | None = None
    targets: tuple[str, ...] | None = None

    def target_ids(self, vocab: Sequence[str], positions: int) -> tuple[int, ...]:
        """The targets as indices into ``vocab``, checked against the probabilities'
        vocabulary and number of rows (InputError naming the file and key otherwise)."""
        return check_targets(self.targets, vocab, positions, self.where)


def check_targets(targets: Sequence[str], vocab: Sequence[str], positions: int,
                  where: str) -> tuple[int, ...]:
    """Each target token's index in ``vocab``; one target per position."""
    if len(targets) != positions:
        raise InputError(f"{where}: targets must give one token per row of the "
                         f"probabilities, {positions} in all; found {len(targets)}")
    for k, token in enumerate(targets):
        if token not in vocab:
            raise InputError(f"{where}: targets entry {k} {token!r} is not in the "
                             f"vocabulary {list(vocab)}")
    return tuple(vocab.index(t) for t in targets)


def parse_loss(data: Any, here: Where, top: dict[str, Any], vocab: Sequence[str],
               n_tokens: int, d_model: int, decoder: Any) -> Loss:
    """Validate the whole ``[loss]`` table at load, so that every command accepts or
    refuses the same file (``top`` is the whole file, ``vocab`` its vocabulary,
    ``decoder`` the parsed ``[decoder]`` or None)."""

    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _KEYS, here)
    if "kind" not in data:
        raise InputError(f"{here}: missing key 'kind' (one of {', '.join(map(repr, KINDS))})")
    kind = choice(data, "kind", KINDS, here, "mse")
    if kind == "mse":
        if "targets" in data:
            raise InputError(f"{here}: kind = \"mse\" takes target = [[...]] (a matrix), "
                             f"not targets")
        target = matrix(data, "target", here, rows=n_tokens, cols=d_model)
        return Loss(kind, str(here), target=target)
    if "target" in data:
        raise InputError(f"{here}: kind = \"cross_entropy\" takes targets = [TOKEN, ...], "
                         f"not target")
    targets = data.get("targets")
    if not isinstance(targets, list) or not targets or not all(
            isinstance(t, str) for t in targets):
        raise InputError(f"{here}: targets must be a non-empty list of token strings")
    loss = Loss(kind, str(here), targets=tuple(targets))
    if decoder is not None and decoder.W_vocab is not None:
        loss.target_ids(decoder.vocab, len(decoder.tokens))
    elif "lm_head" in top:  # a language model: one row of probabilities per token
        loss.target_ids(vocab, n_tokens)
    else:
        raise InputError(f"{here}: kind = \"cross_entropy\" needs next-token probabilities: "
                         f"give a [decoder] table with W_vocab (or an [lm_head])")
    return loss
