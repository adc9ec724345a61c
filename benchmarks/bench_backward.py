"""Benchmark: the exact backward pass against the exact forward alone.

1. the built-in example (its own mse loss), every stage to 30 certified digits:
   forward alone vs forward + loss + every gradient stage;
2. depth: 1, 2, 4, 8 layers of the built-in shapes (random non-zero weights, each
   layer its own, an mse loss against a random target), forward vs forward + backward.

Run: ``python benchmarks/bench_backward.py``.  A measurement, not a test (the
target of issue 11 is backward + forward <= 3x the forward, linear in depth).
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import median_time, random_example  # noqa: E402

from symformer.blocks import derive  # noqa: E402
from symformer.blocks.backward import backward  # noqa: E402
from symformer.example import load_example  # noqa: E402
from symformer.example.loss import Loss  # noqa: E402

DIGITS = 30


def forward_run(example) -> None:
    for stage in derive(example, max_work=10**9):
        stage.values(significant=DIGITS)


def backward_run(example) -> None:
    for stage in backward(derive(example, max_work=10**9)):
        stage.values(significant=DIGITS)


def with_loss(example, seed: int = 1):
    rng = random.Random(seed)
    n, d = len(example.tokens), example.d_model
    target = sympy.Matrix(n, d, lambda i, j: sympy.Rational(rng.randint(-8, 8), 8))
    return dataclasses.replace(example, loss=Loss("mse", "bench", target=target))


def main() -> None:
    builtin = load_example()
    fwd = median_time(lambda: forward_run(builtin), 5)
    both = median_time(lambda: backward_run(builtin), 3)
    print(f"built-in, {DIGITS} digits: forward {fwd * 1e3:.1f} ms, forward + backward "
          f"{both * 1e3:.1f} ms ({both / fwd:.1f}x)")
    base = None
    for layers in (1, 2, 4, 8):
        example = with_loss(random_example(4, 4, 2, layers, d_ff=6))
        fwd = median_time(lambda e=example: forward_run(e), 3)
        both = median_time(lambda e=example: backward_run(e), 3)
        base = base or both
        print(f"{layers} layer(s): forward {fwd * 1e3:.1f} ms, forward + backward "
              f"{both * 1e3:.1f} ms ({both / fwd:.1f}x; {both / base:.1f}x one layer)")


if __name__ == "__main__":
    main()
