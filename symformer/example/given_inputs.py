"""Examples whose inputs are given, as a lesson starts: input rows, or Q, K and V.

* ``inputs = [[...]]`` -- the input rows themselves, instead of ``vocab`` and
  ``embeddings`` (``tokens`` optional, labels of the rows); or ``positions = n`` and
  ``d_model = d`` alone (a positional-encoding table);
* an ``[attention]`` table with ``Q``, ``K`` and ``V`` -- one attention step and
  nothing else (no embeddings, no projections), with an ALiBi slope if asked
  (:mod:`symformer.example.alibi`).

The loader (:mod:`symformer.example.loader`) calls these; the given attention's
stages are composed in :mod:`symformer.blocks.given_attention`.
"""

from __future__ import annotations

from typing import Any

from flint import fmpq

from symformer.errors import InputError
from symformer.example.alibi import alibi_slopes
from symformer.example.exact import ExactMatrix
from symformer.example.fields import Where, matrix, no_unknown_keys, string_list
from symformer.example.loss import parse_loss
from symformer.example.schema import Example, GivenAttention
from symformer.example.stages import parse_stages
from symformer.lazy import sympy
from symformer.words import plural

#: The keys that make a file an example without ``embeddings``.
INPUT_KEYS = ("inputs", "positions", "d_model", "attention")
#: The top-level keys of an ``[attention]`` example.
_ATTENTION_TOP = {"title", "description", "tokens", "attention", "causal", "mask", "scale",
                  "alibi", "alibi_slopes", "loss", "claim", "exercise", "stages"}
_ATTENTION_KEYS = {"Q", "K", "V", "key_tokens"}


def labels(data: dict[str, Any], key: str, here: Where, rows: int, stem: str,
           what: str, start: int = 1) -> tuple[str, ...]:
    """``data[key]`` (one label per row), else ``STEM1``, ``STEM2``, ... (from ``start``)."""
    if key not in data:
        return tuple(f"{stem}{i}" for i in range(start, rows + start))
    found = string_list(data, key, here)
    if len(found) != rows:
        raise InputError(f"{here}: {key} has {plural(len(found), 'label')} but {what} has "
                         f"{plural(rows, 'row')} (one label per row)")
    return tuple(found)


#: The most positions and dimensions of a positions-only example (``positions``,
#: ``d_model``); the work limit bounds what is derived from them.
MAX_POSITIONS = 4096


def given_inputs(data: dict[str, Any], here: Where) -> tuple[list[str], ExactMatrix]:
    """``inputs = [[...]]``: the input rows (a row per position) and their labels; or
    ``positions = n`` and ``d_model = d`` without inputs (a positional-encoding table
    alone: the rows are zeros, never shown)."""
    for key in ("vocab", "embeddings"):
        if key in data and "inputs" in data:
            raise InputError(f"{here}: {key} has no meaning with inputs = [[...]] (the input "
                             f"rows are given); drop {key}, or give vocab and embeddings "
                             f"instead of inputs")
        if key in data:
            given = "positions" if "positions" in data else "d_model"
            raise InputError(f"{here}: {given} (with positions = n and d_model = d: a "
                             f"positional-encoding table alone) has no meaning with {key}; "
                             f"the sentence and the embeddings give both")
    if "inputs" in data:
        for key in ("positions", "d_model"):
            if key in data:
                raise InputError(f"{here}: {key} has no meaning with inputs = [[...]] (its "
                                 f"shape gives the positions and d_model)")
        x = matrix(data, "inputs", here)
        return list(labels(data, "tokens", here, x.rows, "x", "inputs")), x
    n, d = (_count(data, key, here) for key in ("positions", "d_model"))
    zeros = ExactMatrix([[fmpq(0)] * d for _ in range(n)])
    return list(labels(data, "tokens", here, n, "pos", "positions", 0)), zeros


def _count(data: dict[str, Any], key: str, here: Where) -> int:
    """``positions`` or ``d_model``: a whole number from 1 to :data:`MAX_POSITIONS`."""
    if key not in data:
        raise InputError(f"{here}: a positional-encoding table without inputs needs both "
                         f"positions = n and d_model = d; {key} is missing")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_POSITIONS:
        raise InputError(f"{here}: {key} must be a whole number from 1 to {MAX_POSITIONS}, "
                         f"found {value!r}"[:200])
    return value


#: Settings an ``[attention]`` file may give at the top level or inside the table.
_LIFTED = ("causal", "mask", "scale", "alibi", "alibi_slopes")


def lift_attention_settings(data: dict[str, Any], here: Where) -> dict[str, Any]:
    """The file with the settings written inside ``[attention]`` (``causal``, ``mask``,
    ``scale``, ``alibi``, ``alibi_slopes``) moved to the top level, where the loader
    reads them; one given in both places is refused."""
    table = data.get("attention")
    if not isinstance(table, dict):
        return data
    lifted = {key: table[key] for key in _LIFTED if key in table}
    for key in lifted:
        if key in data:
            raise InputError(f"{here}: {key} is given both at the top level and in "
                             f"[attention]; give it once")
    rest = {key: value for key, value in table.items() if key not in lifted}
    return {**data, **lifted, "attention": rest}


def attention_example(data: dict[str, Any], here: Where, causal: bool,
                      mask_value: sympy.Rational | None, scale: sympy.Rational | None
                      ) -> Example:
    """A file with an ``[attention]`` table: given ``Q`` (n x d_k), ``K`` (m x d_k) and
    ``V`` (m x d_v); ``tokens`` label the queries, ``key_tokens`` the keys.  ``causal``,
    ``mask_value`` and ``scale`` are the file's top-level conventions, read by the
    loader."""
    extra = sorted(set(data) - _ATTENTION_TOP)
    if extra:
        raise InputError(f"{here}: {extra[0]} has no meaning in a file with an [attention] "
                         f"table (given Q, K and V: no embeddings, layers or heads)")
    table, where = data["attention"], here.sub("attention")
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table with Q, K and V")
    no_unknown_keys(table, _ATTENTION_KEYS, where)
    Q = matrix(table, "Q", where)
    K = matrix(table, "K", where, cols=Q.cols)
    V = matrix(table, "V", where, rows=K.rows)
    tokens = labels(data, "tokens", here, Q.rows, "q" if K.rows != Q.rows else "x", "Q")
    if "key_tokens" in table:
        keys = labels(table, "key_tokens", where, K.rows, "k", "K")
    else:
        keys = tokens if K.rows == Q.rows else labels({}, "", where, K.rows, "k", "K")
    slopes = alibi_slopes(data, here, 1)
    attention = GivenAttention(Q=Q, K=K, V=V, scale=scale, key_labels=keys,
                               alibi_slope=None if slopes is None else slopes[0])
    loss = None
    if "loss" in data:
        loss = parse_loss(data["loss"], here.sub("loss"), data, tokens, Q.rows, V.cols, None)
    title = data.get("title", "Untitled example")
    if not isinstance(title, str):
        raise InputError(f"{here}: title must be a string, found {title!r}")
    stages = parse_stages(data["stages"], here.sub("stages")) if "stages" in data else None
    return Example(title=title, tokens=tokens, vocab=tuple(dict.fromkeys(tokens)),
                   embeddings=Q, layers=(), positional_encoding="none", causal=causal,
                   mask_value=mask_value, source=here.parts[0], attention=attention,
                   loss=loss, given_inputs=True, stages=stages)
