"""A ``[[layer]]``'s mixture of experts (``[layer.moe]``) and its dropout with given masks
(``attention_dropout``, ``ffn_dropout``), read into :class:`~symformer.example.schema.
MixtureOfExperts` and :class:`~symformer.example.schema.GivenDropout`.

```toml
[[layer]]
ffn_dropout = { p = 0.5, mask = [[1, 0], [1, 1]] }   # a row per token, d_model wide

[layer.moe]
router = [[1, 0, 1], [0, 1, 1]]     # d_model x E
top_k = 1
renormalize = true                  # Mixtral's gates; false: the Switch Transformer's

[[layer.moe.expert]]                # E of them
W_1 = [[1, 0], [0, 1]]
W_2 = [[1, 0], [0, 1]]              # b_1, b_2 optional; activation: the layer's
```

Every problem is one :class:`~symformer.errors.InputError` naming the file, the layer
and the key.
"""

from __future__ import annotations

from typing import Any

from symformer.errors import InputError
from symformer.example.fields import (
    Where,
    choice,
    matrix,
    no_unknown_keys,
    optional_vector,
    sub_table,
)
from symformer.example.literals import exact_scalar, shorten
from symformer.example.schema import ACTIVATIONS, Expert, GivenDropout, MixtureOfExperts

#: The keys a ``[[layer]]`` gains (:data:`symformer.example.loader._LAYER_KEYS`).
LAYER_KEYS = {"moe", "attention_dropout", "ffn_dropout"}
_MOE_KEYS = {"router", "top_k", "renormalize", "activation", "expert"}
_EXPERT_KEYS = {"W_1", "b_1", "W_2", "b_2"}
_DROPOUT_KEYS = {"p", "mask"}
#: The most experts a mixture may have (an example file is read by a person).
MAX_EXPERTS = 64


def layer_extras(data: dict[str, Any], here: Where, d_model: int, n_tokens: int,
                 activation: str, attention_width: int | None) -> dict[str, Any]:
    """The ``moe``, ``attention_dropout`` and ``ffn_dropout`` of one ``[[layer]]`` table
    (``attention_width``: its attention output's width, None: no attention heads)."""
    moe = _moe(data, here, d_model, activation)
    if moe is not None and "W_1" in data:
        raise InputError(f"{here}: give W_1 (one feed-forward network) or [layer.moe] "
                         f"(a mixture of experts), not both")
    if "attention_dropout" in data and attention_width is None:
        raise InputError(f"{here}: attention_dropout has no meaning in a layer without "
                         f"attention heads")
    if "ffn_dropout" in data and moe is None and "W_1" not in data:
        raise InputError(f"{here}: ffn_dropout has no meaning in a layer without W_1 or "
                         f"[layer.moe] (no feed-forward sub-layer)")
    return {"moe": moe,
            "attention_dropout": _dropout(data, "attention_dropout", here, n_tokens,
                                          attention_width or d_model),
            "ffn_dropout": _dropout(data, "ffn_dropout", here, n_tokens, d_model)}


def _moe(data: dict[str, Any], here: Where, d_model: int, activation: str
         ) -> MixtureOfExperts | None:
    found = sub_table(data, "moe", here, _MOE_KEYS)
    if found is None:
        return None
    table, where = found
    router = matrix(table, "router", where, rows=d_model)
    count = router.cols
    if count > MAX_EXPERTS:
        raise InputError(f"{where}: router has {count} columns (experts); at most "
                         f"{MAX_EXPERTS} are supported")
    experts = table.get("expert")
    if not isinstance(experts, list) or not all(isinstance(e, dict) for e in experts):
        raise InputError(f"{where}: expected [[layer.moe.expert]] tables, one per column of "
                         f"router ({count})")
    if len(experts) != count:
        raise InputError(f"{where}: router has {count} columns (one per expert) but there "
                         f"are {len(experts)} [[layer.moe.expert]] tables")
    if "top_k" not in table:
        raise InputError(f"{where}: missing key 'top_k' (how many experts each token goes "
                         f"to, 1 to {count})")
    top_k = table["top_k"]
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= count:
        raise InputError(f"{where}: top_k must be a whole number from 1 to {count} (the "
                         f"experts), found {shorten(str(top_k))!r}")
    renormalize = table.get("renormalize", True)
    if not isinstance(renormalize, bool):
        raise InputError(f"{where}: renormalize must be true or false, found "
                         f"{shorten(str(renormalize))!r}")
    act = choice(table, "activation", ACTIVATIONS, where, activation)
    return MixtureOfExperts(
        router=router, top_k=top_k, renormalize=renormalize,
        experts=tuple(_expert(e, where.sub(f"expert {k}"), d_model, act)
                      for k, e in enumerate(experts, start=1)))


def _expert(table: dict[str, Any], where: Where, d_model: int, activation: str) -> Expert:
    no_unknown_keys(table, _EXPERT_KEYS, where)
    W_1 = matrix(table, "W_1", where, rows=d_model)
    d_ff = W_1.cols
    return Expert(W_1=W_1, W_2=matrix(table, "W_2", where, rows=d_ff, cols=d_model),
                  b_1=optional_vector(table, "b_1", where, d_ff),
                  b_2=optional_vector(table, "b_2", where, d_model), activation=activation)


def _dropout(data: dict[str, Any], key: str, here: Where, rows: int, cols: int
             ) -> GivenDropout | None:
    """``{ p = 0.5, mask = [[...]] }``: p exact in [0, 1), the mask rows x cols of 0/1."""
    found = sub_table(data, key, here, _DROPOUT_KEYS)
    if found is None:
        return None
    table, where = found
    if "p" not in table or "mask" not in table:
        raise InputError(f"{where}: missing key {'p' if 'p' not in table else 'mask'!r} "
                         f"(dropout with a given mask: {{ p = 0.5, mask = [[1, 0], ...] }})")
    p = exact_scalar(table["p"], f"{where}: p")
    if not 0 <= p < 1:
        raise InputError(f"{where}: p must be from 0 up to (not including) 1, found {p}")
    mask = table["mask"]
    if (not isinstance(mask, list) or len(mask) != rows
            or any(not isinstance(r, list) or len(r) != cols for r in mask)):
        raise InputError(f"{where}: mask must be {rows}x{cols} (a row of {cols} per token)")
    for i, row in enumerate(mask):
        for j, v in enumerate(row):
            if isinstance(v, bool) or v not in (0, 1) or not isinstance(v, int):
                raise InputError(f"{where}: mask[{i}][{j}] must be 0 or 1, found "
                                 f"{shorten(str(v))!r}")
    return GivenDropout(p=p, mask=tuple(tuple(row) for row in mask))
