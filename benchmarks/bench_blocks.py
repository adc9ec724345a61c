"""Issue 10's benchmark: a Llama-style model scaled up, to 30 certified digits.

``llama_style`` (RMSNorm, RoPE, SwiGLU, grouped-query attention, LM head) scaled to
8 tokens x d_model 8 x 4 query / 2 key-value heads (d_k 2) x 2 layers, derived and
every stage evaluated to 30 significant certified digits.  Prints the time per stage
entry next to the built-in example's, and the ratio to a float64 NumPy pass of the
same model (the reference runner).  Run: ``python benchmarks/bench_blocks.py``.
"""

from __future__ import annotations

import random
import time

from symformer.blocks import derive
from symformer.example.loader import example_from_dict, load_example
from symformer.reference import numpy_ref

DIGITS = 30
N, D, HEADS, KV, D_K, D_FF, LAYERS = 8, 8, 4, 2, 2, 8, 2


def llama_scaled(seed: int = 10) -> dict:
    """The llama_style configuration at benchmark size, with small random halves."""
    rng = random.Random(seed)

    def mat(r: int, c: int) -> list[list[str]]:
        return [[rng.choice(["-1", "-1/2", "0", "1/2", "1"]) for _ in range(c)]
                for _ in range(r)]

    vocab = [f"t{i}" for i in range(10)]
    layers = [{"W_O": mat(HEADS * D_K, D), "W_gate": mat(D, D_FF), "W_1": mat(D, D_FF),
               "W_2": mat(D_FF, D),
               "kv_head": [{"W_K": mat(D, D_K), "W_V": mat(D, D_K)} for _ in range(KV)],
               "head": [{"W_Q": mat(D, D_K)} for _ in range(HEADS)]} for _ in range(LAYERS)]
    return {"title": "llama_style at benchmark size", "vocab": vocab,
            "tokens": [rng.choice(vocab) for _ in range(N)], "embeddings": mat(len(vocab), D),
            "positional_encoding": "rope", "rope_style": "half", "causal": True,
            "norm": "pre", "layer_norm": "rms", "activation": "silu", "final_norm": True,
            "layer": layers, "lm_head": {"W_vocab": mat(D, len(vocab))}}


def per_entry(example, repeat: int = 1, clock=time.perf_counter) -> tuple[float, int]:
    """Seconds per stage entry of derive + every stage to DIGITS certified digits
    (the median of ``repeat`` runs, after an untimed one that warms the caches;
    ``clock=time.process_time`` for CPU time)."""
    def run() -> tuple[float, int]:
        start = clock()
        g = derive(example, max_work=10**9)
        entries = 0
        for stage in g:
            stage.values(significant=DIGITS)
            entries += stage.shape[0] * stage.shape[1]
        return (clock() - start) / entries, entries

    run()
    runs = sorted(run() for _ in range(repeat))
    return runs[len(runs) // 2]


def float_pass(example, repeat: int = 20) -> float:
    """Seconds of one float64 pass of the reference runner (best of ``repeat``)."""
    g = derive(example, max_work=10**9)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        numpy_ref.run(g)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    builtin, _ = per_entry(load_example(), 21)
    example = example_from_dict(llama_scaled(), "<benchmark>")
    llama, entries = per_entry(example, 5)
    total = llama * entries
    print(f"built-in example: {builtin * 1e6:8.1f} us per stage entry")
    print(f"llama_style 8x8, 4q/2kv heads, 2 layers: {llama * 1e6:8.1f} us per stage entry "
          f"({entries} entries, {total:.2f} s; {llama / builtin:.2f}x the built-in's, "
          f"target <= 3x)")
    print(f"ratio to a float64 NumPy pass of the same model: {total / float_pass(example):,.0f}x")
    builtin_cpu, _ = per_entry(load_example(), 21, time.process_time)
    llama_cpu, _ = per_entry(example, 5, time.process_time)
    print(f"CPU time per stage entry: built-in {builtin_cpu * 1e6:.1f} us, llama_style"
          f" {llama_cpu * 1e6:.1f} us; {llama_cpu / builtin_cpu:.2f}x")


if __name__ == "__main__":
    main()
