"""Hugging Face's logits processors against the published definitions, on hypothesis-
generated small logit vectors built to hit the boundaries: logits log(w) for small
integer weights w, so probabilities are exact rationals w / sum(w), tied when two
weights are equal, and thresholds drawn from the exact boundary values (a cumulative
mass exactly at p, a ratio exactly at min_p) as well as off them.

Extends ``tests/test_decoding.py`` (its reference implementation of the definitions
and its disagreement on a tied top-p boundary) to ties and exact boundaries in every
filter, and to ``NoBadWordsLogitsProcessor`` and ``MinLengthLogitsProcessor``.

Every case: symformer's verdict (the kept set, the banned set) equals the definition's,
always.  Hugging Face's equals it, or the difference is one of the two named
disagreements (docs/decoder.md):

* TIE_ORDER -- top-p: tied probabilities straddle the nucleus boundary; the definition
  (a stable sort, most probable first) keeps the earlier token, Hugging Face's
  ascending sort removes from the least probable end and keeps another of the tie;
* FLOAT_BOUNDARY -- top-p or min-p: a mass exactly at p (a ratio exactly at min_p) is
  decided by the definition exactly (m = p: dropped; ratio = min_p: kept) and by Hugging
  Face's float comparison (``cumsum <= 1 - top_p``, ``p < min_p * p_max``) by rounding,
  either way.

Off those cases the two must agree, and the test fails on any other difference."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decoding import VOCAB, _kept

from symformer.blocks.decoding import decide_logits
from symformer.example.decoding import Decoding

TIE_ORDER, FLOAT_BOUNDARY = "tie order at the top-p boundary", "float rounding at an exact boundary"


def _probabilities(weights):
    total = sum(weights)
    return [Fraction(w, total) for w in weights]


def definition(weights, rule: Decoding) -> list[int]:
    """The kept tokens by the published definitions, in exact rationals (the logits are
    log w: the probabilities are w / sum(w); test_decoding's mpmath reference cannot
    decide a mass exactly at p): top-k keeps every weight >= the k-th largest; top-p
    the most probable tokens (a stable sort: ties in vocabulary order) while the mass
    before each is < p; min-p every p_j >= min_p * p_max."""
    p, V = _probabilities(weights), len(weights)
    if rule.top_k is not None:
        kth = sorted(weights, reverse=True)[rule.top_k - 1]
        return [j for j in range(V) if weights[j] >= kth]
    if rule.top_p is not None:
        top_p, kept, mass = Fraction(int(rule.top_p.p), int(rule.top_p.q)), [], Fraction(0)
        for j in sorted(range(V), key=lambda j: -p[j]):
            if mass < top_p:
                kept.append(j)
            mass += p[j]
        return sorted(kept)
    min_p = Fraction(int(rule.min_p.p), int(rule.min_p.q))
    return [j for j in range(V) if p[j] >= min_p * max(p)]


def _top_p_boundaries(weights):
    """Every mass of the most probable tokens (the exact p where a token enters)."""
    p = sorted(_probabilities(weights), reverse=True)
    return sorted({sum(p[:k], Fraction(0)) for k in range(1, len(p))} - {0})


@st.composite
def cases(draw):
    weights = draw(st.lists(st.integers(1, 4), min_size=3, max_size=5))
    kind = draw(st.sampled_from(["top_k", "top_p", "min_p"]))
    if kind == "top_k":
        return weights, Decoding(top_k=draw(st.integers(1, len(weights))))
    if kind == "top_p":
        at = _top_p_boundaries(weights)
        p = draw(st.sampled_from(at) | st.sampled_from([Fraction(1, 3), Fraction(1, 2),
                                                        Fraction(9, 10)]))
        return weights, Decoding(top_p=sympy.Rational(p.numerator, p.denominator))
    ratios = sorted({Fraction(w, max(weights)) for w in weights})
    m = draw(st.sampled_from(ratios) | st.sampled_from([Fraction(1, 10), Fraction(1, 2)]))
    return weights, Decoding(min_p=sympy.Rational(m.numerator, m.denominator))


def _hf_kept(weights, rule: Decoding) -> list[int]:
    torch = pytest.importorskip("torch")
    hf = pytest.importorskip("transformers.generation.logits_process")
    if rule.top_k is not None:
        warper = hf.TopKLogitsWarper(top_k=rule.top_k)
    elif rule.top_p is not None:
        warper = hf.TopPLogitsWarper(top_p=float(rule.top_p))
    else:
        warper = hf.MinPLogitsWarper(min_p=float(rule.min_p))
    scores = torch.tensor([[math.log(w) for w in weights]], dtype=torch.float64)
    out = warper(torch.tensor([[0]]), scores)
    return [j for j in range(len(weights)) if out[0, j] != float("-inf")]


def _named(weights, rule: Decoding, defined: list[int], hf: list[int]) -> str | None:
    """Which named disagreement explains Hugging Face's set (None: none does)."""
    p = _probabilities(weights)
    differ = set(defined) ^ set(hf)
    if rule.top_p is not None:
        top_p = Fraction(int(rule.top_p.p), int(rule.top_p.q))
        if len(defined) == len(hf) and len({p[j] for j in differ}) == 1:
            return TIE_ORDER  # as many kept; the swapped tokens are equally probable
        ranked = sorted(p, reverse=True)
        at = [ranked[k] for k in range(1, len(ranked)) if sum(ranked[:k]) == top_p]
        if at and abs(len(defined) - len(hf)) == 1 and all(p[j] == at[0] for j in differ):
            return FLOAT_BOUNDARY  # the mass before the crossing token is exactly p
    if rule.min_p is not None:
        min_p = Fraction(int(rule.min_p.p), int(rule.min_p.q))
        if all(p[j] == min_p * max(p) for j in differ):
            return FLOAT_BOUNDARY
    return None


