"""``symformer trace``: the token's numbers at every step, checked independently.

The numbers are compared with the derivation's stages, whose row the test picks
itself by position, and with an independent float64 forward pass
(tests/float_reference.py); the worked formulas are re-evaluated in floats.
"""

from __future__ import annotations

import functools
import json
import math
from fractions import Fraction

import pytest
from float_reference import float_forward
from hypothesis import given, settings
from hypothesis import strategies as st
from recompute import check_item

from symformer.cli import main
from symformer.errors import InputError
from symformer.trace import ActivationStep, AttentionStep, NormStep, resolve_token, trace_token
from symformer.worked.to_json import item_dict


def shown(g) -> list[str]:
    """The stages a trace steps through, in the order the math needs them: every stage
    but the checks of a LayerNorm output's mean and variance (a LayerNorm's own mean
    and variance are steps before its standard deviation and output)."""
    read = {name for s in g if s.kind == "layer_norm" for name in s.inputs}
    return [s.name for s in g if s.kind not in ("mean", "variance") or s.name in read]


@functools.cache
def traced(g, position: int, decimals: int):
    """``trace_token(g, position, decimals=decimals)``, traced once per file (read only:
    the random draws below repeat their few combinations)."""
    return trace_token(g, position, decimals=decimals)


@pytest.fixture(scope="module")
def reference(builtin):
    return {False: float_forward(builtin, causal=False), True: float_forward(builtin, causal=True)}


@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_every_stage_once_in_order_with_the_engine_row(block, position):
    trace = traced(block, position, 4)
    expected = shown(block)
    assert [s.stage for s in trace.steps] == expected
    names = [s.stage for s in trace.steps]
    for norm in ("layer1.add_norm1", "layer1.add_norm2"):  # mu, sigma^2, s, then y
        assert [names.index(norm + suffix) for suffix in (".mean", ".variance", ".std", "")
                ] == sorted(names.index(norm + suffix)
                            for suffix in (".mean", ".variance", ".std", ""))
    for step in trace.steps:
        rows = block[step.stage].values(decimals=4)
        # the same numbers; an integer stage's as integers (4, not 4.0000)
        assert [Fraction(v) for v in step.values] == [Fraction(v) for v in rows[position]]
        assert all(v == r or ("." not in v and Fraction(r).denominator == 1)
                   for v, r in zip(step.values, rows[position]))
        if isinstance(step, NormStep):
            assert step.mean.value == block[step.stage + ".mean"].values(decimals=4)[position][0]
            assert step.variance.value == \
                block[step.stage + ".variance"].values(decimals=4)[position][0]


@settings(max_examples=25, deadline=None)
@given(position=st.integers(0, 3), decimals=st.integers(1, 7), causal=st.booleans())
def test_numbers_match_an_independent_float64_pass(block, causal_block, reference, position,
                                                    decimals, causal):
    g = causal_block if causal else block
    trace = traced(g, position, decimals)
    half_ulp = 0.5 * 10.0 ** -decimals + 1e-12
    for step in trace.steps:
        floats = reference[causal][step.stage][position]
        for text, value in zip(step.values, floats):
            if text == "-inf":
                assert value == -math.inf
            else:
                assert abs(float(text) - value) <= half_ulp, (step.stage, text, value)


@pytest.mark.parametrize("decimals", [3, 8])
def test_worked_formulas_recompute_their_values(block, causal_block, decimals):
    """Each substituted formula, recomputed from its printed numbers (tests/recompute.py:
    fractions and mpmath), gives its printed value, for every token, masked or not."""
    checked = 0
    for g in (block, causal_block):
        for position in range(4):
            for step in traced(g, position, decimals).steps:
                extra = [step.mean, step.variance] if isinstance(step, NormStep) else []
                for entry in [*step.entries, *extra]:
                    for item in entry.worked.items if entry.worked else ():
                        check_item(item_dict(item))
                        # the reader's result, or beside it the entry's own value
                        shown = item.result if item.exact is None else item.exact
                        assert Fraction(shown.text) == Fraction(entry.value)
                        checked += 1
    assert checked > 400


def test_relu_clips_exactly_the_negative_hidden_entries(block, reference):
    trace = trace_token(block, 1)
    step = next(s for s in trace.steps if isinstance(s, ActivationStep))
    hidden = reference[False]["layer1.ffn.hidden"][1]
    assert step.clipped == tuple(h <= 0 for h in hidden)
    assert all(v == "0.000" for v, c in zip(step.values, step.clipped) if c)


