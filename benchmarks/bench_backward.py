"""Benchmark: the exact backward pass against the exact forward alone.

1. the built-in example (its own mse loss), every stage to 30 certified significant
   digits and to 30 certified decimals: forward alone vs forward + loss + every
   gradient stage (significant digits need every exact 0 proved: a ball around 0 has
   no first significant digit; decimals print 0.000... from the ball);
2. ``llama_style`` at the benchmark's shapes (:func:`bench_blocks.llama_scaled`: 8
   tokens x d_model 8 x 4 query / 2 key-value heads x 2 layers, RMSNorm, RoPE,
   SwiGLU, LM head) with a cross-entropy loss over its LM head (the target of each
   position is the next token, the last position's the first token), the same two ways;
3. depth: 1, 2, 4, 8 layers of the built-in shapes (random non-zero weights, each
   layer its own, an mse loss against a random target), forward vs forward + backward.

Each measurement is the median of :data:`REPEAT` runs after one warm-up run (the
first run of an example pays SymPy's caches and the interpreter's first calls).

Run: ``PYTHONPATH=. python benchmarks/bench_backward.py`` from the repository root
(the worktree's symformer first).  A measurement, not a test (the target of issue 11
is backward + forward <= 3x the forward, linear in depth).
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).parent))
from bench_blocks import llama_scaled  # noqa: E402
from bench_engine import median_time, random_example  # noqa: E402

from symformer.blocks import derive  # noqa: E402
from symformer.blocks.backward import backward  # noqa: E402
from symformer.example import load_example  # noqa: E402
from symformer.example.loader import example_from_dict  # noqa: E402
from symformer.example.loss import Loss  # noqa: E402

DIGITS = 30
#: Timed runs per measurement (after one warm-up run).
REPEAT = 5


def forward_run(example, fixed: bool = False) -> int:
    """Every forward stage to :data:`DIGITS` significant digits (``fixed``: decimals);
    returns the entries printed."""
    return _print(derive(example, max_work=10**9), fixed)


def backward_run(example, fixed: bool = False) -> int:
    """Forward, loss and every gradient stage, printed as :func:`forward_run` prints;
    returns the entries printed."""
    return _print(backward(derive(example, max_work=10**9)), fixed)


def _print(stages, fixed: bool) -> int:
    """Every stage's values; the entries printed.  30 significant digits need an exact
    0 proved (a ball around 0 has no first significant digit); 30 decimals print it as
    0.000... from the ball alone."""
    entries = 0
    for stage in stages:
        if fixed:
            stage.values(decimals=DIGITS)
        else:
            stage.values(significant=DIGITS)
        entries += stage.shape[0] * stage.shape[1]
    return entries


def with_loss(example, seed: int = 1):
    rng = random.Random(seed)
    n, d = len(example.tokens), example.d_model
    target = sympy.Matrix(n, d, lambda i, j: sympy.Rational(rng.randint(-8, 8), 8))
    return dataclasses.replace(example, loss=Loss("mse", "bench", target=target))


def llama_with_loss():
    """llama_style at the benchmark's shapes with a cross-entropy loss (next tokens)."""
    data = llama_scaled()
    tokens = data["tokens"]
    data["loss"] = {"kind": "cross_entropy", "targets": tokens[1:] + tokens[:1]}
    return example_from_dict(data, "<benchmark>")


def timed(run, example, fixed: bool = False) -> float:
    """The median time of ``run(example)`` over :data:`REPEAT` runs after a warm-up."""
    run(example, fixed)
    return median_time(lambda: run(example, fixed), REPEAT)


def main() -> None:
    for label, example in (("built-in", load_example()),
                           ("llama_style 8x8, 4q/2kv heads, 2 layers", llama_with_loss())):
        for fixed in (False, True):
            fwd = timed(forward_run, example, fixed)
            both = timed(backward_run, example, fixed)
            digits = f"{DIGITS} {'decimals' if fixed else 'significant digits'}"
            print(f"{label}, {digits}: forward {fwd * 1e3:.1f} ms, forward + backward "
                  f"{both * 1e3:.1f} ms ({both / fwd:.1f}x)")
    base = None
    for layers in (1, 2, 4, 8):
        example = with_loss(random_example(4, 4, 2, layers, d_ff=6))
        fwd = timed(forward_run, example)
        both = timed(backward_run, example)
        base = base or both
        print(f"{layers} layer(s): forward {fwd * 1e3:.1f} ms, forward + backward "
              f"{both * 1e3:.1f} ms ({both / fwd:.1f}x; {both / base:.1f}x one layer)")


if __name__ == "__main__":
    main()
