"""The composition of an example that starts from given Q, K and V (``[attention]``).

Stages ``Q``, ``K``, ``V`` (the given matrices), ``raw_scores``, ``scores``
(``alibi_scores`` with an ALiBi slope), ``weights`` and ``output``: the attention step
of :func:`~symformer.blocks.sublayers.attend`, nothing before it and nothing after.
"""

from __future__ import annotations

from symformer.blocks.sublayers import GIVEN_REMARK, KEY, QUERY, ROLES, VALUE, attend
from symformer.engine.graph import Derivation
from symformer.example.schema import GivenAttention
from symformer.ops import Parameter


def given_attention(g: Derivation, given: GivenAttention) -> str:
    """Append the stages of one attention step on the given Q, K, V; returns ``output``."""
    queries, keys = g.example.tokens, given.key_labels
    stages = {}
    for name, value, notation, rows in (("Q", given.Q, QUERY, queries),
                                        ("K", given.K, KEY, keys),
                                        ("V", given.V, VALUE, keys)):
        cols = tuple(f"{notation.text}{j}" for j in range(value.cols))
        op = Parameter(value, notation, GIVEN_REMARK, (name, name), role=ROLES[name])
        stages[name] = g.add(name, name, op, (), rows, cols)
    return attend(g, "", stages["Q"], stages["K"], stages["V"], g.causal, given.scale,
                  given.alibi_slope, {})
