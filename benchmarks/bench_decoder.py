"""Decoder cost, measured in one run: ratios only, no thresholds.

1. The encoder-decoder example (4 source, 4 target tokens, d_model 4, 2 heads,
   1 encoder + 1 decoder layer), derived and every stage printed to 50 certified
   significant digits, against the encoder alone, same work.
2. The same with 1, 2 and 4 decoder layers: the time per decoder layer should stay flat.
3. Greedy generation for 1, 2, 4 and 8 steps (the end token made unreachable so that
   every step runs): the time per step should grow only with the target length.

Run: ``python benchmarks/bench_decoder.py``
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import sympy

from symformer import derive, load_example
from symformer.blocks import generate
from symformer.errors import UndecidedError

EXAMPLE = Path(__file__).parent.parent / "symformer" / "examples" / "encoder_decoder.toml"
DIGITS = 50


UNDECIDED: set[str] = set()


def certified(example, mode: str = "significant") -> float:
    """Seconds to derive ``example`` and print every stage to DIGITS significant digits.

    A stage holding an exact zero that the engine cannot prove zero has no certified
    significant digits; it is printed to DIGITS decimals instead and listed at the end.
    """
    start = time.perf_counter()
    g = derive(example)
    for stage in g:
        try:
            stage.values(**{mode: DIGITS})
        except UndecidedError:
            UNDECIDED.add(stage.name)
            stage.values(decimals=DIGITS)
    return time.perf_counter() - start


def best_of(runs: int, function, *args) -> float:
    return min(function(*args) for _ in range(runs))


def main() -> None:
    base = load_example(EXAMPLE)
    decoder = dataclasses.replace(base.decoder, tokens=("<s>", "je", "pense", "comprends"))
    full = dataclasses.replace(base, decoder=decoder)
    encoder_only = dataclasses.replace(base, decoder=None)
    t_encoder = best_of(3, certified, encoder_only)
    t_full = best_of(3, certified, full)
    print(f"encoder alone (4 tokens, d_model 4, 2 heads, 1 layer), {DIGITS} digits: "
          f"{t_encoder:.3f} s")
    print(f"encoder + decoder (4 + 4 tokens, 1 + 1 layers):            {t_full:.3f} s")
    print(f"ratio (encoder-decoder / encoder):                          "
          f"{t_full / t_encoder:.2f}")

    print(f"\nevery stage to {DIGITS} certified significant digits  |  to {DIGITS} decimals")
    print("decoder layers  seconds  per layer  |  seconds  per layer")
    t_decimals = best_of(3, certified, encoder_only, "decimals")
    for layers in (1, 2, 4):
        deep = dataclasses.replace(full, decoder=dataclasses.replace(
            decoder, layers=decoder.layers * layers))
        t = best_of(2, certified, deep)
        d = best_of(2, certified, deep, "decimals")
        print(f"{layers:14d}  {t:7.3f}  {(t - t_encoder) / layers:9.3f}  |  {d:7.3f}  "
              f"{(d - t_decimals) / layers:9.3f}")

    # Steer away from "</s>" so that every requested step runs.
    W = decoder.W_vocab.copy()
    W[:, decoder.vocab.index("</s>")] = sympy.Matrix([-10] * W.rows)
    endless = dataclasses.replace(full, decoder=dataclasses.replace(
        decoder, tokens=("<s>",), W_vocab=W))

    def steps(n: int) -> float:
        start = time.perf_counter()
        for step in generate(endless, n):
            step.probabilities(decimals=DIGITS)
        return time.perf_counter() - start

    print("\ngeneration steps  seconds  seconds per step")
    for n in (1, 2, 4, 8):
        t = best_of(2, steps, n)
        print(f"{n:16d}  {t:7.3f}  {t / n:16.3f}")
    if UNDECIDED:
        print("\nprinted to decimals (an exact zero without a proof for significant "
              "digits): " + ", ".join(sorted(UNDECIDED)))


if __name__ == "__main__":
    main()
