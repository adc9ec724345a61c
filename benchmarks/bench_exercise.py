"""Exercise generation cost, measured in one run: no thresholds.

100 variants of the built-in example with the default ask (layer 1, head 1: Q, K, V,
dot products, scores, weights, output), 2 decimals, sheets and keys in LaTeX and
Markdown and the combined key (no PDF): the time per variant, the number of rejected
draws by reason (and how many the float prefilter rejected), and the share of the
time spent searching for variants that meet the rounding margin (drawing, prefiltering,
building and checking, rejected draws included) and in the certified checks alone.

Times are CPU seconds of this process (``time.process_time``): the machine is shared.

Run: ``python benchmarks/bench_exercise.py [N]``
"""

from __future__ import annotations

import sys
import time

from symformer.exercise import SheetRequest, make_exercise


def main(count: int = 100) -> None:
    start = time.process_time()
    made = make_exercise(SheetRequest(None, count, seed=2026, max_work=0))  # no work limit
    total = time.process_time() - start
    search = made.search
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(search.rejected.items())) or "none"
    print(f"{count} variants, {len(made.asked)} asked stages, {len(made.files)} files: "
          f"{total:.1f} s, {1000 * total / count:.0f} ms per variant")
    print(f"rejected draws: {search.total_rejected} ({reasons}); "
          f"{search.total_rejected / count:.1f} per variant")
    print(f"search (draw + derive + check, rejected draws included): {search.seconds:.1f} s "
          f"= {100 * search.seconds / total:.0f}% of the time; certified margin, given and "
          f"spread checks alone: {search.check_seconds:.1f} s = "
          f"{100 * search.check_seconds / total:.0f}%")
    built = len(made.variants) + search.total_rejected - search.prefiltered
    print(f"float prefilter: {search.prefiltered} draws rejected without building them "
          f"({search.prefilter_seconds:.1f} s); {built} built and certified")
    print(f"sheets, keys and the combined key: {total - search.seconds:.1f} s = "
          f"{100 * (total - search.seconds) / total:.0f}%")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
