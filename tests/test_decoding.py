"""Decoding rules decided exactly, against an independent reference written from the
published definitions (mpmath at 60 digits, Fractions), against Hugging Face's logits
processors where the two agree, and the disagreement named where they do not.

Definitions used by the reference (not by symformer's code):
* repetition penalty (Keskar et al. 2019, CTRL; HF): a seen token's logit l becomes
  l / theta when l >= 0, l * theta when l < 0;
* temperature: softmax(l / T);
* top-k (Fan et al. 2018; HF): keep every token whose score is >= the k-th largest;
* top-p (Holtzman et al. 2020): the smallest set of most probable tokens whose mass
  reaches p; the token that crosses p is included;
* min-p (Nguyen et al. 2024; HF): keep p_j >= min_p * max p;
* inverse-CDF sampling: the first token (vocabulary order) whose cumulative
  probability exceeds u, u the t-th random() of random.Random(seed).
"""

from __future__ import annotations

import json
import random
from fractions import Fraction

import mpmath
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.blocks import decoding as decoding_module
from symformer.blocks.decoding import decide_logits
from symformer.cli import main
from symformer.example.decoding import Decoding

mpmath.mp.dps = 60
VOCAB = ("a", "b", "c", "d", "e", "f")


def reference(logits, rule: Decoding, history=(), step: int = 1):
    """(kept columns, chosen column) by the published definitions, in mpmath."""
    z = [mpmath.mpf(Fraction(x).numerator) / Fraction(x).denominator for x in logits]
    V = len(z)
    if rule.repetition_penalty is not None:
        theta = mpmath.mpf(rule.repetition_penalty.p) / rule.repetition_penalty.q
        for j in {VOCAB.index(t) for t in history}:
            z[j] = z[j] / theta if z[j] >= 0 else z[j] * theta
    allowed = [j for j in range(V) if VOCAB[j] not in rule.banned]
    T = mpmath.mpf(rule.temperature.p) / rule.temperature.q if rule.temperature else 1
    def probs(kept):
        total = mpmath.fsum(mpmath.exp(z[j] / T) for j in kept)
        return {j: mpmath.exp(z[j] / T) / total for j in kept}
    kept = list(allowed)
    if rule.top_k is not None:
        kth = sorted((z[j] for j in kept), reverse=True)[min(rule.top_k, len(kept)) - 1]
        kept = [j for j in kept if z[j] >= kth]
    if rule.top_p is not None:
        p = probs(kept)
        order = sorted(kept, key=lambda j: -p[j])
        nucleus, mass = [], mpmath.mpf(0)
        for j in order:  # the smallest prefix whose mass reaches top_p (crossing included)
            if mass >= mpmath.mpf(rule.top_p.p) / rule.top_p.q:
                break
            nucleus.append(j)
            mass += p[j]
        kept = sorted(nucleus)
    if rule.min_p is not None:
        p = probs(kept)
        top = max(p.values())
        kept = [j for j in kept if p[j] >= mpmath.mpf(rule.min_p.p) / rule.min_p.q * top]
    p = probs(kept)
    if rule.seed is None:
        return kept, max(kept, key=lambda j: z[j])
    rng = random.Random(rule.seed)
    for _ in range(step):
        u = rng.random()
    total = mpmath.mpf(0)
    for j in sorted(kept):
        total += p[j]
        if total > u:
            return kept, j
    raise AssertionError("no draw")


def _kept(g, d, V):
    if "kept" not in g:
        return list(range(V))
    return [j for j, v in enumerate(g["kept"].values(decimals=0)[0]) if v == "1"]


rules = st.builds(
    Decoding,
    temperature=st.sampled_from([None, sympy.Rational(1, 2), sympy.Integer(2)]),
    top_k=st.sampled_from([None, 1, 2, 3]),
    top_p=st.sampled_from([None, sympy.Rational(1, 2), sympy.Rational(9, 10)]),
    min_p=st.sampled_from([None, sympy.Rational(1, 10), sympy.Rational(1, 2)]),
    repetition_penalty=st.sampled_from([None, sympy.Rational(6, 5)]),
    banned=st.sampled_from([(), ("b",)]),
    seed=st.sampled_from([None, 0, 7, 12345]),
)


