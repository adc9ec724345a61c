"""The naive SymPy port of the post's block: every stage a fully expanded sympy.Matrix.

This is the design symformer avoids; the benchmark times it (in a subprocess with a
time limit) to measure how far the stage graph is ahead.  Run alone:
``python benchmarks/naive_port.py [head1|block] [digits]``.
"""

from __future__ import annotations

import sys
import time

import sympy as sp

from symformer.example import load_example
from symformer.ops import positional_encoding


def layer_norm(M: sp.Matrix, eps: sp.Rational) -> sp.Matrix:
    rows = []
    for i in range(M.rows):
        row = list(M.row(i))
        mu = sp.expand(sum(row) / len(row))
        var = sp.expand(sum((x - mu) ** 2 for x in row) / len(row))
        rows.append([sp.expand((x - mu) / sp.sqrt(var + eps)) for x in row])
    return sp.Matrix(rows)


def attention(X: sp.Matrix, head) -> sp.Matrix:
    Q, K, V = (sp.expand(X * W) for W in (head.W_Q, head.W_K, head.W_V))
    S = (Q * K.T / sp.sqrt(head.d_k)).applyfunc(sp.expand)
    E = S.applyfunc(sp.exp)
    W = sp.Matrix(S.rows, S.cols, lambda i, j: E[i, j] / sum(E.row(i)))
    return (W * V).applyfunc(sp.expand)


def naive(part: str) -> list[sp.Expr]:
    e = load_example()
    layer = e.layers[0]
    X = sp.Matrix([list(e.embeddings.row(t)) for t in e.token_ids])
    X = X + positional_encoding(len(e.tokens), e.d_model)
    if part == "head1":
        return list(attention(X, layer.heads[0]))
    concat = sp.Matrix.hstack(*(attention(X, h) for h in layer.heads))
    mha = (concat * layer.W_O).applyfunc(sp.expand)
    Y = layer_norm(X + mha, layer.eps)
    hidden = (Y * layer.W_1 + sp.ones(Y.rows, 1) * layer.b_1).applyfunc(sp.expand)
    act = hidden.applyfunc(lambda h: sp.Max(0, h))
    F = (act * layer.W_2 + sp.ones(Y.rows, 1) * layer.b_2).applyfunc(sp.expand)
    return list(layer_norm(Y + F, layer.eps))


def main() -> None:
    part = sys.argv[1] if len(sys.argv) > 1 else "head1"
    digits = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    t0 = time.perf_counter()
    entries = naive(part)
    t1 = time.perf_counter()
    print(f"build {t1 - t0:.3f}", flush=True)
    for x in entries:
        x.evalf(digits)
    t2 = time.perf_counter()
    print(f"evalf {t2 - t1:.3f}", flush=True)


if __name__ == "__main__":
    main()
