"""A lecturer's claims on the other shipped examples, each address right and wrong,
every verdict compared with an independent mpmath computation written here from the
example file's numbers: gpt2_style (a projection's terms with its bias apart, the
causal max-subtracted scores and log-weights with -inf, LayerNorm's x − μ and σ² + ε),
llama_style (RoPE's θ, angles, cos and sin, globbed; RMSNorm's Σ x² and ⟨x²⟩ + ε),
decoding_lesson (the logits' terms, log-probabilities and 1 − p), optimizer_lesson
(Adam's β₁m, (1−β₁)g, β₂v, (1−β₂)g², 1 − β^t, m̂ and the update; SGD's lr·g from a
claims file's [train]); and no verdict over nothing compared."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import mpmath
import pytest
from test_claims3_builtin import (
    claim,
    exact,
    layer_norm,
    mat,
    matmul,
    plus,
    rounded,
    table,
    truncates,
    wrong_entries,
)
from test_side_stages import run_cli

import symformer

mpmath.mp.dps = 40
EXAMPLES = Path(symformer.__file__).parent / "examples"
NEG_INF = mpmath.mpf("-inf")


def example(name: str) -> dict:
    return tomllib.loads((EXAMPLES / f"{name}.toml").read_text())


def judge(tmp_path: Path, name: str, text: str, expect: dict, file: str = "c.toml") -> dict:
    """Check ``text`` on the example ``name``; every claim in ``expect`` (name ->
    reference matrix, printed values) is wrong exactly where the reference says.
    Returns the claims' JSON by name."""
    path = tmp_path / file
    path.write_text(text)
    code, out = run_cli(["check", str(path), "--example", name, "--json"])
    assert code in (0, 1), out
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    for label, (M, printed, masked) in expect.items():
        assert claims[label]["wrong"] == wrong_entries(M, printed), (label, claims[label])
        assert label.endswith("(wrong)") == bool(claims[label]["wrong"]), label
        # truncation is named exactly when it makes every number right (never with -inf)
        named = any("truncation" in why for why in claims[label]["explanations"])
        assert named == (bool(claims[label]["wrong"]) and not masked
                         and truncates(M, printed)), (label, claims[label])
    return claims


def right_and_wrong(stage: str, M, decimals: int, off: tuple[int, int], text: str,
                    expect: dict, **keys: str) -> str:
    """``text`` with a right and a wrong claim of ``M`` on ``stage`` (bare numbers for
    a 1x1 stage); -inf entries printed as "-inf"."""
    for name, at in ((stage, None), (stage + " (wrong)", off)):
        finite = [[mpmath.mpf(0) if v == NEG_INF else v for v in r] for r in M]
        printed = table(finite, decimals, at)
        printed = [['"-inf"' if v == NEG_INF else p for v, p in zip(r, s)]
                   for r, s in zip(M, printed)]
        values = printed[0][0] if len(M) == len(M[0]) == 1 else printed
        text += claim(name, stage, values, **keys)
        expect[name] = ([[mpmath.mpf(0) if v == NEG_INF else v for v in r] for r in M],
                        [[p.strip('"').replace("-inf", "0") for p in r] for r in printed],
                        any(v == NEG_INF for r in M for v in r))
    return text


def test_gpt2_style(tmp_path):
    """Layer 1, head 1: x = embedding + learned position, LayerNorm (γ = 1, β = 0,
    ε = 1e-5), q = LN(x) W_Q + b_Q; its terms LN(x)_c W_Q[c, j] (the bias apart); the
    causal scores less their row's maximum and log α, -inf where masked."""
    data = example("gpt2_style")
    table_ = dict(zip(data["vocab"], mat(data["embeddings"])))
    x = plus([table_[t] for t in data["tokens"]], mat(data["positional_embeddings"][:3]))
    n1 = layer_norm(x, exact("1e-5"))
    head = data["layer"][0]["head"][0]
    Q, K = (plus(matmul(n1["y"], mat(head[w])), mat([head[b]] * 3))
            for w, b in (("W_Q", "b_Q"), ("W_K", "b_K")))
    scores = [[mpmath.fsum(a * b for a, b in zip(q, k)) / mpmath.sqrt(2) if j <= i else NEG_INF
               for j, k in enumerate(K)] for i, q in enumerate(Q)]
    shifted = [[s - max(r) for s in r] for r in scores]
    log_alpha = [[z - mpmath.log(mpmath.fsum(mpmath.exp(v) for v in r if v != NEG_INF))
                  for z in r] for r in shifted]
    W_Q = mat(head["W_Q"])
    expect: dict = {}
    text = right_and_wrong("layer1.head1.Q.terms.row2",
                           [[n1["y"][2][c] * W_Q[c][j] for j in range(2)] for c in range(4)],
                           4, (1, 0), "", expect)
    text = right_and_wrong("layer1.head1.weights.shifted", shifted, 4, (2, 0), text, expect)
    text = right_and_wrong("layer1.head1.weights.log", log_alpha, 4, (1, 1), text, expect)
    text = right_and_wrong("layer1.norm1.centred", n1["centred"], 4, (0, 2), text, expect)
    text = right_and_wrong("layer1.norm1.variance_eps", [[v + exact("1e-5")] for v in n1["var"]],
                           6, (1, 0), text, expect)
    claims = judge(tmp_path, "gpt2_style", text, expect)
    # a number where the causal mask gives -inf is wrong, "-inf" is right
    masked = claims["layer1.head1.weights.log"]["details"] if claims[
        "layer1.head1.weights.log"]["wrong"] else []
    assert masked == [] and scores[0][1] == NEG_INF


