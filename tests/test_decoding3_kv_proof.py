"""The KV-cache proof by structure: a row-local stage (a projection, a norm, an
activation) whose operation is the same in two steps and whose input rows are proved
equal has equal rows, with no formula built (an imported model's projections were the
proof's cost: minutes for a 64-wide GPT-2); attention's rows are still compared by
formula.  It must not prove what is false: a projection whose weights differ at the
next step, or a non-causal layer's rows, are not proved equal."""

from __future__ import annotations

import dataclasses

from symformer import load_example
from symformer.blocks.cost import estimate
from symformer.blocks.generate import generate, run_derivation
from symformer.blocks.kv_cache import OPAQUE, cached_heads, prove_cache


def _run(name: str, steps: int = 2):
    done = generate(load_example(name), steps)
    return run_derivation(done, kv_cache=True), len(done)


def test_row_local_stages_are_proved_without_their_formulas():
    run, steps = _run("gpt2_style")
    proof = prove_cache(run, steps, cached_heads(run))
    assert proof.equal and len(proof.proved) == 4 * steps
    built = {run[name].op.name for name in run._local}  # the formulas the proof built
    assert "projection" not in built and not built & OPAQUE
    assert {"dot_scores", "softmax", "weighted_sum"} & built  # attention: by formula


def test_a_projection_whose_weights_change_is_not_proved_equal():
    run, steps = _run("gpt2_style")
    stage = run["step2.layer1.head1.K"]
    W = stage.op.W.copy()
    W[0, 0] += 1  # step 2 computes the keys with other weights: its cache is stale
    stage.op = dataclasses.replace(stage.op, W=W)
    proof = prove_cache(run, steps, cached_heads(run))
    assert not proof.equal
    assert any(f.startswith("step 2, layer1.head1: not proved: step2.layer1.head1.K_cache[0]")
               for f in proof.failed)


def test_the_estimate_counts_the_proof_per_step_and_entry():
    example = load_example("gpt2_style")
    plain = [estimate("generate", example, steps=k) for k in (1, 2, 3)]
    cached = [estimate("generate", example, steps=k, kv_cache=True) for k in (1, 2, 3)]
    assert cached[0] == plain[0]  # one step: no shared row, nothing proved
    assert 0 < cached[1] - plain[1] < cached[2] - plain[2]
