"""An imported GPT-2 at the size of a real tiny model, against a hand-written arb_mat pass.

    python benchmarks/bench_frameworks.py                 # the issue's three sizes
    python benchmarks/bench_frameworks.py --size 16,64,4,2,256 --repeat 1

A random GPT-2 directory (config.json + model.safetensors, float32 weights, written
with NumPy: no torch needed) is imported exactly (``symformer.from_pretrained``), then
derived with every stage rounded to 30 certified digits.  The certified limit is a
hand-written python-flint ``arb_mat`` forward pass of the same model (pre-LayerNorm,
GELU-tanh, causal softmax, final LayerNorm, tied logits; 128 bits, output only: no
rounding, no stage names, no proofs): every product one ``arb_mat`` product, Python
loops only for LayerNorm, softmax and GELU.  Each side runs ``--repeat`` times and
the minimum process CPU time is kept (the machine is shared: wall time is noisy); the
script prints a table of the cases' ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from flint import arb, arb_mat, ctx, fmpq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from symformer import derive, from_pretrained  # noqa: E402
from symformer.blocks.slices import Slice, truncated, view  # noqa: E402

DIGITS = 30
#: The slice measured beside the whole derivation (``derive --positions 0:4 --heads 1
#: --dims 0:8``): the first four tokens (the model is causal: only they are derived),
#: head 1's stages, eight columns.
SLICE = Slice(positions=tuple(range(4)), heads=(1,), dims=tuple(range(8)))
#: The issue's sizes: tokens,d_model,heads,layers,vocab.
SIZES = ("16,64,4,2,256", "64,64,8,4,256", "32,128,8,2,256")


def gpt2_directory(folder: Path, n_pos: int, d: int, heads: int, layers: int,
                   vocab: int, seed: int = 0) -> None:
    """A random GPT-2 directory (float32 weights, GPT-2's init scale 0.02)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.02, base: float = 0.0) -> np.ndarray:
        return (base + scale * rng.standard_normal(shape)).astype(np.float32)

    t = {"wte.weight": w(vocab, d), "wpe.weight": w(n_pos, d),
         "ln_f.weight": w(d, base=1, scale=0.1), "ln_f.bias": w(d)}
    for i in range(layers):
        p = f"h.{i}."
        t |= {p + "ln_1.weight": w(d, base=1, scale=0.1), p + "ln_1.bias": w(d),
              p + "ln_2.weight": w(d, base=1, scale=0.1), p + "ln_2.bias": w(d),
              p + "attn.c_attn.weight": w(d, 3 * d), p + "attn.c_attn.bias": w(3 * d),
              p + "attn.c_proj.weight": w(d, d), p + "attn.c_proj.bias": w(d),
              p + "mlp.c_fc.weight": w(d, 4 * d), p + "mlp.c_fc.bias": w(4 * d),
              p + "mlp.c_proj.weight": w(4 * d, d), p + "mlp.c_proj.bias": w(d)}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": d,
        "n_head": heads, "n_layer": layers, "vocab_size": vocab, "n_positions": n_pos,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}))


def _mat(m) -> arb_mat:
    return arb_mat([[arb(fmpq(int(v.p), int(v.q))) for v in m.row(i)] for i in range(m.rows)])


def arb_mat_gpt2(example):
    """A hand-written ``arb_mat`` forward pass of an imported GPT-2 (the logits).

    Straightforward and fair: every product is one ``arb_mat`` product (a bias is a
    broadcast matrix made once, the heads' concatenation times W_O is the sum of each
    head times its rows of W_O), and only what has no matrix form loops over entries
    in Python: LayerNorm, the softmax and GELU, on each matrix's ``tolist()``.
    """
    n = len(example.tokens)
    E, P = _mat(example.embeddings), _mat(example.positional_embeddings)
    ids = example.token_ids
    eps_q = fmpq(int(example.layers[0].eps.p), int(example.layers[0].eps.q))

    def bias(b) -> arb_mat:  # the bias row repeated on every token's row
        row = _mat(b).tolist()[0]
        return arb_mat([row] * n)

    def rows(m, start: int, stop: int) -> arb_mat:
        return arb_mat(_mat(m).tolist()[start:stop])

    layers = []
    for L in example.layers:
        heads, start = [], 0
        for h in L.heads:
            heads.append((_mat(h.W_Q), bias(h.b_Q), _mat(h.W_K), bias(h.b_K), _mat(h.W_V),
                          bias(h.b_V), h.d_k, rows(L.W_O, start, start + h.d_v)))
            start += h.d_v
        layers.append((heads, bias(L.b_O), _mat(L.W_1), bias(L.b_1), _mat(L.W_2),
                       bias(L.b_2), *(_mat(getattr(L, k)).tolist()[0] for k in (
                           "gamma_1", "beta_1", "gamma_2", "beta_2"))))
    gf, bf = (_mat(m).tolist()[0] for m in (example.final_norm.gamma_f,
                                             example.final_norm.beta_f))
    ET = E.transpose()
    const = {}  # eps and sqrt(2/pi), made at the pass's precision (the weights are exact)

    def norm(x: arb_mat, g: list, b: list) -> arb_mat:
        eps, out = const["eps"], []
        for row in x.tolist():
            mu = sum(row, arb(0)) / len(row)
            centred = [v - mu for v in row]
            root = (sum((v * v for v in centred), arb(0)) / len(row) + eps).sqrt()
            out.append([v / root * gj + bj for v, gj, bj in zip(centred, g, b)])
        return arb_mat(out)

    def softmax_causal(s: arb_mat) -> arb_mat:
        out = []
        for i, row in enumerate(s.tolist()):
            e = [v.exp() for v in row[:i + 1]]
            total = sum(e, arb(0))
            out.append([w / total for w in e] + [zero] * (n - i - 1))
        return arb_mat(out)

    def gelu(m: arb_mat) -> arb_mat:
        c, a = const["c"], const["a"]
        return arb_mat([[v / 2 * (1 + (c * (v + a * v ** 3)).tanh()) for v in row]
                        for row in m.tolist()])

    zero = arb(0)

    def run() -> arb_mat:
        ctx.prec = 128
        const["eps"], const["c"], const["a"] = arb(eps_q), (2 / arb.pi()).sqrt(), \
            arb("0.044715")
        x = arb_mat([[E[t, j] + P[p, j] for j in range(E.ncols())]
                     for p, t in enumerate(ids)])
        for heads, b_O, W_1, b_1, W_2, b_2, g1, be1, g2, be2 in layers:
            h = norm(x, g1, be1)
            attn = b_O
            for W_Q, b_Q, W_K, b_K, W_V, b_V, d_k, W_O in heads:
                q, k, v = h * W_Q + b_Q, h * W_K + b_K, h * W_V + b_V
                weights = softmax_causal((q * k.transpose()) * (1 / arb(d_k).sqrt()))
                attn = attn + (weights * v) * W_O
            x = x + attn
            x = x + gelu(norm(x, g2, be2) * W_1 + b_1) * W_2 + b_2
        return norm(x, gf, bf) * ET

    return run


