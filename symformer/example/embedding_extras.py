"""BERT's additions to the input rows: token types (segments) and the embedding norm.

* ``token_type_embeddings`` (a row per type, d_model wide) and ``segments`` (each
  token's type, 0-based; default all 0): the type's row is added to each token's
  embedding, as BERT's ``token_type_ids`` do;
* ``[embedding_norm]`` (``gamma``, ``beta``, optional ``eps``; the example's
  ``layer_norm``): a normalisation of the input rows before the first block.
"""

from __future__ import annotations

from typing import Any

from symformer.errors import InputError
from symformer.example.fields import Where, matrix, sub_table, vector
from symformer.example.numbers import exact_scalar
from symformer.example.schema import FinalNorm

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
    found = sub_table(data, "embedding_norm", here, _NORM_KEYS)
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
