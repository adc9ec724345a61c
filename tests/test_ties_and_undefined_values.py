"""Undefined values are errors naming the stage and row; ties are decided (issue 14).

Expected values are computed here independently: exact fractions with Python's
decimal module (half to even), and mpmath at high precision for the sign of what a
finite mask adds.
"""

from __future__ import annotations

import json
import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest

from symformer import derive, load_example, parse_example
from symformer.cli import main
from symformer.engine import rounding
from symformer.errors import UndecidedWarning

DATA = Path(__file__).parent / "data" / "ties"


def half_even(x: Fraction, places: int) -> str:
    """The correct rounding of an exact fraction, by the decimal module."""
    exact = Decimal(x.numerator) / Decimal(x.denominator)
    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


@pytest.mark.parametrize("name", ["eps0_zero_variance", "tb_decoder_eps0_constant"])
@pytest.mark.parametrize("command", ["derive", "prove", "export"])
def test_eps0_constant_row_is_an_error_naming_stage_and_row(name, command, capsys,
                                                             tmp_path) -> None:
    extra = ["--out", str(tmp_path / "out")] if command == "export" else []
    assert main([command, str(DATA / f"{name}.toml"), *extra]) == 2
    err = capsys.readouterr().err
    assert "add_norm1: row 0" in err and "eps = 0" in err and "0 by 0" in err
    assert "Traceback" not in err and "proved" not in capsys.readouterr().out


def test_tie_mean_is_decided() -> None:
    g = derive(load_example(DATA / "tie_mean_undecided.toml"))
    # both tokens "I" = [1, 1, 1, 1]; mean 25/16 = 1.5625 by the hand derivation
    assert g["layer1.add_norm1.mean"].values(decimals=3) == [[half_even(Fraction(25, 16), 3)]] * 2
    assert g["layer1.add_norm1.mean"].values(decimals=3)[0] == ["1.562"]


def test_tie_variance_after_attention_over_identical_tokens(capsys) -> None:
    g = derive(load_example(DATA / "tie_two_tokens.toml"))
    # row [0, 1, 0, 0]: mean 1/4, variance (3 * 1/16 + 9/16) / 4 = 3/16
    assert g["layer1.add_norm1.variance"].values(decimals=3) == [["0.188"], ["0.188"]]
    assert g["layer1.head1.weights"].values(decimals=6) == [["0.500000"] * 2] * 2
    status = main(["check", str(DATA / "tie_claims.toml"), "--example",
                   str(DATA / "tie_two_tokens.toml")])
    assert status == 0, capsys.readouterr()


def _mask_row0_deviation(path: Path) -> mpmath.mpf:
    """sign(mean(add_norm1.sum row 0) - its exactly masked value), by mpmath.

    With mask M, row 0's weights are w_j = exp(s_j + M [j > 0]) / Z; W_O's rows sum
    to 1, so the row sum of the attention output is sum_j w_j c_j with c_j the row
    sum of V_j; minus the exactly masked c_0 that is sum_{j>0} w_j (c_j - c_0),
    whose sign is that of sum_{j>0} exp(s_j - s_0) (c_j - c_0).
    """
    mpmath.mp.prec = 300
    ex = tomllib.loads(path.read_text())

    def num(v) -> mpmath.mpf:
        q = Fraction(str(v))
        return mpmath.mpf(q.numerator) / q.denominator

    rows = []
    for p, token in enumerate(ex["tokens"]):
        e = [num(v) for v in ex["embeddings"][ex["vocab"].index(token)]]
        d = len(e)
        pe = [mpmath.sin(p / mpmath.mpf(10000) ** (mpmath.mpf(k - k % 2) / d)) if k % 2 == 0
              else mpmath.cos(p / mpmath.mpf(10000) ** (mpmath.mpf(k - k % 2) / d))
              for k in range(d)]
        rows.append([a + b for a, b in zip(e, pe)])

    def times(x, w):
        return [mpmath.fsum(x[k] * num(w[k][j]) for k in range(len(w)))
                for j in range(len(w[0]))]

    total = mpmath.mpf(0)
    for head in ex["layer"][0]["head"]:
        q0 = times(rows[0], head["W_Q"])
        keys = [times(x, head["W_K"]) for x in rows]
        values = [mpmath.fsum(times(x, head["W_V"])) for x in rows]
        s = [mpmath.fsum(a * b for a, b in zip(q0, k)) for k in keys]
        total += mpmath.fsum(mpmath.exp(s[j] - s[0]) * (values[j] - values[0])
                             for j in range(1, len(rows)))
    return total


def test_finite_mask_tie_is_decided_by_the_sign_of_what_the_mask_adds() -> None:
    path = DATA / "mask_1e100_undecided.toml"
    g = derive(load_example(path), causal=True)
    # exactly masked, row 0 attends to itself only: mean 51/16 = 3.1875, a tie at 3 places
    deviation = _mask_row0_deviation(path)
    assert abs(deviation) > mpmath.mpf(10) ** -10
    want = "3.188" if deviation > 0 else "3.187"
    assert g["layer1.add_norm1.mean"].values(decimals=3)[0] == [want]