@settings(max_examples=30, deadline=None)
@given(logits=st.lists(st.fractions(-3, 3, max_denominator=4), min_size=3, max_size=5,
                       unique=True),
       rule=rules)
def test_random_rules_match_the_published_definitions(logits, rule):
    vocab = VOCAB[:len(logits)]
    g, d = decide_logits(logits, vocab, rule, history=("a", "c"))
    kept, chosen = reference(logits, rule, history=("a", "c"))
    assert d.chosen == (chosen,)
    if rule.top_k or rule.top_p or rule.min_p:
        assert _kept(g, d, len(vocab)) == kept


@settings(max_examples=20, deadline=None)
@given(logits=st.lists(st.sampled_from([Fraction(0), Fraction(1), Fraction(-1, 2)]),
                       min_size=3, max_size=5),
       rule=rules.filter(lambda r: r.seed is not None))
def test_ties_follow_the_stated_rules(logits, rule):
    """Equal logits (proved ties): top-k keeps every score tied with the k-th, top-p
    breaks a tie at its boundary by vocabulary order, the draw is the inverse CDF."""
    vocab = VOCAB[:len(logits)]
    g, d = decide_logits(logits, vocab, rule)
    kept, chosen = reference(logits, rule)
    assert d.chosen == (chosen,)
    if rule.top_k or rule.top_p or rule.min_p:
        assert _kept(g, d, len(vocab)) == kept


def test_top_p_exactly_at_the_boundary_is_proved_and_the_crossing_token_kept():
    # probabilities 1/2, 1/4, 1/4: with p = 1/2 the first token alone reaches p
    g, d = decide_logits([sympy.log(2), 0, 0], VOCAB[:3], Decoding(top_p=sympy.Rational(1, 2)))
    assert _kept(g, d, 3) == [0]
    assert g["nucleus_mass"].values(decimals=6) == [["0.500000"]]
    assert "m = p exactly (proved)" in "\n".join(d.notes)
    # just above: 'b' crosses and is included; the tied 'c' is not (vocabulary order)
    g, d = decide_logits([sympy.log(2), 0, 0], VOCAB[:3],
                         Decoding(top_p=sympy.Rational(1, 2) + sympy.Rational(1, 10**30)))
    assert _kept(g, d, 3) == [0, 1]
    assert "tie at the boundary: 'b' and 'c'" in "\n".join(d.notes)
    # the margins: 'b' stays unless p drops to 0.5 or below; 'c' enters above 0.75
    assert g["top_p.mass_above"].values(decimals=4) == [["0.0000", "0.5000", "0.7500"]]


def test_top_k_keeps_every_token_tied_with_the_kth():
    g, d = decide_logits([1, 1, 0, 2], VOCAB[:4], Decoding(top_k=2))
    assert _kept(g, d, 4) == [0, 1, 3]
    assert g["top_k.rank"].values(decimals=0) == [["1", "1", "3", "0"]]
    assert "tie at the k-th place" in "\n".join(d.notes)


def test_min_p_exactly_at_the_threshold_is_kept():
    # p = (3, 1, 2)/6: p_c / p_max = 2/3 exactly
    g, d = decide_logits([sympy.log(3), 0, sympy.log(2)], VOCAB[:3],
                         Decoding(min_p=sympy.Rational(2, 3)))
    assert _kept(g, d, 3) == [0, 2]
    assert "p / p_max = min_p exactly (proved): kept" in "\n".join(d.notes)


def test_a_uniform_number_exactly_at_a_cumulative_sum_falls_to_the_next_token(monkeypatch):
    monkeypatch.setattr(decoding_module, "uniform", lambda seed, step: Fraction(1, 2))
    g, d = decide_logits([0, 0], VOCAB[:2], Decoding(seed=1))
    assert d.chosen == (1,)  # C_0 = 1/2 = u: the draw is the first C_j > u
    assert "u = C at 'a' exactly (proved)" in "\n".join(d.notes)


