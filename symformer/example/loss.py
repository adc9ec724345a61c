"""The optional ``[loss]`` table: what the backward pass differentiates.

``kind = "mse"`` with ``target = [[...]]`` (the shape of the encoder's ``output``):
the mean of (z - target)^2 over every entry.  ``kind = "cross_entropy"`` with
``targets = [TOKEN, ...]`` (one target token per row of a ``probabilities`` stage,
e.g. a decoder's): -(1/n) sum_i log p[i, t_i].  Numbers are exact, as everywhere.

PyTorch's conventions (docs/backward.md): ``reduction = "mean"`` (default) or
``"sum"``; ``positions = [...]`` (0-based rows) gives targets for those positions only
(``target`` then has one row per position, ``targets`` one token per position), and a
cross-entropy target ``""`` means "no target" at its position (``ignore_index``): the
mean is over the positions that have a target.  ``kind = "upstream"`` with ``stage =
"layer1.head1.output"`` and ``gradient = [[...]]`` starts the backward pass at that
stage with the given gradient (the loss is sum_ij G_ij S_ij).

With a ``[head]`` (:mod:`symformer.example.head`) the losses read the head: ``kind =
"bce"`` with ``target = [[...]]`` (0/1 labels or probabilities, the shape of a sigmoid
head's output) is -(1/c) sum_ij [T log y + (1 - T) log(1 - y)]; ``cross_entropy`` takes
class names as ``targets`` (one per pooled row); ``mse`` a target of the head's shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from symformer.errors import InputError
from symformer.example.fields import choice, matrix, no_unknown_keys
from symformer.example.schema import Loss

if TYPE_CHECKING:
    from symformer.example.fields import Where

KINDS = ("mse", "cross_entropy", "bce", "upstream")
REDUCTIONS = ("mean", "sum")
_KEYS = {"kind", "target", "targets", "reduction", "positions", "stage", "gradient"}


def parse_loss(data: Any, here: Where, top: dict[str, Any], vocab: Sequence[str],
               n_tokens: int, d_model: int, decoder: Any, head: Any = None) -> Loss:
    """Validate the whole ``[loss]`` table at load, so that every command accepts or
    refuses the same file (``top`` is the whole file, ``vocab`` its vocabulary,
    ``decoder`` the parsed ``[decoder]`` or None, ``head`` the parsed ``[head]``)."""

    if not isinstance(data, dict):
        raise InputError(f"{here}: must be a table")
    no_unknown_keys(data, _KEYS, here)
    if "kind" not in data:
        raise InputError(f"{here}: missing key 'kind' (one of {', '.join(map(repr, KINDS))})")
    kind = choice(data, "kind", KINDS, here, "mse")
    if kind == "upstream":
        return _upstream(data, here)
    for key in ("stage", "gradient"):
        if key in data:
            raise InputError(f"{here}: {key} belongs to kind = \"upstream\" (a gradient "
                             f"given at a stage), not to kind = \"{kind}\"")
    reduction = choice(data, "reduction", REDUCTIONS, here, "mean")
    if kind == "bce":
        return _bce(data, here, head, n_tokens, reduction)
    if head is not None:  # the head's rows and columns, not the encoder output's
        n_tokens = n_tokens if head.pooling == "none" else 1
        d_model, vocab = head.W_C.cols, head.classes
    rows = _positions(data, here, n_tokens if kind == "mse" else None)
    if kind == "mse":
        if "targets" in data:
            raise InputError(f"{here}: kind = \"mse\" takes target = [[...]] (a matrix), "
                             f"not targets")
        target = matrix(data, "target", here, rows=n_tokens if rows is None else len(rows),
                        cols=d_model)
        return Loss(kind, str(here), target=target, reduction=reduction, positions=rows)
    if "target" in data:
        raise InputError(f"{here}: kind = \"cross_entropy\" takes targets = [TOKEN, ...], "
                         f"not target")
    targets = data.get("targets")
    if not isinstance(targets, list) or not targets or not all(
            isinstance(t, str) for t in targets):
        raise InputError(f"{here}: targets must be a non-empty list of token strings "
                         f"(\"\" for a position without a target)")
    if rows is not None and len(targets) != len(rows):
        raise InputError(f"{here}: targets has {len(targets)} entries but positions names "
                         f"{len(rows)}; give one target token per position listed")
    loss = Loss(kind, str(here), targets=tuple(targets), reduction=reduction, positions=rows)
    if head is not None:
        if head.output != "softmax":
            raise InputError(f"{here}: kind = \"cross_entropy\" reads class probabilities: "
                             f"[head] output = \"softmax\" (found {head.output!r}; a sigmoid "
                             f"head takes kind = \"bce\", an identity head kind = \"mse\")")
        loss.target_ids(head.classes, n_tokens)
    elif decoder is not None and decoder.W_vocab is not None:
        loss.target_ids(decoder.vocab, len(decoder.tokens))
    elif "lm_head" in top:  # a language model: one row of probabilities per token
        loss.target_ids(vocab, n_tokens)
    else:
        raise InputError(f"{here}: kind = \"cross_entropy\" needs next-token probabilities: "
                         f"give a [decoder] table with W_vocab (or an [lm_head])")
    return loss


def _bce(data: dict[str, Any], here: Where, head: Any, n_tokens: int, reduction: str
         ) -> Loss:
    """``kind = "bce"``: a ``target`` of the sigmoid head's shape, every entry in [0, 1]."""
    if head is None or head.output != "sigmoid":
        raise InputError(f"{here}: kind = \"bce\" (binary cross-entropy) reads a sigmoid's "
                         f"probabilities: give a [head] table with output = \"sigmoid\"")
    for key in ("targets", "positions"):
        if key in data:
            raise InputError(f"{here}: kind = \"bce\" takes target = [[...]] (one 0/1 or "
                             f"probability per output entry), not {key}")
    rows = n_tokens if head.pooling == "none" else 1
    target = matrix(data, "target", here, rows=rows, cols=head.W_C.cols)
    for (i, j), t in ((ij, t) for ij, t in _entries(target.tolist())):
        if not 0 <= t <= 1:
            raise InputError(f"{here}: target entry [{i}, {j}] is {t}; a binary "
                             f"cross-entropy target lies in [0, 1] (a label 0 or 1, or a "
                             f"probability)")
    return Loss("bce", str(here), target=target, reduction=reduction)