def test_causal_mask_marks_later_keys(causal_block):
    trace = trace_token(causal_block, 1)
    weights = [s for s in trace.steps if isinstance(s, AttentionStep) and s.heat]
    assert len(weights) == 2
    for step in weights:
        assert step.masked == (False, False, True, True)
        assert step.values[2:] == ["0.000", "0.000"]
        assert step.matrix[1] == tuple(step.values)


@pytest.mark.parametrize("token, position", [("I", 0), ("think", 1), ("understand", 3),
                                             (2, 2), ("2", 2)])
def test_resolve_token(token, position):
    assert resolve_token(("I", "think", "I", "understand"), token) == position


@pytest.mark.parametrize("token, words", [(4, "out of range"), (-1, "out of range"),
                                          ("love", "not in the sentence")])
def test_bad_token_lists_the_sentence(token, words):
    with pytest.raises(InputError) as info:
        resolve_token(("I", "think", "I", "understand"), token)
    message = str(info.value)
    assert words in message
    assert "0 'I', 1 'think', 2 'I', 3 'understand'" in message


def test_cli_bad_token_exit_2(capsys):
    assert main(["trace", "--token", "export"]) == 2
    err = capsys.readouterr().err
    assert "not in the sentence" in err and "3 'understand'" in err
    assert "Traceback" not in err


def test_cli_unwritable_out_exit_2_nothing_written(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["trace", "--token", "1", "--out", str(blocker / "page.html")]) == 2
    assert "cannot" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_cli_text_fits_80_columns(capsys):
    assert main(["trace", "--token", "think", "--decimals", "3"]) == 0
    out = capsys.readouterr().out
    assert "[4/33] Layer 1 > Head 1 > Query" in out
    assert "q^(1)_0 = 4.841·0.25 + 1.540·0.25 ≈ 1.595" in out  # (4 + sin 1 + 1 + cos 1) / 4
    assert max(len(line) for line in out.splitlines()) <= 80


def test_cli_json_and_out_file(tmp_path, block):
    out = tmp_path / "t.json"
    assert main(["trace", "--token", "1", "--format", "json", "--out", str(out),
                 "--decimals", "2"]) == 0
    data = json.loads(out.read_text())
    assert data["token"] == "think" and data["position"] == 1
    by_stage = {s["stage"]: s for s in data["steps"]}
    assert by_stage["layer1.head1.Q"]["values"] == ["1.60", "0.75"]
    assert [e["value"] for e in by_stage["layer1.head2.weights"]["entries"]] == \
        block["layer1.head2.weights"].values(decimals=2)[1]
    norm = by_stage["layer1.add_norm1"]
    assert norm["type"] == "NormStep" and norm["mean"]["worked"]["latex"].startswith(r"\mu")


def test_markdown_has_every_step(block, capsys):
    assert main(["trace", "--token", "1", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n### ") == len(shown(block))
    assert "layer1." not in out  # no stage name in the published text
    assert "$$\\alpha^{(1)}_{i,j} = " in out and "| $0.243$ |" in out and "| $-0.305$ |" in out


def test_latex_document_compiles(tmp_path, causal_block):
    import shutil
    import subprocess

    from symformer.trace import render

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    tex = tmp_path / "trace.tex"
    tex.write_text(render(trace_token(causal_block, "think"), "latex"), encoding="utf-8")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:]
    assert (tmp_path / "trace.pdf").stat().st_size > 1000
    source = tex.read_text()
    assert r"q^{(1)}_{0} &= 4.841 \cdot 0.25 + 1.540 \cdot 0.25 \approx 1.595" in source


def test_exact_tie_in_the_causal_first_row(causal_block, reference):
    """Token 0 under the causal mask only sees itself, so its first LayerNorm variance is
    the rational 265/256 = 1.03515625 exactly; at 7 decimals that is a tie, rounded half
    to even: 1.0351562 (hypothesis found this case)."""
    assert reference[True]["layer1.add_norm1.variance"][0][0] == 265 / 256
    step = next(s for s in trace_token(causal_block, 0, decimals=7).steps
                if s.stage == "layer1.add_norm1")
    assert step.variance.value == "1.0351562"
