"""Verification of the decoder: crosscheck, prove and check on encoder-decoder examples.

Independent references: ``float_decoder`` (tests/test_decoder_float.py), a float64
decoder written from the textbook formulas, builds the claims; crosscheck compares
symformer's NumPy reference with the certified engine; the no-look-ahead proof is
confirmed by changing a future target token in the float64 decoder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_decoder import EXAMPLE, TEXT, _with_vocab_columns
from test_decoder_float import decoder_examples, float_decoder

import symformer.cli.prove
from symformer import derive, load_example, parse_example
from symformer.cli import main
from symformer.conventions import Convention, derive_variant
from symformer.example.fields import Where
from symformer.example.loader import example_from_dict
from symformer.example.stages import parse_stages
from symformer.reference import numpy_ref
from symformer.verify.crosscheck import crosscheck, next_token_error
from symformer.verify.prove import FALSE, PROVED, VACUOUS, prove_all

#: The packaged example with a -1e9 mask: masked weights are tiny but not 0.
MASK_1E9 = TEXT.replace("causal = false", 'causal = false\nmask = "-1e9"', 1)


@pytest.fixture(scope="module")
def example():
    return load_example(EXAMPLE)


# -- crosscheck -----------------------------------------------------------------------

@pytest.mark.parametrize("convention", [
    Convention(), Convention(mask="-1e9"), Convention(layer_norm="unbiased"),
    Convention(layer_norm="whole_matrix"), Convention(norm="pre"),
])
def test_crosscheck_covers_every_decoder_stage_within_1e12(example, convention) -> None:
    rows = {r.stage: r for r in crosscheck(example, convention)}
    assert all(r.ok for r in rows.values()), [r for r in rows.values() if not r.ok]
    decoder = [s.name for s in derive_variant(example, convention) if s.side == "decoder"]
    assert len(decoder) > 50 and set(decoder) <= set(rows) and "next_token" in rows
    assert rows["probabilities"].rel_error < 1e-12
    assert 0 < max(r.rel_error for r in rows.values()) < 1e-12


def test_conventions_reach_the_decoder(example) -> None:
    floats = numpy_ref.forward(example, norm="pre")
    assert "decoder.layer1.norm3" in floats and "decoder.layer1.add_norm3.sum" not in floats
    # with -1e9 the masked decoder weight is exp(-1e9 + ...) = 0.0 in float64, not a -inf score
    scores = numpy_ref.forward(example, mask="-1e9")["decoder.layer1.self.head1.scores"]
    assert np.isfinite(scores).all() and scores[0, 1] < -1e8


def test_reference_decoder_agrees_with_the_independent_float64_decoder(example) -> None:
    # with every LayerNorm output's mean and variance, which the independent decoder gives
    example = dataclasses.replace(example, stages=parse_stages({"output_moments": True},
                                                               Where("test")))
    ours, theirs = numpy_ref.forward(example), float_decoder(example)
    for name, expected in theirs.items():
        np.testing.assert_allclose(ours[name], expected, rtol=1e-13, atol=1e-15, err_msg=name)
    # next_token: the indicator of the last row's largest logit
    assert ours["next_token"].tolist() == [[float(j == np.argmax(theirs["logits"][-1]))
                                            for j in range(5)]]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decoder_examples())
def test_crosscheck_on_random_decoder_examples(data) -> None:
    rows = crosscheck(example_from_dict(data, "<random>"), Convention())
    assert all(r.ok for r in rows), [r for r in rows if not r.ok]
    assert any(r.stage == "decoder.output" for r in rows)


def test_next_token_is_compared_as_a_choice(example) -> None:
    g = derive(example)
    winner = g.next_token().indices[0]
    right = np.eye(5)[[winner]]
    assert next_token_error(g, "next_token", right).ok
    wrong = next_token_error(g, "next_token", np.eye(5)[[(winner + 1) % 5]])
    assert not wrong.ok and wrong.abs_error == 1 and "exact next token" in wrong.note
    # an exact tie ("je" and "pense" share their W_vocab column): either pick is fine
    v, minus_v = ["-1", "1", "-1", "-1"], ["1", "-1", "1", "1"]
    tie = derive(parse_example(_with_vocab_columns([["0"] * 4, v, v, minus_v, ["0"] * 4])))
    for pick in (1, 2):
        result = next_token_error(tie, "next_token", np.eye(5)[[pick]])
        assert result.ok and "tie" in result.note
    assert not next_token_error(tie, "next_token", np.eye(5)[[0]]).ok


def test_a_stage_the_reference_cannot_compute_is_reported(example, monkeypatch,
                                                           capsys) -> None:
    real = numpy_ref.run_stage

    def broken(stage, inputs, dtype):
        if stage.name == "logits":
            raise ValueError("no logits today")
        return real(stage, inputs, dtype)

    monkeypatch.setattr(numpy_ref, "run_stage", broken)
    rows = {r.stage: r for r in crosscheck(example, Convention())}
    assert rows["decoder.output"].ok
    for name in ("logits", "probabilities", "next_token"):
        assert not rows[name].ok and "no logits today" in rows[name].note
    assert main(["crosscheck", str(EXAMPLE)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "no logits today" in out
    monkeypatch.setattr(numpy_ref, "run_stage", lambda stage, inputs, dtype: (
        np.zeros((1, 1)) if stage.name == "logits" else real(stage, inputs, dtype)))
    rows = {r.stage: r for r in crosscheck(example, Convention())}
    assert not rows["logits"].ok and "gives shape (1, 1), not (2, 5)" in rows["logits"].note


def test_crosscheck_cli_on_the_decoder_example(capsys) -> None:
    assert main(["crosscheck", str(EXAMPLE), "--json", "--tol", "1e-12"]) == 0
    data = json.loads(capsys.readouterr().out)
    stages = {s["stage"]: s for s in data["stages"]}
    assert data["ok"] and "decoder.layer1.cross.head2.weights" in stages
    assert "pense" in stages["next_token"]["note"]


# -- prove ----------------------------------------------------------------------------

def _prove(*argv: str) -> tuple[int, str, dict]:
    """``symformer prove ARGV``: the exit status, stdout and the facts the command's
    prove_all returned, by name."""
    facts = []

    def recording(*args, **kwargs):
        facts.extend(prove_all(*args, **kwargs))
        return facts

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("SYMFORMER_DEBUG", "1")  # as the autouse fixture (function scope)
        patch.setattr(symformer.cli.prove, "prove_all", recording)
        status = main(["prove", *argv])
    return status, out.getvalue(), {f.name: f for f in facts}


@pytest.fixture(scope="module")
def proved(tmp_path_factory) -> dict[str, tuple[int, str, dict]]:
    """``symformer prove`` on the packaged example (text) and on its -1e9-mask variant
    (``--json``), each proved once for the file."""
    path = tmp_path_factory.mktemp("prove") / "mask.toml"
    path.write_text(MASK_1E9, encoding="utf-8")
    return {"packaged": _prove(str(EXAMPLE)), "mask": _prove(str(path), "--json")}


def test_decoder_facts_are_proved(proved) -> None:
    facts = proved["packaged"][2]
    for name in ("decoder.masked_weights_zero", "decoder.no_look_ahead",
                 "probabilities.row_sums", "decoder.layer1.cross.head1.weights.row_sums",
                 "decoder.layer1.cross.head2.weights.row_sums", "masked_weights_zero"):
        assert facts[name].status == PROVED, facts[name]
    assert "cross-attention" in facts["decoder.layer1.cross.head1.weights.row_sums"].statement
    assert "vocabulary" in facts["probabilities.row_sums"].statement


def test_a_finite_mask_makes_the_look_ahead_facts_false(proved) -> None:
    facts = proved["mask"][2]
    assert facts["decoder.masked_weights_zero"].status == FALSE
    no_look = facts["decoder.no_look_ahead"]
    assert no_look.status == FALSE
    assert "self.head1.weights[0,0]" in no_look.detail and "target token 1" in no_look.detail
    assert facts["decoder.layer1.cross.head1.weights.row_sums"].status == PROVED


def test_the_proof_agrees_with_changing_a_future_token(example) -> None:
    # What no_look_ahead proves, seen in the independent float64 decoder.
    other = parse_example(TEXT.replace('tokens = ["<s>", "je"]', 'tokens = ["<s>", "</s>"]'))
    a, b = float_decoder(example), float_decoder(other)
    assert not np.allclose(a["probabilities"][1], b["probabilities"][1])
    for name in a:
        # row 0 of every stage is unchanged; self raw scores pair token 0 with token 1
        first = a[name][:1, :1] if name.endswith("self.head1.raw_scores") or \
            name.endswith("self.head2.raw_scores") else a[name][:1]
        assert np.array_equal(first, b[name][:1, :first.shape[1]]), name
    assert a["decoder.layer1.self.head1.raw_scores"][0, 1] != \
        b["decoder.layer1.self.head1.raw_scores"][0, 1]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decoder_examples())
def test_decoder_facts_on_random_examples(data) -> None:
    facts = {f.name: f for f in prove_all(example_from_dict(data, "<random>"))}
    assert facts["decoder.no_look_ahead"].status == PROVED
    # one target token: nothing is masked
    masked = PROVED if len(data["decoder"]["tokens"]) > 1 else VACUOUS
    assert facts["decoder.masked_weights_zero"].status == masked
    assert facts["probabilities.row_sums"].status == PROVED


def test_prove_cli_exit_status(proved) -> None:
    status, out, _ = proved["packaged"]
    assert status == 0
    assert "never looks ahead" in out
    status, out, _ = proved["mask"]
    assert status == 1
    data = json.loads(out)
    assert {f["name"]: f["status"] for f in data["facts"]}["decoder.no_look_ahead"] == FALSE


# -- check ----------------------------------------------------------------------------

STAGES = ("decoder.layer1.cross.head1.weights", "decoder.layer1.self.head2.weights",
          "decoder.layer1.add_norm3", "logits", "probabilities")


def _claims(values: dict[str, np.ndarray], decimals: int, shift: float = 0.0) -> str:
    """A claims file: each stage rounded, optionally moved one unit away from the value."""
    text = ""
    for name in STAGES:
        v = values[name]
        rounded = np.round(v, decimals)
        moved = rounded + shift * np.where(v >= rounded, -1, 1)  # away from the true value
        rows = ", ".join("[" + ", ".join(f"{x:.{decimals}f}" for x in row) + "]"
                         for row in moved)
        text += f'[[claim]]\nstage = "{name}"\ndecimals = {decimals}\nvalues = [{rows}]\n\n'
    return text


def _check(tmp_path: Path, text: str, capsys) -> tuple[int, dict]:
    path = tmp_path / "claims.toml"
    path.write_text(text, encoding="utf-8")
    status = main(["check", str(path), "--example", str(EXAMPLE), "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_decoder_claims_from_an_independent_float64_pass(example, tmp_path, capsys) -> None:
    values = float_decoder(example)
    status, data = _check(tmp_path, _claims(values, 4), capsys)
    assert status == 0 and data["ok"] and data["numbers"] == 8 + 4 + 8 + 10 + 10
    # one unit in the last decimal, away from the value: every entry wrong, by place
    status, data = _check(tmp_path, _claims(values, 4, shift=1e-4), capsys)
    assert status == 1 and data["right"] == 0
    for claim in data["claims"]:
        n, m = values[claim["stage"]].shape
        assert claim["wrong"] == [[i, j] for i in range(n) for j in range(m)]
    cross = data["claims"][0]["details"]
    # cross-attention: rows are target tokens, columns source tokens
    assert [(d["token"], d["column"]) for d in cross[:4]] == [
        ("<s>", "I"), ("<s>", "think"), ("<s>", "I"), ("<s>", "understand")]
    assert cross[4]["token"] == "je"


def test_a_local_decoder_step(example, tmp_path, capsys) -> None:
    # the FFN output recomputed from the printed add_norm2 (6 decimals)
    values = float_decoder(example)

    def table(name: str, decimals: int, shift: float = 0.0) -> str:
        rows = ", ".join("[" + ", ".join(f"{x + shift:.{decimals}f}" for x in row) + "]"
                         for row in values[name])
        return f"values = [{rows}]\n"

    base = ('[[claim]]\nname = "an2"\nstage = "decoder.layer1.add_norm2"\ndecimals = 6\n'
            'check = false\n' + table("decoder.layer1.add_norm2", 6))
    step = ('\n[[claim]]\nname = "ffn"\nstage = "decoder.layer1.ffn.output"\ndecimals = 3\n'
            'inputs = { "decoder.layer1.add_norm2" = "an2" }\n')
    status, data = _check(tmp_path, base + step + table("decoder.layer1.ffn.output", 3),
                          capsys)
    assert status == 0 and data["claims"][0]["local"]
    status, data = _check(tmp_path, base + step + table("decoder.layer1.ffn.output", 3, 0.01),
                          capsys)
    assert status == 1 and data["claims"][0]["wrong"]


def test_a_decoder_claim_under_another_convention_is_explained(tmp_path, capsys) -> None:
    # add_norm1 printed by someone whose decoder uses the unbiased LayerNorm
    unbiased = parse_example(TEXT.replace("[decoder]\n", '[decoder]\nlayer_norm = "unbiased"\n'))
    values = np.round(float_decoder(unbiased)["decoder.layer1.add_norm1"], 3)
    rows = ", ".join("[" + ", ".join(f"{x:.3f}" for x in row) + "]" for row in values)
    status, data = _check(tmp_path, '[[claim]]\nstage = "decoder.layer1.add_norm1"\n'
                                    f'decimals = 3\nvalues = [{rows}]\n', capsys)
    assert status == 1 and data["claims"][0]["wrong"]
    assert any("unbiased LayerNorm" in e for e in data["claims"][0]["explanations"])
