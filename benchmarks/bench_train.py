"""Benchmark: ``train --steps 5``, the time of each step (issue 11: step 5 within 2x step 1).

Each step is timed from the creation of its weight stages to its loss printed with
30 certified digits: the update, the forward pass reading the weight stages, the
loss, and the step before's backward pass (evaluated when the loss is).  Step 0 is
the forward pass on the example's own weights and builds no update; the ratio
compared is step 5 / step 1.  On the built-in example and on random weights at
the built-in shapes (1 and 2 layers, an mse loss against a random target).

Each step's time is the median of :data:`REPEATS` runs.  Run:
``python benchmarks/bench_train.py``.  A measurement, not a test.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import sympy

sys.path.insert(0, str(Path(__file__).parent))
from bench_backward import with_loss  # noqa: E402
from bench_engine import random_example  # noqa: E402

from symformer.blocks import derive  # noqa: E402
from symformer.blocks.train import loss_value, train  # noqa: E402
from symformer.engine.rounding import start_precision  # noqa: E402
from symformer.example import load_example  # noqa: E402

DIGITS = 30
STEPS = 5
#: Runs per case; each step's time is the median over them (the machine is shared).
REPEATS = 5


def steps(example, optimizer: str, lr: sympy.Rational) -> list[float]:
    """The seconds of steps 0..STEPS (each with its loss to DIGITS digits)."""
    def each(training, t):
        loss_value(training, t, significant=DIGITS)

    return train(derive(example, max_work=10**9), lr, STEPS, optimizer, each,
                 start_precision(None, DIGITS)).seconds


def main() -> None:
    cases = [("built-in", load_example())]
    cases += [(f"random, {n} layer{'s' if n > 1 else ''}",
               with_loss(random_example(4, 4, 2, n, d_ff=6))) for n in (1, 2)]
    for name, example in cases:
        for optimizer in ("sgd", "adam"):
            runs = [steps(example, optimizer, sympy.Rational(1, 100)) for _ in range(REPEATS)]
            times = [statistics.median(step) for step in zip(*runs)]
            shown = ", ".join(f"{t * 1e3:.0f}" for t in times)
            print(f"{name}, {optimizer}: steps 0..{STEPS} {shown} ms; "
                  f"step {STEPS} / step 1 = {times[STEPS] / times[1]:.2f}")


if __name__ == "__main__":
    main()
