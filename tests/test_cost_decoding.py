"""The work estimate of ``generate`` counts the KV-cache proof (``--kv-cache``) and a
decoding rule's decisions: the measured CPU over the estimate the command made stays
in the band of ``tests/test_work_estimate.py``, and a run the limit cannot afford is
refused before any work (``benchmarks/bench_estimate.py`` measures both cases on every
shipped decoder and on imported models)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from test_work_estimate import BAND, measured

from symformer.blocks.cost import PER_SECOND, estimate
from symformer.cli import main
from symformer.example import load_example
from symformer.example.decoding import Decoding

RULE = ["--temperature", "0.7", "--top-k", "3", "--top-p", "0.9", "--seed", "1"]


@pytest.mark.parametrize("argv", [["--kv-cache"], RULE], ids=["kv-cache", "rule"])
def test_measured_work_over_estimate_stays_in_the_band(argv):
    work, seconds = measured(["generate", "gpt2_style", "--steps", "4", *argv])
    ratio = seconds * PER_SECOND / work
    assert 1 / BAND <= ratio <= BAND, (f"{argv}: {seconds:.2f} s of CPU for an estimate "
                                       f"of {work:,} ({work / PER_SECOND:.2f} s)")


def test_the_proof_and_the_decisions_are_in_the_estimate():
    example = load_example("gpt2_style")
    plain = estimate("generate", example, steps=4)
    cached = estimate("generate", example, steps=4, kv_cache=True)
    assert cached > plain and estimate("generate", example, steps=1, kv_cache=True) == \
        estimate("generate", example, steps=1)  # one step: no row shared, nothing proved
    sampled = estimate("generate", example, steps=4, decoding=Decoding(top_p=Fraction(9, 10)))
    greedy = estimate("generate", example, steps=4, decoding=Decoding(banned=("the",)))
    assert sampled > plain == greedy  # bans alone: the plain argmax


def test_a_cached_run_over_the_limit_is_refused_before_any_work(capsys):
    example = load_example("gpt2_style")
    limit = estimate("generate", example, steps=4) + 1
    assert main(["generate", "gpt2_style", "--steps", "4", "--max-work", str(limit),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["generate", "gpt2_style", "--steps", "4", "--kv-cache", "--max-work",
                 str(limit), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "estimated at" in err and len(err.strip().splitlines()) == 1
