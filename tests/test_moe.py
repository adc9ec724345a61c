"""Mixture-of-experts routing, exactly: random rows, routers and ReLU experts against a
float64 computation written here (the top-k chosen by exact integer scores, ties at
the k-th place broken by the lower index as torch.topk on CPU does), ties reported as
such, Mixtral's renormalised gates and Switch's raw ones, and a bad top_k refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.blocks.moe import Expert, route
from symformer.errors import InputError


def _floats(stage) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in stage.values(decimals=15)])


def _ints(draw, rows: int, cols: int) -> list[list[int]]:
    return draw(st.lists(st.lists(st.integers(-2, 2), min_size=cols, max_size=cols),
                         min_size=rows, max_size=rows))


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_random_routing_matches_float64(data):
    n, d, E, f = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(2, 4)), data.draw(st.integers(1, 3)))
    k = data.draw(st.integers(1, E))
    renormalize = data.draw(st.booleans())
    x, W_r = _ints(data.draw, n, d), _ints(data.draw, d, E)
    experts = [Expert(_ints(data.draw, d, f), _ints(data.draw, f, d)) for _ in range(E)]
    g, routing = route(x, W_r, experts, k, renormalize)
    X, R = np.array(x, float), np.array(x) @ np.array(W_r)  # exact integer scores
    p = np.exp(R - R.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    want = np.zeros_like(X)
    for i in range(n):
        ranked = sorted(range(E), key=lambda e: (-R[i, e], e))
        kept = sorted(ranked[:k])
        assert routing.chosen[i] == tuple(kept)
        tie = k < E and R[i, ranked[k - 1]] == R[i, ranked[k]]
        assert any(t.startswith(f"token {i}:") for t in routing.ties) == tie
        gate = np.array([p[i, e] if e in kept else 0 for e in range(E)])
        gate = gate / gate.sum() if renormalize else gate
        for e, ex in enumerate(experts):
            out = np.maximum(X[i] @ np.array(ex.W_1, float), 0) @ np.array(ex.W_2, float)
            want[i] += gate[e] * out
    assert np.allclose(_floats(g["moe.router_probabilities"]), p, rtol=0, atol=1e-13)
    assert np.allclose(_floats(g["moe.output"]), want, rtol=0, atol=1e-12)


def test_a_tie_at_the_k_th_place_is_proved_and_named():
    """Token 0 scores [1, 0, 1]: e1 and e3 tie for the one place, e1 (lower index) goes;
    token 1 scores [0, 1, 1] with k = 2: e2 and e3 both go, no tie at the boundary."""
    W_r = [[1, 0, 1], [0, 1, 1]]
    experts = [Expert([[1, 0], [0, 1]], [[1, 0], [0, 1]]) for _ in range(3)]
    g, routing = route([[1, 0]], W_r, experts, 1)
    assert routing.chosen == [(0,)] and "proved equal scores" in routing.notes[0]
    assert g["moe.experts"].values(decimals=0) == [["1", "0", "0"]]
    g, routing = route([[0, 1]], W_r, experts, 2)
    assert routing.chosen == [(1, 2)] and routing.ties == []
    gates = _floats(g["moe.gates"])[0]  # renormalised over e2, e3: 1/2 each
    assert gates.tolist() == [0.0, 0.5, 0.5]


def test_a_bad_top_k_is_refused():
    with pytest.raises(InputError, match="top_k must be from 1 to 2"):
        route([[1]], [[1, 2]], [Expert([[1]], [[1]]), Expert([[1]], [[1]])], 3)
