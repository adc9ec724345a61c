"""Slices (``--positions``, ``--heads``, ``--dims``): the shown entries are the model's.

The values of a slice are compared with independent float64 passes of the whole
example (tests/blocks_reference.py, tests/float_reference.py), so a slice that cut
the sentence (causal, -inf mask) or picked the wrong rows or columns would differ.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from blocks_reference import forward
from float_reference import float_forward

from symformer.blocks.slices import Slice, parse_indices, truncated, view
from symformer.cli import main
from symformer.engine.rounding import start_precision
from symformer.errors import InputError
from symformer.example import load_example


def _values(stage: dict) -> np.ndarray:
    return np.array([[-np.inf if v == "-inf" else float(Fraction(v)) for v in row]
                     for row in stage["values"]])


def test_causal_slice_cuts_the_sentence_and_matches_the_whole_model(capsys):
    """gpt2_style (causal, -inf mask): positions 0:2 of 3 derive two tokens; every shown
    entry equals the float64 pass of the whole sentence at its position and column."""
    assert main(["derive", "gpt2_style", "--json", "--digits", "15", "--positions", "0:2",
                 "--heads", "2", "--dims", "1:3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    example = load_example("gpt2_style")
    assert doc["tokens"] == list(example.tokens) and doc["slice"]["derived_tokens"] == 2
    assert doc["slice"]["positions"] == [0, 1] and doc["slice"]["heads"] == [2]
    reference = forward(example)
    stages = doc["stages"]
    assert "next_token" not in stages  # the cut sentence's next token is not the sentence's
    assert not any(".head1." in name for name in stages)
    assert "layer2.head2.weights" in stages and "logits" in stages
    checked = 0
    for name, stage in stages.items():
        if name not in reference:
            continue
        want = reference[name][[0, 1]]
        if stage["shape"][1] != want.shape[1]:  # sliced columns: dims, or key positions
            cols = [0, 1] if name.endswith(("scores", "weights")) else [1, 2]
            want = want[:, [c for c in cols if c < want.shape[1]]]
        assert _values(stage).shape == want.shape, name
        got, finite = _values(stage), np.isfinite(want)
        assert np.array_equal(np.isfinite(got), finite), name  # masked scores stay -inf
        assert np.allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12), name
        checked += 1
    assert checked > 20


def test_slice_of_an_encoder_reads_the_chosen_rows_and_columns(capsys, builtin):
    """The built-in encoder (not causal: nothing is cut): rows 1 and 3, columns 0 and 2
    of every feature stage, against the float64 pass."""
    assert main(["derive", "--json", "--digits", "15", "--positions", "1,3", "--dims",
                 "0,2", "--stage", "layer1.head1.*", "--stage", "layer1.add_norm2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["slice"]["derived_tokens"] == 4
    reference = float_forward(builtin)
    weights = doc["stages"]["layer1.head1.weights"]
    assert weights["positions"] == [1, 3] and weights["cols"] == ["think", "understand"]
    assert np.allclose(_values(weights), reference["layer1.head1.weights"][[1, 3]][:, [1, 3]],
                       rtol=1e-13)
    out = doc["stages"]["layer1.add_norm2"]
    assert out["columns"] == [0, 2] and out["shape"] == [2, 2]
    assert np.allclose(_values(out), reference["layer1.add_norm2"][[1, 3]][:, [0, 2]],
                       rtol=1e-13)


def test_a_table_of_one_head_evaluates_only_what_it_reads():
    """Rounding layer 1's head 1 evaluates its own stages and those before it: not the
    other head, not layer 2, not the logits."""
    from symformer.blocks import derive

    g = derive(load_example("gpt2_style"))
    g["layer1.head1.weights"].values(decimals=3, rows=[2], cols=[0, 1])
    prec = g.certification.working_precision(start_precision(3, None))
    done = set(g._balls[prec])
    assert "layer1.head1.weights" in done and "layer1.norm1" in done
    assert not done & {"layer1.head2.Q", "layer2.head1.Q", "logits"}


def test_slice_options_refuse_bad_ranges(capsys):
    for option, text in (("--positions", "3:1"), ("--positions", "7"), ("--heads", "0"),
                         ("--dims", "a:b")):
        assert main(["derive", "gpt2_style", option, text]) == 2
        err = capsys.readouterr().err
        assert option in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert parse_indices("0:3,5", "--dims") == (0, 1, 2, 5)
    with pytest.raises(InputError):
        parse_indices("0:200000", "--dims")


def test_a_finite_mask_or_an_encoder_is_not_cut():
    """Row i reads later tokens under a -1e9 mask (exp(-1e9)-small) and without a causal
    mask: the sentence stays whole; the next-token stage is then shown with its row."""
    from dataclasses import replace

    from symformer.blocks import derive

    example = load_example("gpt2_style")  # tokens = ["the", "cat", "sat"]
    two = Slice(positions=(0, 1))
    assert truncated(example, two, causal=True).tokens == ("the", "cat")
    finite = replace(example, mask_value=-10**9)
    assert truncated(finite, two, causal=True) == finite  # nothing cut, nothing changed
    assert truncated(finite, two, causal=True).tokens == ("the", "cat", "sat")
    assert truncated(example, two, causal=False).tokens == ("the", "cat", "sat")
    g = derive(example)
    last = view([g["next_token"]], Slice(positions=(2,)), 3)
    assert [s.rows for s in last] == [(0,)]
    assert view([g["next_token"]], two, 3) == []


def test_trace_of_one_head_derives_the_tokens_up_to_its_own(capsys):
    """trace --heads 2 on the causal gpt2_style: head 1's steps are left out, the
    sentence is cut after the token, and the token's numbers are the whole model's."""
    assert main(["trace", "gpt2_style", "--token", "1", "--heads", "2", "--decimals", "10",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tokens"] == ["the", "cat"] and "tokens 0 to 1 of 3 derived" in doc["title"]
    steps = {step["stage"]: step["values"] for step in doc["steps"] if "values" in step}
    assert not any(".head1." in name for name in steps)
    reference = forward(load_example("gpt2_style"))
    assert reference["layer1.head2.weights"][1, 2] == 0  # the cut token has no weight
    for name in ("layer1.head2.weights", "layer2.head2.output", "layer2.add_norm2",
                 "logits"):
        want = reference[name][1][:len(steps[name])]
        assert np.allclose([float(v) for v in steps[name]], want, atol=1e-10), name


def test_export_of_a_slice_leaves_out_the_other_heads_and_tokens(tmp_path):
    assert main(["export", "gpt2_style", "--out", str(tmp_path), "--format", "json",
                 "--positions", "0:2", "--heads", "1"]) == 0
    worked = json.loads((tmp_path / "worked.json").read_text())["worked"]
    assert worked and not any(".head2." in line["stage"] for line in worked)
    assert all(op.get("row", 0) < 2 for line in worked for op in line["operands"])
    assert main(["export", "gpt2_style", "--out", str(tmp_path), "--positions", "1:3"]) == 2


def test_the_work_estimate_counts_what_the_slice_derives_and_prints(capsys):
    """A limit between the slice's estimate and the whole's: the slice runs, the whole
    derivation is refused before any work."""
    from symformer.blocks.cost import estimate

    example = load_example("gpt2_style")
    chosen = Slice(positions=(0,), dims=(0,))
    cut = truncated(example, chosen, causal=True)
    small = estimate("derive", cut, shown=chosen.share(cut))
    whole = estimate("derive", example)
    assert small < whole
    limit = str((small + whole) // 2)
    assert main(["derive", "gpt2_style", "--max-work", limit, "--positions", "0",
                 "--dims", "0", "--stage", "input"]) == 0
    assert main(["derive", "gpt2_style", "--max-work", limit, "--stage", "input"]) == 2
    assert "over the limit of" in capsys.readouterr().err