@settings(max_examples=30, deadline=None)
@given(case=cases())
def test_filters_against_the_definition_and_hugging_face(case):
    weights, rule = case
    logits = [sympy.log(w) for w in weights]
    vocab = VOCAB[:len(weights)]
    g, d = decide_logits(logits, vocab, rule)
    kept = _kept(g, d, len(vocab))
    defined = definition(weights, rule)
    assert kept == defined, (weights, rule)
    hf = _hf_kept(weights, rule)
    if hf != defined:
        assert _named(weights, rule, defined, hf) is not None, (weights, rule, hf)


def test_the_named_disagreements_occur_and_nothing_else_differs():
    """Fixed cases of each: a float boundary Hugging Face decides the other way, and
    the tie at the nucleus boundary; and cases at an exact boundary where it agrees."""
    seen = {}
    for weights in ([1, 1, 2], [1, 2, 2], [2, 1, 1, 4], [3, 1, 1, 1], [1, 2, 3, 4],
                    [4, 3, 1, 2]):
        for p in _top_p_boundaries(weights) + [Fraction(3, 4), Fraction(9, 10)]:
            rule = Decoding(top_p=sympy.Rational(p.numerator, p.denominator))
            defined = definition(weights, rule)
            assert _kept(*decide_logits([sympy.log(w) for w in weights],
                                        VOCAB[:len(weights)], rule), len(weights)) == defined
            hf = _hf_kept(weights, rule)
            name = None if hf == defined else _named(weights, rule, defined, hf)
            assert hf == defined or name is not None, (weights, p, hf, defined)
            seen.setdefault(name, (weights, p))
    assert {TIE_ORDER, FLOAT_BOUNDARY, None} <= set(seen), seen


def test_no_bad_words_and_min_length_agree_with_the_definitions():
    """Banned tokens: -inf (probability 0).  A minimum length: the end token is -inf
    while fewer than N tokens are new -- Hugging Face's MinLengthLogitsProcessor counts
    the prompt too (min_length = prompt + N: the same mask), and
    MinNewTokensLengthLogitsProcessor does not (N itself)."""
    torch = pytest.importorskip("torch")
    hf = pytest.importorskip("transformers.generation.logits_process")
    vocab, end = ("a", "b", "c", "</s>"), 3
    logits = [1, 2, 0, 3]
    scores = torch.tensor([logits], dtype=torch.float64)
    g, _ = decide_logits(logits, vocab, Decoding(banned=("b",)))
    out = hf.NoBadWordsLogitsProcessor(bad_words_ids=[[1]])(torch.tensor([[0]]), scores)
    ours = [v == "-inf" for v in g["allowed"].values(decimals=3)[0]]
    assert ours == [bool(x == float("-inf")) for x in out[0]] == [False, True, False, False]
    prompt, new = 2, 2
    for step in (1, 2, 3, 4):
        ids = torch.zeros((1, prompt + step - 1), dtype=torch.long)
        g, d = decide_logits(logits, vocab, Decoding(min_new_tokens=new), step=step)
        masked = "allowed" in g and g["allowed"].values(decimals=3)[0][end] == "-inf"
        by_length = hf.MinLengthLogitsProcessor(prompt + new, end)(ids, scores.clone())
        by_new = hf.MinNewTokensLengthLogitsProcessor(prompt, new, end)(ids, scores.clone())
        assert masked == (step - 1 < new)  # the definition: the first N new tokens
        assert masked == bool(by_length[0, end] == float("-inf")) \
            == bool(by_new[0, end] == float("-inf"))
        assert d.chosen == ((1,) if masked else (3,))


@settings(max_examples=15, deadline=None)
@given(logits=st.lists(st.fractions(-3, 3, max_denominator=4), min_size=3, max_size=5),
       T=st.sampled_from(["1/2", "7/10", "2"]), theta=st.sampled_from(["6/5", "2"]))
def test_temperature_and_repetition_penalty_values_match_hugging_face(logits, T, theta):
    """The values, not a verdict: l / T, and a seen token's l / theta (l >= 0) or
    l * theta (l < 0), exact and correctly rounded, against Hugging Face in float64
    (its input_ids: the seen tokens a and c)."""
    torch = pytest.importorskip("torch")
    hf = pytest.importorskip("transformers.generation.logits_process")
    vocab = VOCAB[:len(logits)]
    scores = torch.tensor([[float(x) for x in logits]], dtype=torch.float64)
    seen = torch.tensor([[0, 2]])
    rule = Decoding(temperature=sympy.Rational(T), repetition_penalty=sympy.Rational(theta))
    g, _ = decide_logits(logits, vocab, rule, history=("a", "c"))
    penalized = hf.RepetitionPenaltyLogitsProcessor(penalty=float(Fraction(theta)))(
        seen, scores.clone())
    warped = hf.TemperatureLogitsWarper(temperature=float(Fraction(T)))(seen, penalized)
    for stage, out in (("penalized", penalized), ("logits_T", warped)):
        ours = [float(v) for v in g[stage].values(decimals=15)[0]]
        assert ours == pytest.approx(out[0].tolist(), rel=1e-12, abs=1e-12), stage