def test_llama_style_rope_and_rms_norm(tmp_path):
    """RoPE with d_k = 2 has one frequency θ_0 = 10000^0 = 1: the angles p·1 and their
    cos and sin by mpmath; RMSNorm's Σ_j x_j² and ⟨x²⟩ + ε of the embeddings (ε = 1e-6);
    a glob over the side stages lists what derive --list --all lists."""
    data = example("llama_style")
    table_ = dict(zip(data["vocab"], mat(data["embeddings"])))
    x = [table_[t] for t in data["tokens"]]
    expect: dict = {}
    text = right_and_wrong("layer1.head1.Q_rot.theta", [[mpmath.mpf(1)]], 3, (0, 0), "", expect)
    text = right_and_wrong("layer1.head1.Q_rot.angles", [[mpmath.mpf(p)] for p in range(3)],
                           3, (2, 0), text, expect)
    for key, f, off in (("cos", mpmath.cos, (1, 0)), ("sin", mpmath.sin, (2, 0))):
        text = right_and_wrong(f"layer1.kv_head1.K_rot.{key}",
                               [[f(p)] for p in range(3)], 4, off, text, expect)
    squares = [[mpmath.fsum(v * v for v in r)] for r in x]
    text = right_and_wrong("layer1.norm1.mean_square.total", squares, 3, (0, 0), text, expect)
    text = right_and_wrong("layer1.norm1.mean_square_eps",
                           [[s[0] / 4 + exact("1e-6")] for s in squares], 6, (1, 0), text,
                           expect)
    judge(tmp_path, "llama_style", text, expect)
    code, listed = run_cli(["derive", "llama_style", "--list", "--all"])
    under = sorted(line.split()[0] for line in listed.splitlines()
                   if line.startswith("layer1.head1.Q_rot."))
    assert under == ["layer1.head1.Q_rot.angles", "layer1.head1.Q_rot.cos",
                     "layer1.head1.Q_rot.sin", "layer1.head1.Q_rot.theta"], listed
    code, out = run_cli(["derive", "llama_style", "--stage", "layer1.head1.Q_rot.*",
                         "--decimals", "4"])
    assert code == 0 and "unknown stage" not in out, out
    shown = [line.split()[0] for line in out.splitlines() if "  (" in line]
    assert sorted(shown) == under and "-0.4161" in out, out  # cos 2


def test_decoding_lesson_log_probabilities(tmp_path):
    """W_O = 0 and no norm: the last hidden row is the one-hot embedding, so row i of
    the logits is row i of W_vocab (terms x_c W_vocab[c, j]: W_vocab's row of the
    token, zero elsewhere); log p = s − log Σ e^s and 1 − p by mpmath."""
    data = example("decoding_lesson")
    W = mat(data["lm_head"]["W_vocab"])
    rows = [W[data["vocab"].index(t)] for t in data["tokens"]]
    log_p = [[s - mpmath.log(mpmath.fsum(mpmath.exp(v) for v in r)) for s in r] for r in rows]
    one_hot = [1 if v == data["tokens"][3] else 0 for v in data["vocab"]]
    expect: dict = {}
    text = right_and_wrong("logits.terms.row3", [[one_hot[c] * W[c][j] for j in range(6)]
                                                 for c in range(6)], 1, (3, 4), "", expect)
    text = right_and_wrong("probabilities.log", log_p, 4, (3, 0), text, expect)
    text = right_and_wrong("probabilities.complement",
                           [[1 - mpmath.exp(v) for v in r] for r in log_p], 4, (2, 3), text,
                           expect)
    judge(tmp_path, "decoding_lesson", text, expect)


def adam_reference(steps: int = 3) -> list[dict]:
    """Adam on f(θ) = (θ − 3)², θ_0 = 1, lr 1/10, β₁ 0.9, β₂ 0.999, ε 1e-8, by mpmath."""
    b1, b2, eps, lr = (mpmath.mpf(v) for v in ("0.9", "0.999", "1e-8", "0.1"))
    theta, m, v, out = mpmath.mpf(1), mpmath.mpf(0), mpmath.mpf(0), []
    for t in range(1, steps + 1):
        g = 2 * (theta - 3)
        parts = {"m_kept": b1 * m, "m_added": (1 - b1) * g, "v_kept": b2 * v,
                 "v_added": (1 - b2) * g * g, "correction1": 1 - b1 ** t,
                 "correction2": 1 - b2 ** t}
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        parts["mhat"] = m / parts["correction1"]
        parts["update"] = lr * parts["mhat"] / (mpmath.sqrt(v / parts["correction2"]) + eps)
        theta -= parts["update"]
        out.append(parts)
    return out


