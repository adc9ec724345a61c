"""Engine benchmark: ratios measured in one run on one machine.

    python benchmarks/bench_engine.py            # everything (the naive port takes minutes)
    python benchmarks/bench_engine.py --naive-limit 60

Prints, for the README:
1. the built-in example's full block derived and evaluated to 50 certified digits,
   against the naive SymPy port (fully expanded matrices; run in a subprocess with a
   time limit, so a timeout gives a lower bound) and against a float64 NumPy pass;
2. scaling with depth: derive + evaluate for 1, 2, 4, 8 layers of the built-in shapes;
3. no swell at larger shapes: 16 tokens x d_model 16 x 4 heads x 2 layers, random
   rational weights, 30 digits: time per stage entry against the built-in example's.
Timings are medians of repeated runs; the machine is shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import sympy

from symformer import derive, load_example
from symformer.example.schema import Example, Head, Layer


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def exact_run(example: Example, digits: int) -> int:
    """Derive and evaluate every stage to ``digits`` certified digits; entries done."""
    g = derive(example, max_work=10**9)
    entries = 0
    for stage in g:
        stage.values(significant=digits)
        entries += stage.shape[0] * stage.shape[1]
    return entries


def float_block(example: Example):
    """A float64 NumPy forward pass with the weights converted once, outside the timing."""
    f = lambda m: np.array(m.tolist(), dtype=np.float64)  # noqa: E731
    n, d = len(example.tokens), example.d_model
    emb = f(example.embeddings)[list(example.token_ids)]
    pos = np.arange(n)[:, None]
    rate = 10000.0 ** (-(np.arange(d) - np.arange(d) % 2) / d)
    pe = np.where(np.arange(d) % 2 == 0, np.sin(pos * rate), np.cos(pos * rate))
    layers = [([(f(h.W_Q), f(h.W_K), f(h.W_V)) for h in L.heads], f(L.W_O), f(L.W_1),
               f(L.b_1), f(L.W_2), f(L.b_2), float(L.eps)) for L in example.layers]

    def ln(z, eps):
        mu = z.mean(-1, keepdims=True)
        return (z - mu) / np.sqrt(z.var(-1, keepdims=True) + eps)

    def run():
        x = emb + pe
        for heads, W_O, W_1, b_1, W_2, b_2, eps in layers:
            outs = []
            for W_Q, W_K, W_V in heads:
                q, k, v = x @ W_Q, x @ W_K, x @ W_V
                s = q @ k.T / np.sqrt(q.shape[1])
                e = np.exp(s - s.max(-1, keepdims=True))
                outs.append(e / e.sum(-1, keepdims=True) @ v)
            y = ln(x + np.concatenate(outs, -1) @ W_O, eps)
            x = ln(y + np.maximum(0, y @ W_1 + b_1) @ W_2 + b_2, eps)
        return x

    return run


def stacked(example: Example, layers: int) -> Example:
    return dataclasses.replace(example, layers=example.layers[:1] * layers)


NONZERO = [k for k in range(-8, 9) if k]


def random_example(n: int, d: int, heads: int, layers: int, d_ff: int | None = None,
                   seed: int = 1) -> Example:
    """Random non-zero rational weights (multiples of 1/16 in [-1/2, 1/2]).

    Non-zero, so that no exact zero (whose proof is a cost of its own, measured
    separately in part 2) appears by accident.
    """
    rng = random.Random(seed)

    def mat(r: int, c: int) -> sympy.Matrix:
        return sympy.Matrix(r, c, lambda i, j: sympy.Rational(rng.choice(NONZERO), 16))

    dk = d // heads
    d_ff = d_ff or 4 * d
    vocab = tuple(f"w{i}" for i in range(n))
    ones, zeros = sympy.ones(1, d), sympy.zeros(1, d)
    blocks = tuple(Layer(
        heads=tuple(Head(mat(d, dk), mat(d, dk), mat(d, dk)) for _ in range(heads)),
        W_O=mat(d, d), W_1=mat(d, d_ff), b_1=mat(1, d_ff), W_2=mat(d_ff, d),
        b_2=mat(1, d), gamma_1=ones, beta_1=zeros, gamma_2=ones, beta_2=zeros)
        for _ in range(layers))
    return Example(title="random", tokens=vocab, vocab=vocab, embeddings=mat(n, d),
                   layers=blocks)


def naive_port(limit: float) -> tuple[float, bool]:
    """Seconds the naive port needs for the full block (build + evalf 50), or the limit."""
    script = Path(__file__).with_name("naive_port.py")
    t0 = time.perf_counter()
    try:
        subprocess.run([sys.executable, str(script), "block", "50"], timeout=limit,
                       check=True, capture_output=True)
    except subprocess.TimeoutExpired:
        return limit, False
    return time.perf_counter() - t0, True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--naive-limit", type=float, default=300.0,
                        help="seconds to let the naive port run (default 300)")
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    example = load_example()
    exact_run(example, 50)  # warm up imports and caches

    exact = median_time(lambda: exact_run(example, 50), args.repeat)
    floats = median_time(float_block(example), 2001)
    print("1. built-in block (4 tokens x d_model 4 x 2 heads x 1 layer), 50 digits")
    print(f"   symformer derive + evaluate: {exact * 1e3:.1f} ms;"
          f" float64 NumPy: {floats * 1e6:.0f} us; ratio {exact / floats:.0f}x the float pass")
    naive, finished = naive_port(args.naive_limit)
    bound = "" if finished else ">= "
    print(f"   naive SymPy port: {bound}{naive:.0f} s"
          f"{'' if finished else ' (stopped at the limit: a lower bound)'};"
          f" symformer is {bound}{naive / exact:,.0f}x faster")

    print("2. depth: derive + evaluate to 50 digits, built-in shapes (4 x 4 x 2 heads,"
          " d_ff 6),\n   every layer with its own random rational weights")
    base = None
    for layers in (1, 2, 4, 8):
        deep = random_example(4, 4, 2, layers, d_ff=6, seed=layers)
        t = median_time(lambda deep=deep: exact_run(deep, 50), max(5, args.repeat // 2))
        base = base or t
        print(f"   {layers} layer(s): {t * 1e3:7.1f} ms   time / time(1 layer) = {t / base:.2f}")
    print("   the post's block stacked with the *same* weights (symmetric rows make exact"
          " zeros,\n   each proved exactly before it prints as 0):")
    base = None
    for layers in (1, 8):
        deep = stacked(example, layers)
        t = median_time(lambda deep=deep: exact_run(deep, 50), 3)
        base = base or t
        print(f"   {layers} layer(s): {t * 1e3:7.1f} ms   time / time(1 layer) = {t / base:.2f}")

    print("3. larger shapes, random rational weights")
    small_entries = exact_run(example, 30)
    small = median_time(lambda: exact_run(example, 30), args.repeat)
    big = random_example(16, 16, 4, 2)
    big_entries = exact_run(big, 30)
    large = median_time(lambda: exact_run(big, 30), 3)
    big_floats = median_time(float_block(big), 501)
    per_small, per_big = small / small_entries, large / big_entries
    print(f"   built-in, 30 digits: {small_entries} entries, {per_small * 1e6:.1f} us/entry")
    print(f"   16 x 16 x 4 heads x 2 layers, 30 digits: {big_entries} entries in"
          f" {large:.2f} s, {per_big * 1e6:.1f} us/entry;"
          f" per-entry ratio {per_big / per_small:.2f}")
    print(f"   float64 NumPy of the same shapes: {big_floats * 1e6:.0f} us;"
          f" ratio {large / big_floats:.0f}x")


if __name__ == "__main__":
    main()