def _entries(rows: list[list[Any]]):
    """((i, j), value) of every entry of a matrix's rows."""
    return (((i, j), v) for i, row in enumerate(rows) for j, v in enumerate(row))


def _positions(data: dict[str, Any], here: Where, rows: int | None
               ) -> tuple[int, ...] | None:
    """``positions``: distinct 0-based rows (below ``rows`` when it is known), or None."""
    found = data.get("positions")
    if found is None:
        return None
    if not isinstance(found, list) or not found or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in found):
        raise InputError(f"{here}: positions must be a non-empty list of 0-based positions, "
                         f"found {found!r}"[:200])
    if len(set(found)) != len(found):
        raise InputError(f"{here}: positions lists {found!r} with a repeat; give each "
                         f"position once"[:200])
    if rows is not None and max(found) >= rows:
        raise InputError(f"{here}: positions {found!r}: the output has {rows} rows "
                         f"(0 to {rows - 1})"[:200])
    return tuple(found)


def _upstream(data: dict[str, Any], here: Where) -> Loss:
    """``kind = "upstream"``: a ``stage`` name and the ``gradient`` given there (its shape
    is checked against the stage when the backward pass is built)."""
    for key in ("target", "targets", "positions", "reduction"):
        if key in data:
            raise InputError(f"{here}: kind = \"upstream\" takes stage = \"...\" and "
                             f"gradient = [[...]], not {key}")
    stage = data.get("stage")
    if not isinstance(stage, str) or not stage.strip():
        raise InputError(f"{here}: kind = \"upstream\" needs stage = \"STAGE\" (the stage "
                         f"whose gradient is given, e.g. \"layer1.head1.output\")")
    gradient = matrix(data, "gradient", here)
    return Loss("upstream", str(here), stage=stage, gradient=gradient)