def test_the_uniform_number_is_the_stated_generators_k_over_2_53():
    rng = random.Random(2024)
    for step in (1, 2, 3):
        expected = Fraction(rng.random())
        u = decoding_module.uniform(2024, step)
        assert u == expected and (u * 2 ** 53).denominator == 1


def test_repetition_penalty_and_min_new_tokens_and_forced():
    rule = Decoding(repetition_penalty=sympy.Integer(2), min_new_tokens=1)
    g, d = decide_logits([3, -1, 5], ("a", "b", "</s>"), rule, history=("a", "b"))
    assert g["penalized"].values(decimals=2) == [["1.50", "-2.00", "5.00"]]
    assert d.chosen == (0,)  # </s> is masked at step 1
    g, d = decide_logits([3, -1, 5], ("a", "b", "</s>"), rule, step=2)
    assert d.chosen == (2,)
    g, d = decide_logits([3, -1, 5], ("a", "b", "</s>"), Decoding(forced=((1, "b"),)))
    assert d.chosen == (1,)


# -- Hugging Face's processors ----------------------------------------------------------

def _hf(logits, warper):
    torch = pytest.importorskip("torch")
    scores = torch.tensor([[float(x) for x in logits]], dtype=torch.float64)
    out = warper(torch.tensor([[0, 2]]), scores)
    return [j for j in range(len(logits)) if out[0, j] != float("-inf")], out


@settings(max_examples=10, deadline=None)
@given(logits=st.lists(st.fractions(-3, 3, max_denominator=4), min_size=3, max_size=5,
                       unique=True),
       k=st.integers(1, 4), p=st.sampled_from(["1/3", "1/2", "9/10"]),
       m=st.sampled_from(["1/10", "1/2"]))
def test_hugging_face_warpers_agree_without_ties(logits, k, p, m):
    hf = pytest.importorskip("transformers.generation.logits_process")
    vocab = VOCAB[:len(logits)]
    combined = hf.LogitsProcessorList([  # Hugging Face's order, as generate() builds it
        hf.TemperatureLogitsWarper(0.5), hf.TopKLogitsWarper(top_k=k),
        hf.TopPLogitsWarper(top_p=float(Fraction(p))),
        hf.MinPLogitsWarper(min_p=float(Fraction(m)))])
    for rule, warper in ((Decoding(top_k=k), hf.TopKLogitsWarper(top_k=k)),
                         (Decoding(top_p=sympy.Rational(p)),
                          hf.TopPLogitsWarper(top_p=float(Fraction(p)))),
                         (Decoding(min_p=sympy.Rational(m)),
                          hf.MinPLogitsWarper(min_p=float(Fraction(m)))),
                         (Decoding(temperature=sympy.Rational(1, 2), top_k=k,
                                   top_p=sympy.Rational(p), min_p=sympy.Rational(m)),
                          combined)):
        g, d = decide_logits(logits, vocab, rule)
        kept = _kept(g, d, len(vocab))
        margins = g.stages.get("top_p.mass_above")
        if margins is not None:  # a mass within float rounding of p: floats may differ
            values = [Fraction(v) for v in margins.values(decimals=12)[0]]
            if any(abs(v - Fraction(p)) < Fraction(1, 10**9) for v in values):
                continue
        assert _hf(logits, warper)[0] == kept, (rule, logits)


def test_hugging_face_repetition_penalty_and_temperature_agree():
    hf = pytest.importorskip("transformers.generation.logits_process")
    logits = [3, -1, 5]
    _, out = _hf(logits, hf.RepetitionPenaltyLogitsProcessor(penalty=2.0))
    g, _ = decide_logits(logits, ("a", "b", "c"), Decoding(repetition_penalty=sympy.Integer(2),
                                                           top_k=3), history=("a", "c"))
    assert [float(v) for v in g["penalized"].values(decimals=6)[0]] == out[0].tolist()
    _, out = _hf(logits, hf.TemperatureLogitsWarper(temperature=0.5))
    g, _ = decide_logits(logits, ("a", "b", "c"), Decoding(temperature=sympy.Rational(1, 2)))
    assert [float(v) for v in g["logits_T"].values(decimals=6)[0]] == out[0].tolist()


