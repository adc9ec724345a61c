"""An imported GPT-2 at the size of a real tiny model, against a hand-written arb_mat pass.

    python benchmarks/bench_frameworks.py
    python benchmarks/bench_frameworks.py --size 16,64,4,2,256   # tokens,d,heads,layers,vocab

A random GPT-2 directory (config.json + model.safetensors, float32 weights, written
with NumPy: no torch needed) is imported exactly (``symformer.from_pretrained``), then
derived with every stage rounded to 30 certified digits.  The certified limit is a
hand-written python-flint ``arb_mat`` forward pass of the same model (pre-LayerNorm,
GELU-tanh, causal softmax, final LayerNorm, tied logits; 128 bits, output only: no
rounding, no stage names, no proofs).  Prints CPU (wall) seconds, measured in one run:
the machine is shared, read the ratios.
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

DIGITS = 30


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
    """A hand-written ``arb_mat`` forward pass of an imported GPT-2 (the logits)."""
    n = len(example.tokens)
    E, P = _mat(example.embeddings), _mat(example.positional_embeddings)
    ids = example.token_ids
    eps_q = fmpq(int(example.layers[0].eps.p), int(example.layers[0].eps.q))
    layers = [([(_mat(h.W_Q), _mat(h.b_Q), _mat(h.W_K), _mat(h.b_K), _mat(h.W_V),
                 _mat(h.b_V), h.d_k) for h in L.heads],
               *(_mat(getattr(L, k)) for k in ("W_O", "b_O", "W_1", "b_1", "W_2", "b_2",
                                               "gamma_1", "beta_1", "gamma_2", "beta_2")))
              for L in example.layers]
    gf, bf = _mat(example.final_norm.gamma_f), _mat(example.final_norm.beta_f)
    const = {}  # eps and sqrt(2/pi), made at the pass's precision (the weights are exact)

    def plus(x: arb_mat, b: arb_mat) -> arb_mat:
        return arb_mat([[x[i, j] + b[0, j] for j in range(x.ncols())] for i in range(x.nrows())])

    def norm(x: arb_mat, g: arb_mat, b: arb_mat) -> arb_mat:
        eps = const["eps"]
        rows = []
        for i in range(x.nrows()):
            row = [x[i, j] for j in range(x.ncols())]
            mu = sum(row, arb(0)) / len(row)
            root = (sum(((v - mu) ** 2 for v in row), arb(0)) / len(row) + eps).sqrt()
            rows.append([(v - mu) / root * g[0, j] + b[0, j] for j, v in enumerate(row)])
        return arb_mat(rows)

    def run() -> arb_mat:
        ctx.prec = 128
        const["eps"], c = arb(eps_q), (2 / arb.pi()).sqrt()
        x = arb_mat([[E[t, j] + P[p, j] for j in range(E.ncols())] for p, t in enumerate(ids)])
        for heads, W_O, b_O, W_1, b_1, W_2, b_2, g1, be1, g2, be2 in layers:
            h = norm(x, g1, be1)
            outs = []
            for W_Q, b_Q, W_K, b_K, W_V, b_V, d_k in heads:
                q, k, v = plus(h * W_Q, b_Q), plus(h * W_K, b_K), plus(h * W_V, b_V)
                s = q * k.transpose()
                scale = 1 / arb(d_k).sqrt()
                weights = []
                for i in range(n):
                    e = [(s[i, j] * scale).exp() for j in range(i + 1)]
                    total = sum(e, arb(0))
                    weights.append([w / total for w in e] + [arb(0)] * (n - i - 1))
                outs.append(arb_mat(weights) * v)
            concat = arb_mat([[o[i, j] for o in outs for j in range(o.ncols())]
                              for i in range(n)])
            x = x + plus(concat * W_O, b_O)
            pre = plus(norm(x, g2, be2) * W_1, b_1)
            act = arb_mat([[v / 2 * (1 + (c * (v + arb("0.044715") * v ** 3)).tanh())
                            for v in (pre[i, j] for j in range(pre.ncols()))]
                           for i in range(n)])
            x = x + plus(act * W_2, b_2)
        return norm(x, gf, bf) * E.transpose()

    return run


def timed(fn) -> tuple[float, float, object]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="16,64,4,2,256",
                        help="tokens,d_model,heads,layers,vocab (default 16,64,4,2,256)")
    args = parser.parse_args()
    n, d, heads, layers, vocab = (int(v) for v in args.size.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        gpt2_directory(Path(tmp), n, d, heads, layers, vocab)
        tokens = [int(t) for t in np.random.default_rng(1).integers(0, vocab, n)]
        cpu, wall, example = timed(lambda: from_pretrained(tmp, tokens))
    print(f"GPT-2 {n} tokens x d_model {d} x {heads} heads x {layers} layers, vocab {vocab}")
    print(f"import (exact weights): {cpu:.2f} s CPU ({wall:.2f} s wall)")

    def derive_all():
        g = derive(example, max_work=10**10)
        entries = 0
        for stage in g:
            stage.values(significant=DIGITS)
            entries += stage.shape[0] * stage.shape[1]
        return entries

    cpu, wall, entries = timed(derive_all)
    print(f"derive + every stage to {DIGITS} certified digits: {cpu:.2f} s CPU ({wall:.2f} s "
          f"wall), {entries:,} entries")
    run = arb_mat_gpt2(example)
    run()  # warm
    a_cpu, a_wall, logits = timed(run)
    print(f"arb_mat forward pass (logits only, 128 bits): {a_cpu:.3f} s CPU ({a_wall:.3f} s "
          f"wall)")
    print(f"ratio: {cpu / a_cpu:.1f}x CPU ({wall / a_wall:.1f}x wall)")
    g = derive(example, max_work=10**10)
    exact = g["logits"].balls(128)
    worst = max(abs(float((exact[i][j] - logits[i, j]).mid()))
                for i in range(len(exact)) for j in range(len(exact[0])))
    print(f"logits agree with the arb_mat pass to {worst:.1e}")


if __name__ == "__main__":
    main()