def timed(fn) -> tuple[float, float, object]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def measure(size: str, repeat: int) -> dict:
    """One case: import, then the min CPU (and wall) of ``repeat`` runs of each side."""
    n, d, heads, layers, vocab = (int(v) for v in size.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        gpt2_directory(Path(tmp), n, d, heads, layers, vocab)
        tokens = [int(t) for t in np.random.default_rng(1).integers(0, vocab, n)]
        imp_cpu, imp_wall, example = timed(lambda: from_pretrained(tmp, tokens, max_work=0))

    def derive_all():
        g = derive(example, max_work=10**10)
        entries = 0
        for stage in g:
            stage.values(significant=DIGITS)
            entries += stage.shape[0] * stage.shape[1]
        return entries

    def derive_slice():
        cut = truncated(example, SLICE, causal=True)
        g = derive(cut, max_work=10**10)
        for shown in view(list(g), SLICE, len(example.tokens)):
            shown.values(significant=DIGITS)

    sliced = min(timed(derive_slice)[0] for _ in range(repeat))
    runs = [timed(derive_all) for _ in range(repeat)]
    cpu, wall, entries = min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]
    run = arb_mat_gpt2(example)
    run()  # warm
    passes = [timed(run) for _ in range(repeat)]
    a_cpu, a_wall, logits = min(r[0] for r in passes), min(r[1] for r in passes), \
        passes[0][2]
    exact = derive(example, max_work=10**10)["logits"].balls(128)
    worst = max(abs(float((exact[i][j] - logits[i, j]).mid()))
                for i in range(len(exact)) for j in range(len(exact[0])))
    return {"shape": f"{n} × {d} × {heads} × {layers}, vocab {vocab}", "import": imp_cpu,
            "entries": entries, "cpu": cpu, "wall": wall, "a_cpu": a_cpu, "a_wall": a_wall,
            "worst": worst, "slice": sliced}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append",
                        help="tokens,d_model,heads,layers,vocab (repeatable; default: "
                             + " and ".join(SIZES) + ")")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each side per case, the minimum kept (default 3)")
    args = parser.parse_args()
    rows = []
    for size in args.size or SIZES:
        r = measure(size, args.repeat)
        rows.append(r)
        print(f"{r['shape']}: import {r['import']:.2f} s CPU; derive + every stage "
              f"({r['entries']:,} entries) {r['cpu']:.2f} s CPU ({r['wall']:.2f} s wall); "
              f"arb_mat {r['a_cpu']:.3f} s CPU; logits agree to {r['worst']:.0e}; "
              f"the slice {SLICE.describe()} {r['slice']:.3f} s CPU",
              file=sys.stderr, flush=True)
    print(f"\nGPT-2, derive + every stage to {DIGITS} certified digits vs the arb_mat pass "
          f"(min of {args.repeat} runs, one run of this script)\n")
    print("| tokens × d_model × heads × layers | entries | symformer CPU (wall) "
          "| arb_mat CPU (wall) | ratio CPU (wall) | import CPU "
          f"| slice {SLICE.describe()} CPU |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['shape']} | {r['entries']:,} | {r['cpu']:.2f} s ({r['wall']:.2f} s) "
              f"| {r['a_cpu']:.3f} s ({r['a_wall']:.3f} s) "
              f"| {r['cpu'] / r['a_cpu']:.1f}× ({r['wall'] / r['a_wall']:.1f}×) "
              f"| {r['import']:.2f} s | {r['slice']:.3f} s |")


if __name__ == "__main__":
    main()