def test_the_named_disagreement_hugging_face_top_p_breaks_a_tie_the_other_way():
    """Probabilities 1/2, 1/4, 1/4 and p = 3/4: the smallest set holds one of the tied
    1/4s.  By the definition (sorted most probable first, a stable sort) it is the
    earlier, 'b', and symformer says the tie was broken; Hugging Face's ascending sort
    removes from the least probable end and keeps the later, 'c'."""
    hf = pytest.importorskip("transformers.generation.logits_process")
    logits = [float(mpmath.log(2)), 0.0, 0.0]
    hf_kept, _ = _hf(logits, hf.TopPLogitsWarper(top_p=0.75))
    g, d = decide_logits([sympy.log(2), 0, 0], VOCAB[:3], Decoding(top_p=sympy.Rational(3, 4)))
    assert _kept(g, d, 3) == [0, 1] and hf_kept == [0, 2]
    assert "broken by vocabulary order" in "\n".join(d.notes)


# -- generate and check -----------------------------------------------------------------

def test_generate_with_a_rule_prints_the_decisions_and_greedy_is_unchanged(capsys):
    assert main(["generate", "--steps", "2", "--min-new-tokens", "2", "--top-p", "0.9",
                 "--seed", "3", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "</s>" not in document["generated"]
    step = document["steps"][1]["decoding"]
    assert step["stages"]["step2.kept"] == [["1.000", "1.000", "0.000", "1.000", "0.000"]]
    assert step["uniform"].endswith("/9007199254740992")
    assert main(["generate", "--steps", "1"]) == 0
    assert "decisions" not in capsys.readouterr().out


def test_check_judges_claims_on_a_generation_runs_decisions(tmp_path, capsys):
    from symformer.cli.generate import DEFAULT_EXAMPLE
    path = tmp_path / "ex.toml"
    path.write_text(DEFAULT_EXAMPLE.read_text() + """
[decoding]
top_p = 0.9
min_new_tokens = 2
seed = 3

[[claim]]
stage = "step2.kept"
values = [[1, 1, 0, 1, 0]]

[[claim]]
stage = "step2.nucleus_mass"
decimals = 3
values = 0.972        # a bare number claims a 1 x 1 stage
""")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "step2.kept -> step2.kept" in out and "6 of 6 numbers correct" in out
    path.write_text(path.read_text().replace("[[1, 1, 0, 1, 0]]", "[[1, 1, 1, 1, 0]]"))
    assert main(["check", str(path)]) == 1
    assert "5 of 6 numbers correct" in capsys.readouterr().out


def test_a_bad_decoding_table_is_one_line_and_exit_2(tmp_path, capsys):
    from symformer.cli.generate import DEFAULT_EXAMPLE
    path = tmp_path / "ex.toml"
    path.write_text(DEFAULT_EXAMPLE.read_text() + "\n[decoding]\ntop_p = 1.5\n")
    assert main(["generate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "decoding: top_p must be in (0, 1]" in err and "\n" not in err
    assert main(["generate", "--ban", "zzz"]) == 2
    assert "banned: 'zzz' is not in the vocabulary" in capsys.readouterr().err


def test_a_claims_files_decoding_table_is_the_run_its_claims_mean(tmp_path, capsys):
    from symformer.cli.generate import DEFAULT_EXAMPLE
    claims = tmp_path / "claims.toml"
    claims.write_text("""
[decoding]
top_p = 0.9
min_new_tokens = 2
seed = 3

[[claim]]
stage = "step2.kept"
values = [[1, 1, 0, 1, 0]]

[[claim]]
stage = "step2.decoder.layer1.self.head1.K_cache"
decimals = 12
rows = [0]
values = [[0.5, 0.5]]
""")
    assert main(["check", str(claims), "--example", str(DEFAULT_EXAMPLE)]) == 0
    assert "7 of 7 numbers correct" in capsys.readouterr().out