def test_adam_parts_and_sgd(tmp_path):
    """Every part of Adam's steps 2 and 3 on optimizer_lesson, right and one unit off;
    a claims file's [train] (SGD, lr 0.1) gives lr·g = 0.1 · 2(θ − 3) at θ_0 = 1 and
    θ_1 = 1.4."""
    ref = adam_reference()
    expect: dict = {}
    text = ""
    for t in (2, 3):
        for part, decimals in (("m_kept", 4), ("m_added", 4), ("v_kept", 6), ("v_added", 6),
                               ("mhat", 4), ("update", 5)):
            text = right_and_wrong(f"step{t}.adam_{part}.theta", [[ref[t - 1][part]]],
                                   decimals, (0, 0), text, expect)
        for k, decimals in (("1", 3), ("2", 6)):
            text = right_and_wrong(f"step{t}.adam_correction{k}",
                                   [[ref[t - 1][f"correction{k}"]]], decimals, (0, 0), text,
                                   expect)
    judge(tmp_path, "optimizer_lesson", text, expect)
    expect = {}
    text = right_and_wrong("step1.sgd_update.theta", [[mpmath.mpf("-0.4")]], 2, (0, 0),
                           '[train]\noptimizer = "sgd"\nlr = 0.1\nsteps = 2\n\n', expect)
    text = right_and_wrong("step2.sgd_update.theta", [[mpmath.mpf("0.2") * (mpmath.mpf("1.4")
                                                                            - 3)]],
                           3, (0, 0), text, expect)
    judge(tmp_path, "optimizer_lesson", text, expect, "sgd.toml")


def test_nothing_compared_is_no_verdict(tmp_path):
    """Claims that are all inputs (check = false) compare no number: one line, exit 2,
    never "0 of 0 numbers correct" with exit 0."""
    path = tmp_path / "inputs.toml"
    path.write_text(claim("q", "layer1.head1.Q", [["0.50", "1.50"]], rows="[0]",
                          check="false"))
    code, out = run_cli(["check", str(path)])
    assert code == 2 and "nothing to check" in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1, out


@pytest.mark.parametrize("value", ["1.383"])
def test_a_bare_number_is_read_from_its_text(value):
    """The bare number keeps its printed digits (3 decimals) as a claim of a 1x1 stage."""
    assert rounded(mpmath.mpf(value), 3) == value


def test_train_prints_a_steps_side_stages():
    """train --stage names a run's side stages (m's kept part at step 2, β₁ m_1 =
    0.9 · (−0.4)) and a glob matching only side stages takes them all (1 − β₁^t at
    every step: 0.1, 0.19, 0.271 by mpmath)."""
    ref = adam_reference()
    code, out = run_cli(["train", "optimizer_lesson", "--stage", "step2.adam_m_kept.theta",
                         "--stage", "step*.adam_correction1", "--decimals", "4"])
    assert code == 0 and "unknown stage" not in out, out
    tables = out.split("\n\n")[1:]
    assert [t.split()[0] for t in tables] == ["step2.adam_m_kept.theta"] + [
        f"step{t}.adam_correction1" for t in (1, 2, 3)], out
    shown = [mpmath.mpf(t.split()[-1]) for t in tables]
    expected = [ref[1]["m_kept"]] + [ref[t]["correction1"] for t in range(3)]
    assert all(abs(a - b) <= mpmath.mpf("0.00005") for a, b in zip(shown, expected)), out


def test_a_mistyped_side_stage_names_the_close_addresses():
    """derive --stage with a name close to a side stage's address lists those addresses
    (one line, exit 2), as check and fill do."""
    code, out = run_cli(["derive", "--stage", "layer1.head1.weights.shifted_expo"])
    assert code == 2 and "did you mean layer1.head1.weights.shifted_exp" in out, out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out


def test_adams_bias_correction_off_by_one_step_is_named(tmp_path):
    """1 − β^(t−1) and m_t / (1 − β₁^(t−1)) (the step counted from 0) by mpmath, claimed
    on steps 2 and 3: wrong, and named as that convention; the right ones get no why."""
    ref = adam_reference()
    b1, b2 = mpmath.mpf("0.9"), mpmath.mpf("0.999")
    m2 = ref[1]["m_kept"] + ref[1]["m_added"]
    cases = {"step2.adam_correction1": (1 - b1, 3), "step3.adam_correction2": (1 - b2 ** 2, 6),
             "step2.adam_mhat.theta": (m2 / (1 - b1), 3)}
    text = "".join(claim(stage, stage, rounded(v, d)) for stage, (v, d) in cases.items())
    text += claim("right", "step2.adam_mhat.theta", rounded(ref[1]["mhat"], 3))
    path = tmp_path / "adam.toml"
    path.write_text(text)
    code, out = run_cli(["check", str(path), "--example", "optimizer_lesson", "--json"])
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    for stage in cases:
        assert claims[stage]["wrong"] == [[0, 0]] and any(
            "β^(t−1)" in why for why in claims[stage]["explanations"]), claims[stage]
    assert claims["right"]["wrong"] == [] and claims["right"]["explanations"] == []
