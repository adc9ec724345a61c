"""``symformer derive``: tables, selection, JSON."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
from float_reference import float_forward

from symformer.cli import main


def test_json_document(capsys, builtin):
    assert main(["derive", "--json", "--digits", "25", "--stage", "layer1.head1.*"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["title"] == "I think I understand"
    assert doc["tokens"] == ["I", "think", "I", "understand"]
    assert set(doc["stages"]) == {f"layer1.head1.{s}" for s in
                                  ("Q", "K", "V", "raw_scores", "scores", "weights", "output")}
    weights = doc["stages"]["layer1.head1.weights"]
    assert weights["shape"] == [4, 4] and weights["cols"] == ["I", "think", "I", "understand"]
    reference = float_forward(builtin)["layer1.head1.weights"]
    got = np.array([[float(Fraction(v)) for v in row] for row in weights["values"]])
    assert np.allclose(got, reference, rtol=1e-14, atol=0)
    assert all(len(v.replace("0.", "", 1).lstrip("0")) == 25 for v in weights["values"][0])


def test_causal_json_marks_masked_scores(capsys):
    assert main(["derive", "--causal", "--json", "--stage", "layer1.head1.scores"]) == 0
    values = json.loads(capsys.readouterr().out)["stages"]["layer1.head1.scores"]["values"]
    assert values[0][1:] == ["-inf", "-inf", "-inf"] and values[3][3] != "-inf"


def test_list_names_every_stage_with_shape(capsys):
    assert main(["derive", "--list"]) == 0
    out = capsys.readouterr().out
    assert "layer1.ffn.hidden" in out and "4x6" in out
    assert "layer1.add_norm2.variance" in out and "4x1" in out


def test_table_text(capsys):
    assert main(["derive", "--stage", "layer1.head1.Q", "--decimals", "2"]) == 0
    out = capsys.readouterr().out
    think = next(line for line in out.splitlines() if line.startswith("1 think"))
    assert think.split()[-2:] == ["1.60", "0.75"]


def test_unknown_stage_suggests_close_names(capsys):
    assert main(["derive", "--stage", "layer1.head1.weight"]) == 2
    assert "did you mean layer1.head1.weights" in capsys.readouterr().err


def test_reader_rounding_recomputes_from_printed_tables(capsys, builtin):
    """Q from the input table as printed at 2 decimals, in exact decimal arithmetic."""
    from decimal import ROUND_HALF_EVEN, Decimal

    printed = [[Decimal(repr(float(v))).quantize(Decimal("0.01"), ROUND_HALF_EVEN) for v in row]
               for row in float_forward(builtin)["input"]]
    W_Q = builtin.layers[0].heads[0].W_Q
    w = [[Decimal(int(v.p)) / Decimal(int(v.q)) for v in W_Q.row(k)] for k in range(W_Q.rows)]
    expected = [[str(sum((x * w[k][j] for k, x in enumerate(row)), Decimal(0))
                     .quantize(Decimal("0.01"), ROUND_HALF_EVEN)) for j in range(2)]
                for row in printed]
    assert expected[1] == ["1.60", "0.75"]  # (4.84 + 1.54) / 4 = 1.595 exactly: a tie
    assert main(["derive", "--reader-rounding", "--decimals", "2", "--json",
                 "--stage", "layer1.head1.Q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reader_rounding"] is True
    assert doc["stages"]["layer1.head1.Q"]["values"] == expected


def test_exact_shows_short_closed_forms(capsys):
    assert main(["derive", "--exact", "--stage", "input", "--stage", "layer1.head1.weights",
                 "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    # hand-derived: embedding row of "think" (4, 1, 0, 2) plus PE at position 1
    assert stages["input"]["exact"][1] == ["sin(1) + 4", "cos(1) + 1", "sin(1/100)",
                                           "cos(1/100) + 2"]
    assert stages["input"]["exact"][0] == ["1", "1", "3", "3"]
    assert all(e is None for row in stages["layer1.head1.weights"]["exact"] for e in row)
