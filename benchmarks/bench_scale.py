"""GPT-2 at real width through the command line, against the arb_mat limit of its products.

    python benchmarks/bench_scale.py                       # 768 wide x 1 layer, vocab 512
    python benchmarks/bench_scale.py --full                # and GPT-2 small's configuration
    python benchmarks/bench_scale.py --size 8,256,4,1,512  # tokens,d_model,heads,layers,vocab

A random GPT-2 directory (float32 weights at GPT-2's init scale, written with NumPy) is
imported and derived as a user types it, each in its own process::

    symformer import DIR --tokens ... --out ex.toml      # refers to DIR/model.safetensors
    symformer derive ex.toml --max-work 0 --json > out   # every stage, certified

and the CPU time (user + system) and peak memory of both processes are measured.  The
limit beside them is a hand-written python-flint pass of the same model at 128 bits
(logits only: no rounding, no printing, no stage names; at 128 bits, or the first power
of two that certifies the logits to 30 digits: 128 bits lose them past a few layers,
each LayerNorm widening the balls): the tensors read with
``safetensors.numpy``, each weight matrix made an ``arb_mat`` the fastest way we know
(NumPy's exponents, an ``fmpz_mat`` times a power of two:
:func:`symformer.example.dyadic.dyadic_arb_mat`), every product one ``arb_mat`` product
(the tied head a block of columns at a time), Python loops only for LayerNorm, the
softmax and GELU.  The ratio is symformer's CPU over the limit's, measured in one run
(the machine is shared: wall time is noise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from flint import arb, arb_mat, ctx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_frameworks import gpt2_directory  # noqa: E402

from symformer.example.dyadic import dyadic_arb_mat  # noqa: E402

#: tokens,d_model,heads,layers,vocab: the issue's 768-wide case, and GPT-2 small's.
WIDE = "8,768,12,1,512"
FULL = "8,768,12,12,50257"
#: Columns of the tied head converted and multiplied at a time (the limit's pass).
BLOCK = 2048


def child(argv: list[str], out: str | None = None) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and peak memory (bytes) of ``symformer ARGV``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with open(out or os.devnull, "w") as sink:
        done = subprocess.run([sys.executable, "-m", "symformer", *argv], stdout=sink,
                              stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - wall
    if done.returncode:
        raise SystemExit(f"symformer {' '.join(argv)} failed: {done.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # the children's peak so far (Linux: kilobytes); the largest child is what it shows
    return cpu, wall, after.ru_maxrss * 1024


def limit_pass(folder: Path, tokens: list[int], heads: int, layers: int, prec: int = 128
               ) -> tuple[float, arb_mat]:
    """The hand-written arb_mat pass at ``prec`` bits: CPU seconds from reading the file
    to the logits."""
    from safetensors.numpy import load_file

    start = time.process_time()
    t = load_file(str(folder / "model.safetensors"))
    ctx.prec = prec
    n = len(tokens)
    eps, c, a = arb("1e-5"), (2 / arb.pi()).sqrt(), arb("0.044715")

    def mat(name: str) -> arb_mat:
        return dyadic_arb_mat(t[name] if t[name].ndim == 2 else t[name].reshape(1, -1))

    def bias(name: str) -> arb_mat:
        return arb_mat(mat(name).tolist() * n)

    def norm(x: arb_mat, g: str, b: str) -> arb_mat:
        gamma, beta = mat(g).tolist()[0], mat(b).tolist()[0]
        out = []
        for row in x.tolist():
            mu = sum(row, arb(0)) / len(row)
            centred = [v - mu for v in row]
            root = (sum((v * v for v in centred), arb(0)) / len(row) + eps).sqrt()
            out.append([v / root * gj + bj for v, gj, bj in zip(centred, gamma, beta)])
        return arb_mat(out)

    def softmax_causal(s: arb_mat) -> arb_mat:
        out = []
        for i, row in enumerate(s.tolist()):
            e = [v.exp() for v in row[:i + 1]]
            total = sum(e, arb(0))
            out.append([w / total for w in e] + [arb(0)] * (n - i - 1))
        return arb_mat(out)

    def gelu(m: arb_mat) -> arb_mat:
        return arb_mat([[v / 2 * (1 + (c * (v + a * v ** 3)).tanh()) for v in row]
                        for row in m.tolist()])

    wte, wpe = t["wte.weight"], t["wpe.weight"]
    x = dyadic_arb_mat(wte[tokens]) + dyadic_arb_mat(wpe[:n])
    d = wte.shape[1]
    hd = d // heads
    for i in range(layers):
        p = f"h.{i}."
        h = norm(x, p + "ln_1.weight", p + "ln_1.bias")
        qkv = h * mat(p + "attn.c_attn.weight") + bias(p + "attn.c_attn.bias")
        W_O = mat(p + "attn.c_proj.weight").tolist()
        parts = qkv.tolist()
        attn = bias(p + "attn.c_proj.bias")
        for k in range(heads):
            q, key, v = (arb_mat([row[lo:lo + hd] for row in parts])
                         for lo in (part * d + k * hd for part in range(3)))
            w = softmax_causal((q * key.transpose()) * (1 / arb(hd).sqrt()))
            rows = arb_mat(W_O[k * hd:(k + 1) * hd])
            attn = attn + (w * v) * rows
        x = x + attn
        f = gelu(norm(x, p + "ln_2.weight", p + "ln_2.bias") * mat(p + "mlp.c_fc.weight")
                 + bias(p + "mlp.c_fc.bias"))
        x = x + f * mat(p + "mlp.c_proj.weight") + bias(p + "mlp.c_proj.bias")
    y = norm(x, "ln_f.weight", "ln_f.bias")
    blocks = [(y * dyadic_arb_mat(wte[s:s + BLOCK].T)).tolist()
              for s in range(0, wte.shape[0], BLOCK)]
    logits = arb_mat([sum((b[r] for b in blocks), []) for r in range(n)])
    return time.process_time() - start, logits


def measure(size: str) -> dict:
    n, d, heads, layers, vocab = (int(v) for v in size.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        gpt2_directory(folder, max(n, 8), d, heads, layers, vocab)
        tokens = [int(v) for v in np.random.default_rng(1).integers(0, vocab, n)]
        out = Path(tmp) / "ex.toml"
        imp = child(["import", str(folder), "--tokens", ",".join(map(str, tokens)),
                     "--out", str(out), "--quiet", "--max-work", "0"])
        size_text = out.stat().st_size
        dump = Path(tmp) / "derive.json"
        der = child(["derive", str(out), "--max-work", "0", "--json"], str(dump))
        printed = dump.stat().st_size
        printed_logits = json.loads(dump.read_text())["stages"]["logits"]["values"]
        # the limit at the first precision that certifies the logits to 30 digits (128
        # bits lose them past a few layers: each LayerNorm widens the balls)
        prec = 128
        while True:
            limit, logits = limit_pass(folder, tokens, heads, layers, prec)
            if all(logits[i, j].rad() < abs(logits[i, j].mid()) * 1e-30
                   for i in range(n) for j in range(vocab)):
                break
            prec *= 2
        worst = max(abs(float(printed_logits[i][j]) - float(logits[i, j].mid()))
                    for i in range(n) for j in range(vocab))
    return {"shape": f"{n} × {d} × {heads} × {layers}, vocab {vocab:,}", "import": imp,
            "derive": der, "limit": limit, "file": size_text, "printed": printed,
            "worst": worst, "prec": prec}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append",
                        help=f"tokens,d_model,heads,layers,vocab (default {WIDE})")
    parser.add_argument("--full", action="store_true",
                        help=f"also GPT-2 small's configuration ({FULL})")
    args = parser.parse_args()
    sizes = (args.size or [WIDE]) + ([FULL] if args.full else [])
    rows = []
    for size in sizes:
        r = measure(size)
        rows.append(r)
        total = r["import"][0] + r["derive"][0]
        print(f"{r['shape']}: import {r['import'][0]:.2f} s CPU ({r['file']:,}-byte file), "
              f"derive {r['derive'][0]:.2f} s CPU ({r['printed']:,} bytes printed), "
              f"peak {max(r['import'][2], r['derive'][2]) / 2**20:.0f} MiB; arb_mat limit "
              f"{r['limit']:.2f} s CPU at {r['prec']} bits; ratio {total / r['limit']:.2f}×; "
              f"the printed logits agree with it to {r['worst']:.0e}", file=sys.stderr,
              flush=True)
    print("\n| tokens × d_model × heads × layers | `import` CPU (wall) | `derive` CPU (wall) "
          "| peak memory | arb_mat limit CPU | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        total = r["import"][0] + r["derive"][0]
        print(f"| {r['shape']} | {r['import'][0]:.2f} s ({r['import'][1]:.2f} s) "
              f"| {r['derive'][0]:.2f} s ({r['derive'][1]:.2f} s) "
              f"| {max(r['import'][2], r['derive'][2]) / 2**20:,.0f} MiB "
              f"| {r['limit']:.2f} s | **{total / r['limit']:.2f}×** |")


if __name__ == "__main__":
    main()
