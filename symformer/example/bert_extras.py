"""BERT's additions to the schema: token types, the embedding norm, the head's transform.

* ``token_type_embeddings`` (a row per type, d_model wide) and ``segments`` (each
  token's type, 0-based; default all 0): the type's row is added to each token's
  embedding, as BERT's ``token_type_ids`` do;
* ``[embedding_norm]`` (``gamma``, ``beta``, optional ``eps``; the example's
  ``layer_norm``): a normalisation of the input rows before the first block;
* in ``[lm_head]``: ``W_transform`` (d_model x d_model), ``b_transform``,
  ``transform_activation`` (default: the example's ``activation``) and a
  ``[lm_head.transform_norm]`` table (as ``[embedding_norm]``): the masked-LM head's
  transform norm(act(z W_transform + b_transform)) before ``W_vocab``.
"""

from __future__ import annotations

from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, choice, matrix, sub_table, vector
from symformer.example.literals import exact_scalar
from symformer.example.schema import ACTIVATIONS, FinalNorm

_NORM_KEYS = {"gamma", "beta", "eps"}


def token_types(data: dict[str, Any], here: Where, n_tokens: int, d_model: int
                ) -> dict[str, Any]:
    """``token_type_embeddings`` and ``segments`` as Example fields ({} when absent)."""
    if "token_type_embeddings" not in data:
        if "segments" in data:
            raise InputError(f"{here}: segments needs token_type_embeddings (a row per type)")
        return {}
    table = matrix(data, "token_type_embeddings", here, cols=d_model)
    segments = data.get("segments", [0] * n_tokens)
    if not isinstance(segments, list) or len(segments) != n_tokens:
        raise InputError(f"{here}: segments must be a list of {n_tokens} token types "
                         f"(one per token)")
    for position, s in enumerate(segments):
        if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < table.rows:
            raise InputError(f"{here}: segments[{position}] = {s!r} is not a row of "
                             f"token_type_embeddings (0..{table.rows - 1})")
    return {"token_type_embeddings": table, "segments": tuple(segments)}


def embedding_norm(data: dict[str, Any], here: Where, d_model: int,
                   defaults: dict[str, Any]) -> FinalNorm | None:
    """The ``[embedding_norm]`` table, with the example's ``layer_norm`` and ``eps``."""
    return norm_table(data, "embedding_norm", here, d_model, defaults)


#: The keys of ``[lm_head]`` that make its transform.
TRANSFORM_KEYS = {"W_transform", "b_transform", "transform_activation", "transform_norm"}


def lm_head_transform(table: dict[str, Any], where: Where, d_model: int,
                      defaults: dict[str, Any]) -> dict[str, Any]:
    """``[lm_head]``'s transform as LMHead fields ({} without ``W_transform``)."""
    if "W_transform" not in table:
        extra = sorted(TRANSFORM_KEYS & set(table))
        if extra:
            raise InputError(f"{where}: {extra[0]} needs W_transform")
        return {}
    return {"W_transform": matrix(table, "W_transform", where, rows=d_model, cols=d_model),
            "b_transform": vector(table, "b_transform", where, d_model, default=0),
            "transform_activation": choice(table, "transform_activation", ACTIVATIONS, where,
                                           defaults["activation"]),
            "transform_norm": norm_table(table, "transform_norm", where, d_model, defaults)}


def norm_table(data: dict[str, Any], key: str, here: Where, d_model: int,
               defaults: dict[str, Any]) -> FinalNorm | None:
    """A norm's table (``gamma``, ``beta``, ``eps``) under ``key``, with the example's
    ``layer_norm`` and (unless it sets its own) ``eps``; None when absent."""
    found = sub_table(data, key, here, _NORM_KEYS)
    if found is None:
        return None
    table, where = found
    if defaults["layer_norm"] == "rms" and "beta" in table:
        raise InputError(f"{where}: beta has no meaning with layer_norm = \"rms\"")
    eps = defaults["eps"]
    if "eps" in table:
        eps = exact_scalar(table["eps"], f"{where}: eps")
        if eps < 0:
            raise InputError(f"{where}: eps must not be negative, found {eps}")
    return FinalNorm(layer_norm=defaults["layer_norm"], eps=eps,
                     gamma_f=vector(table, "gamma", where, d_model, default=1),
                     beta_f=vector(table, "beta", where, d_model, default=0))
