"""Speed against the certified limit: a hand-written ``arb_mat`` pass, and the CLI's wall time.

    python benchmarks/bench_speed.py
    python benchmarks/bench_speed.py --big 64,64,8,4      # tokens,d_model,heads,layers

Prints, measured in one run (the machine is shared: read the ratios):
1. the built-in block: ``derive`` + every stage to 50 certified digits, against a
   hand-written python-flint ``arb_mat`` forward pass of the same block (output only,
   200 bits; no rounding, no stage names, no proofs: the certified limit);
2. ``symformer derive`` on the built-in example as a whole process, against
   ``python -c "import numpy, flint"`` (medians of several runs of each);
3. a large random example (default 64 tokens x d_model 64 x 8 heads x 4 layers),
   derive + 30 digits: time per stage entry against the built-in example's, and its
   peak memory (measured in a child process);
4. the same for the backward pass (forward + loss + every gradient stage, 30 digits;
   default 32 x 32 x 4 heads x 2 layers, an mse loss) against the built-in example's
   backward pass, per stage entry, and its peak memory;
5. the exercise generator: CPU time per variant of the built-in example's default
   exercise (``benchmarks/bench_exercise.py`` breaks it down);
6. the scale table (issue 32): derive + every stage to certified digits against the
   hand-written ``arb_mat`` pass of the same encoder (:func:`arb_mat_block`), CPU time,
   the minimum of ``--table-repeat`` runs of each side, all shapes in this one run: the
   built-in block (50 digits, 200 bits) and random post-norm encoders
   (:func:`bench_engine.random_example`, 30 digits, 128 bits) of 16 x 16 x 4 x 2,
   64 x 64 x 8 x 4 and 32 x 128 x 8 x 2 (``--table-only`` prints this part alone).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from flint import arb, arb_mat, ctx, fmpq

sys.path.insert(0, str(Path(__file__).parent))

from bench_backward import backward_run  # noqa: E402
from bench_engine import exact_run, median_time  # noqa: E402

from symformer import load_example  # noqa: E402
from symformer.example.schema import Example  # noqa: E402


def _mat(m) -> arb_mat:
    return arb_mat([[arb(fmpq(int(v.p), int(v.q))) for v in m.row(i)] for i in range(m.rows)])


def arb_mat_block(example: Example, prec: int = 200):
    """A hand-written ``arb_mat`` forward pass of a post-norm encoder (output only):
    the built-in block, or :func:`bench_engine.random_example`'s, every layer.

    Weights are converted once, outside the timing, at ``prec`` bits (a weight such as
    0.1 is no dyadic); the positional encoding is computed with arb's sin/cos, as the
    engine does; every product is one ``arb_mat`` product, and only the softmax,
    LayerNorm, ReLU and the biases loop over entries.
    """
    n, d = len(example.tokens), example.d_model
    ids = example.token_ids
    layers = []
    saved, ctx.prec = ctx.prec, prec
    for layer in example.layers:
        heads = [(_mat(h.W_Q), _mat(h.W_K), _mat(h.W_V), h.d_k) for h in layer.heads]
        gammas = [_mat(getattr(layer, k)).tolist()[0]
                  for k in ("gamma_1", "beta_1", "gamma_2", "beta_2")]
        layers.append((heads, _mat(layer.W_O), _mat(layer.W_1), _mat(layer.b_1).tolist()[0],
                       _mat(layer.W_2), _mat(layer.b_2).tolist()[0], *gammas,
                       fmpq(int(layer.eps.p), int(layer.eps.q))))
    ctx.prec = saved
    E = example.embeddings

    def layer_norm(x: arb_mat, eps: arb, gamma: list, beta: list) -> arb_mat:
        rows = []
        for row in x.tolist():
            mu = sum(row, arb(0)) / len(row)
            var = sum(((v - mu) * (v - mu) for v in row), arb(0)) / len(row)
            root = (var + eps).sqrt()
            rows.append([(v - mu) / root * g + b for v, g, b in zip(row, gamma, beta)])
        return arb_mat(rows)

    def run() -> arb_mat:
        ctx.prec = prec
        rows = []
        for pos, t in enumerate(ids):
            rows.append([arb(fmpq(int(E[t, j].p), int(E[t, j].q)))
                         + ((arb(pos) / arb(10000) ** (arb(j - j % 2) / d)).sin() if j % 2 == 0
                            else (arb(pos) / arb(10000) ** (arb(j - j % 2) / d)).cos())
                         for j in range(d)])
        x = arb_mat(rows)
        for heads, W_O, W_1, b_1, W_2, b_2, g1, be1, g2, be2, eps_q in layers:
            eps = arb(eps_q)
            outs = []
            for W_Q, W_K, W_V, d_k in heads:
                q, k, v = x * W_Q, x * W_K, x * W_V
                s = q * k.transpose()
                scale = 1 / arb(d_k).sqrt()
                weights = []
                for row in s.tolist():
                    e = [(w * scale).exp() for w in row]
                    total = sum(e, arb(0))
                    weights.append([w / total for w in e])
                outs.append((arb_mat(weights) * v).tolist())
            concat = arb_mat([[v for o in outs for v in o[i]] for i in range(n)])
            y = layer_norm(x + concat * W_O, eps, g1, be1)
            act = arb_mat([[v if v > 0 else arb(0) for v in (h + b for h, b in zip(row, b_1))]
                           for row in (y * W_1).tolist()])
            f = arb_mat([[v + b for v, b in zip(row, b_2)] for row in (act * W_2).tolist()])
            x = layer_norm(y + f, eps, g2, be2)
        return x

    return run


def process_time(argv: list[str], runs: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of a whole process.

    Run as an installed package runs: with bytecode caches (a first, untimed run
    writes them, even where ``PYTHONDONTWRITEBYTECODE`` is set for development).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(argv, check=True, capture_output=True, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def cpu_time(fn, repeat: int) -> float:
    """Median CPU time of ``fn()`` (steadier than wall time on a shared machine)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def profile(example: Example, top: int) -> None:
    """The ``top`` functions by own time of derive + every stage to 50 digits."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        exact_run(example, 50)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


_BIG = """
import json, resource, sys, time
sys.path.insert(0, {here!r})
from bench_engine import exact_run, random_example
example = random_example(*{shape!r}, seed=3)
t0, c0 = time.perf_counter(), time.process_time()
entries = exact_run(example, 30)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({{"entries": entries, "seconds": seconds, "cpu": cpu,
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


_BIG_BACKWARD = """
import json, resource, sys, time
sys.path.insert(0, {here!r})
from bench_backward import backward_run, with_loss
from bench_engine import random_example
example = with_loss(random_example(*{shape!r}, seed=3))
t0, c0 = time.perf_counter(), time.process_time()
entries = backward_run(example)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({{"entries": entries, "seconds": seconds, "cpu": cpu,
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its JSON line."""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


#: The scale table's random encoders: tokens, d_model, heads, layers.
TABLE = ((16, 16, 4, 2), (64, 64, 8, 4), (32, 128, 8, 2))


def min_cpu(fn, repeat: int) -> float:
    """The minimum CPU time of ``repeat`` runs of ``fn()`` (after one untimed run)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _seconds(t: float) -> str:
    """A CPU time for the table: seconds from one second up, milliseconds below."""
    return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.2f} ms"


def scale_table(repeat: int) -> None:
    """Part 6: the engine against the ``arb_mat`` pass at every shape of the scale table."""
    from bench_engine import random_example

    cases = [("built-in (4 x 4 x 2 x 1)", load_example(), 50, 200)]
    cases += [(" x ".join(map(str, shape)), random_example(*shape, seed=3), 30, 128)
              for shape in TABLE]
    print("6. scale table: derive + every stage to certified digits vs the arb_mat pass,"
          f" CPU, min of {repeat} runs")
    print("   | tokens x d_model x heads x layers | digits | entries | symformer |"
          " arb_mat | ratio |")
    worst = 0.0
    for label, example, digits, bits in cases:
        entries = exact_run(example, digits)
        ours = min_cpu(lambda e=example, k=digits: exact_run(e, k), repeat)
        theirs = min_cpu(arb_mat_block(example, bits), repeat * 3)
        worst = max(worst, ours / theirs)
        print(f"   | {label} | {digits} | {entries:,} | {_seconds(ours)} | {_seconds(theirs)} |"
              f" {ours / theirs:.1f}x |", flush=True)
    print(f"   worst ratio {worst:.1f}x  (target <= 10x; load average"
          f" {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--runs", type=int, default=7, help="process runs per command")
    parser.add_argument("--big", default="64,64,8,4",
                        help="tokens,d_model,heads,layers of the large example")
    parser.add_argument("--big-backward", default="32,32,4,2",
                        help="tokens,d_model,heads,layers of the backward pass's example")
    parser.add_argument("--variants", type=int, default=20,
                        help="exercise variants to time")
    parser.add_argument("--table-repeat", type=int, default=3,
                        help="runs of each side per shape of the scale table (part 6)")
    parser.add_argument("--table-only", action="store_true",
                        help="print the scale table (part 6) alone")
    parser.add_argument("--profile", type=int, metavar="N", default=0,
                        help="print the N top functions (own time) of the built-in run")
    args = parser.parse_args()
    if args.table_only:
        scale_table(args.table_repeat)
        return
    example = load_example()
    exact_run(example, 50)
    if args.profile:
        profile(example, args.profile)

    limit = arb_mat_block(example)
    limit()
    certified = median_time(limit, args.repeat * 5)
    exact = median_time(lambda: exact_run(example, 50), args.repeat)
    certified_cpu = cpu_time(limit, args.repeat * 5)
    exact_cpu = cpu_time(lambda: exact_run(example, 50), args.repeat)
    print("1. built-in block, 50 certified digits of every stage vs an arb_mat pass (200 bits)")
    print(f"   symformer: {exact * 1e3:.2f} ms; arb_mat: {certified * 1e3:.2f} ms;"
          f" ratio {exact / certified:.1f}x  (target <= 10x)")
    print(f"   CPU time: {exact_cpu * 1e3:.2f} ms vs {certified_cpu * 1e3:.2f} ms;"
          f" ratio {exact_cpu / certified_cpu:.1f}x")

    base = process_time([sys.executable, "-c", "import numpy, flint"], args.runs)
    cli = process_time([sys.executable, "-m", "symformer", "derive"], args.runs)
    sym = process_time([sys.executable, "-c", "import numpy, flint, sympy"], args.runs)
    print("2. whole processes, medians of", args.runs, "runs (wall; CPU)")
    print(f"   symformer derive: {cli[0]:.2f} s; {cli[1]:.2f} s")
    print(f"   python -c 'import numpy, flint': {base[0]:.2f} s; {base[1]:.2f} s")
    print(f"   python -c 'import numpy, flint, sympy': {sym[0]:.2f} s; {sym[1]:.2f} s")
    print(f"   ratio {cli[0] / base[0]:.1f}x wall, {cli[1] / base[1]:.1f}x CPU  (target <= 3x);"
          f" importing SymPy alone: {sym[0] / base[0]:.1f}x wall, {sym[1] / base[1]:.1f}x CPU")

    shape = tuple(int(v) for v in args.big.split(","))
    small_entries = exact_run(example, 30)
    small = median_time(lambda: exact_run(example, 30), args.repeat)
    small_cpu = cpu_time(lambda: exact_run(example, 30), args.repeat)
    code = _BIG.format(here=str(Path(__file__).parent), shape=(*shape,))
    big = child(code)
    per_small, per_big = small / small_entries, big["seconds"] / big["entries"]
    print(f"3. {' x '.join(map(str, shape))} (tokens x d_model x heads x layers), 30 digits")
    print(f"   {big['entries']:,} entries in {big['seconds']:.1f} s,"
          f" {per_big * 1e6:.1f} us/entry vs built-in {per_small * 1e6:.1f} us/entry:"
          f" ratio {per_big / per_small:.2f}  (target <= 2); peak memory"
          f" {big['peak_mb']:.0f} MB")
    cpu_small, cpu_big = small_cpu / small_entries, big["cpu"] / big["entries"]
    print(f"   CPU time: {big['cpu']:.1f} s, {cpu_big * 1e6:.1f} us/entry vs built-in"
          f" {cpu_small * 1e6:.1f} us/entry: ratio {cpu_big / cpu_small:.2f}")

    shape = tuple(int(v) for v in args.big_backward.split(","))
    small_entries = backward_run(example)
    small_cpu = cpu_time(lambda: backward_run(example), max(3, args.repeat // 4))
    big = child(_BIG_BACKWARD.format(here=str(Path(__file__).parent), shape=(*shape,)))
    cpu_small, cpu_big = small_cpu / small_entries, big["cpu"] / big["entries"]
    print(f"4. backward pass (forward + loss + gradients), {' x '.join(map(str, shape))},"
          f" 30 digits")
    print(f"   {big['entries']:,} entries in {big['cpu']:.1f} s CPU, {cpu_big * 1e6:.1f}"
          f" us/entry vs built-in {cpu_small * 1e6:.1f} us/entry ({small_entries} entries):"
          f" ratio {cpu_big / cpu_small:.2f}; peak memory {big['peak_mb']:.0f} MB")

    from symformer.exercise import SheetRequest, make_exercise

    start = time.process_time()
    make_exercise(SheetRequest(None, args.variants, seed=2026))
    per_variant = (time.process_time() - start) / args.variants
    print(f"5. exercise generator, built-in example's default exercise: {args.variants}"
          f" variants, {per_variant * 1e3:.0f} ms CPU per variant")
    scale_table(args.table_repeat)


if __name__ == "__main__":
    main()