def test_finite_mask_tie_on_either_side_of_half_even() -> None:
    # Scores all 0; row 0 attends to "a" = [1/4, 0] and, through the finite mask, with
    # weight w = exp(-1e9)/(1 + exp(-1e9)) > 0 to "b", whose value row is [0, s]:
    # add_norm1.sum row 0 = [1/4, s w], mean 1/8 + s w/2.  Exactly masked 1/8 = 0.125
    # is a tie at 2 places (half-even 0.12); the sign of s alone decides it.
    text = """
title = "mask tie"
tokens = ["a", "b"]
vocab = ["a", "b"]
embeddings = [["1/4", 0], [0, 1]]
positional_encoding = "none"
causal = true
mask = "-1e9"
[[layer]]
W_1 = [[0], [0]]
b_1 = [0]
W_2 = [[0, 0]]
b_2 = [0, 0]
[[layer.head]]
W_Q = [[0, 0], [0, 0]]
W_K = [[0, 0], [0, 0]]
W_V = [[0, 0], [0, S]]
"""
    for sign, want in ((1, "0.13"), (-1, "0.12")):
        g = derive(parse_example(text.replace("S", str(sign))), causal=True)
        assert g["layer1.add_norm1.sum"].values(decimals=6)[0][0] == "0.250000"
        assert g["layer1.add_norm1.mean"].values(decimals=2)[0] == [want], sign


def test_export_thirteen_decimals(tmp_path, capsys) -> None:
    assert main(["export", "--decimals", "13", "--out", str(tmp_path / "out")]) == 0
    assert "cannot decide" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["hang_one_entry_1e99", "mask_1e50_json_hang"])
def test_huge_magnitudes_end(name, capsys) -> None:
    assert main(["derive", "--json", str(DATA / f"{name}.toml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc


def test_undecided_entries_are_printed_with_their_enclosure(monkeypatch, capsys,
                                                            tmp_path) -> None:
    # Disable every exact proof and lower the ceiling: the tie 0.15 at one place (not a
    # binary fraction, so no ball is exact) can then only be reported undecided, in
    # the documented form, and the run goes on.
    from symformer.engine.certify import Certification

    monkeypatch.setattr(Certification, "_round_exact", lambda *args, **kw: None)
    monkeypatch.setattr(rounding, "MAX_PRECISION", 512)
    path = tmp_path / "tie.toml"
    path.write_text((DATA / "tie_two_tokens.toml").read_text().replace(
        "[[0, 0.5, 0, 0]", '[[0, "0.15", 0, 0]'))
    assert main(["derive", str(path), "--decimals", "1", "--stage", "embeddings"]) == 0
    out, err = capsys.readouterr()
    assert "0.1..0.2?" in out
    assert "warning: embeddings[0,1]" in err and "0.1..0.2?" in err
    assert main(["derive", str(path), "--json", "--digits", "1", "--stage", "embeddings"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stages"]["embeddings"]["values"][0][1] == "0.1..0.2?"
    for fmt in ("latex", "markdown"):
        out = tmp_path / fmt
        assert main(["export", str(path), "--decimals", "1", "--format", fmt,
                     "--stage", "embeddings", "--out", str(out)]) == 0
        # The notes print an exact short decimal in full (issue 39): the tie 0.15 is
        # printed as itself, never rounded to one end of its enclosure.
        texts = [f.read_text() for f in out.rglob("*") if f.is_file()]
        assert any("0.15" in text for text in texts), fmt
        assert not any("0.1 " in text or "0.2 " in text for text in texts), fmt
    g = derive(load_example(path))
    with pytest.warns(UndecidedWarning, match=r"embeddings\[0,1\]"):
        r = g["embeddings"].rounded(decimals=1)[0][1]
    assert isinstance(r, rounding.Undecided)
    assert r.low.value() <= Fraction(3, 20) <= r.high.value()
    assert (r.low.fixed(), r.high.fixed()) == ("0.1", "0.2")


def test_heat_maps_read_the_undecided_form() -> None:
    from symformer.latex.tables import heat_of

    assert rounding.display_value("0.1..0.2?") == Fraction(1, 10)
    assert rounding.display_value("-0.25") == Fraction(-1, 4)
    assert heat_of("0.4..0.5?") == heat_of("0.4")


def test_an_exact_zero_found_by_hypothesis_is_decided(capsys):
    """tests/data/ties/hypothesis_exact_zero.toml: every stage to 15 significant digits,
    the exact zero printed as 0, every value as the independent float64 pass has it."""
    import warnings

    from float_reference import float_forward

    path = str(DATA / "hypothesis_exact_zero.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no undecided entry
        assert main(["derive", path, "--json", "--digits", "15"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    floats = float_forward(load_example(path), causal=True)
    values = {name: stage["values"] for name, stage in stages.items()}
    assert float(values["layer2.add_norm1.sum"][1][1]) == 0
    for name, rows in values.items():
        if name in floats:
            for got, want in zip(sum(rows, []), floats[name].ravel()):
                if got != "-inf":
                    assert float(got) == pytest.approx(want, rel=1e-9, abs=1e-9), name
