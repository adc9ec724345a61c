"""symformer check: claims from independent mpmath values, perturbed claims, local steps,
conventions and reader rounding detected, bad input."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import mpmath
import numpy as np
import pytest

from symformer import derive, load_example
from symformer.cli import main
from symformer.errors import InputError
from symformer.reference import numpy_ref
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_document, claims_from_toml, validate

mpmath.mp.dps = 50
EMB = {"I": [1, 0, 3, 2], "think": [4, 1, 0, 2], "understand": [0, 3, 1, 4]}
W_Q = [[0.25, 0], [0.25, 0], [0, 0.25], [0, 0.25]]
W_K = [[0.25, 0], [0, 0.25], [0.25, 0], [0, 0.25]]
W_V = [[0, 0.25], [0.25, 0], [0.25, 0], [0, 0.5]]


def mp_head1(causal: bool = False) -> dict[str, list[list[mpmath.mpf]]]:
    """The built-in example's head 1 at 50 digits, written out by hand in mpmath."""
    tokens = ["I", "think", "I", "understand"]
    x = []
    for pos, t in enumerate(tokens):
        pe = [mpmath.sin(pos), mpmath.cos(pos), mpmath.sin(mpmath.mpf(pos) / 100),
              mpmath.cos(mpmath.mpf(pos) / 100)]
        x.append([EMB[t][j] + pe[j] for j in range(4)])

    def mul(A, W):
        return [[mpmath.fsum(A[i][k] * mpmath.mpf(W[k][j]) for k in range(len(W)))
                 for j in range(len(W[0]))] for i in range(len(A))]

    Q, K, V = mul(x, W_Q), mul(x, W_K), mul(x, W_V)
    weights = []
    for i in range(4):
        keys = range(i + 1) if causal else range(4)
        e = [mpmath.exp(mpmath.fsum(Q[i][c] * K[j][c] for c in range(2)) / mpmath.sqrt(2))
             if j in keys else mpmath.mpf(0) for j in range(4)]
        weights.append([v / mpmath.fsum(e) for v in e])
    out = [[mpmath.fsum(weights[i][j] * V[j][c] for j in range(4)) for c in range(2)]
           for i in range(4)]
    return {"input": x, "layer1.head1.Q": Q, "layer1.head1.weights": weights,
            "layer1.head1.output": out}


def rounded(v: mpmath.mpf, decimals: int) -> Decimal:
    return Decimal(mpmath.nstr(v, 45, strip_zeros=False)).quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)


def claim_toml(name: str, stage: str, decimals: int, rows, extra: str = "") -> str:
    body = ", ".join("[" + ", ".join(f'"{v}"' for v in row) + "]" for row in rows)
    return (f'[[claim]]\nname = "{name}"\nstage = "{stage}"\ndecimals = {decimals}\n'
            f"values = [{body}]\n{extra}\n")


@pytest.fixture(scope="module")
def example():
    return load_example()


@pytest.fixture(scope="module")
def g(example):
    return derive(example)


def check(example, g, text: str):
    claims = claims_from_toml(text, "<test>")
    validate(claims, g)
    return Checker(example).check_all(claims)


@pytest.mark.parametrize("causal", [False, True])
def test_independent_values_right_and_perturbed_wrong(example, g, causal) -> None:
    mp = mp_head1(causal)
    extra = "causal = true" if causal else ""
    for stage, decimals in [("layer1.head1.Q", 4), ("layer1.head1.weights", 5),
                            ("layer1.head1.output", 6)]:
        rows = [[rounded(v, decimals) for v in row] for row in mp[stage]]
        (result,) = check(example, g, claim_toml("x", stage, decimals, rows, extra))
        assert result.wrong == [], stage
        unit = Decimal(1).scaleb(-decimals)
        for i in range(len(rows)):
            for j in range(len(rows[0])):
                bumped = [list(r) for r in rows]
                bumped[i][j] += unit if (i + j) % 2 else -unit
                (result,) = check(example, g, claim_toml("x", stage, decimals, bumped, extra))
                assert [(e.row, e.col) for e in result.wrong] == [(i, j)]
                assert result.wrong[0].correct == str(rows[i][j])


def test_rows_subset_and_reader_rounding_explains_the_post_q(example, g) -> None:
    # A reader adds the printed 2-decimal input row of "think": (4.84 + 1.54)/4 = 1.595,
    # an exact tie, so 1.59 is within half a unit; the exact value 1.5954... rounds to 1.60.
    text = (claim_toml("inp", "input", 2, [["4.84", "1.54", "0.01", "3.00"]], "rows = [1]")
            + claim_toml("Q", "layer1.head1.Q", 2, [["1.59", "0.75"]], "rows = [1]"))
    _, q = check(example, g, text)
    assert [(e.row, e.col, e.correct) for e in q.wrong] == [(1, 0, "1.60")]
    assert any("reader rounding" in x for x in q.explanations)


def test_conventions_detected_on_arrays_of_the_other_convention(example, g) -> None:
    for convention, word in [("unbiased", "unbiased"), ("whole_matrix", "whole-matrix")]:
        floats = numpy_ref.forward(example, layer_norm=convention)["layer1.add_norm1"]
        rows = [[f"{v:.3f}" for v in row] for row in floats]
        (result,) = check(example, g, claim_toml("ln", "layer1.add_norm1", 3, rows))
        assert result.wrong, convention
        assert any(word in x for x in result.explanations), result.explanations


def test_local_step_consistent_and_inconsistent(example, g) -> None:
    mha = [[0.754, 1.802, 0.985, 1.571], [0.718, 1.789, 0.994, 1.513],
           [0.746, 1.813, 0.996, 1.563], [0.748, 1.808, 0.992, 1.564]]
    # The FFN step recomputed by hand in NumPy (independent of the engine's ops).
    layer = example.layers[0]
    W_1, b_1, W_2, b_2 = (np.array(m.tolist(), dtype=np.float64)
                          for m in (layer.W_1, layer.b_1, layer.W_2, layer.b_2))
    ffn = np.maximum(0, np.array(mha) @ W_1 + b_1) @ W_2 + b_2
    good = [[f"{v:.3f}" for v in row] for row in ffn]
    bad = [list(r) for r in good]
    bad[2][1] = f"{float(bad[2][1]) + 0.01:.3f}"
    base = claim_toml("mha", "layer1.attention.output", 3, mha, "check = false")
    inputs = 'inputs = { "layer1.add_norm1" = "mha" }'
    (ok,) = check(example, g, base + claim_toml("ffn", "layer1.ffn.output", 3, good, inputs))
    assert ok.local and ok.wrong == []
    (no,) = check(example, g, base + claim_toml("ffn", "layer1.ffn.output", 3, bad, inputs))
    assert [(e.row, e.col) for e in no.wrong] == [(2, 1)]


def test_the_post(tmp_path, capsys) -> None:
    assert main(["check", "symformer/examples/post_claims.toml", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    by_name = {c["name"]: c for c in data["claims"]}
    assert by_name["Q"]["wrong"] == [[1, 0]]
    assert by_name["pe"]["wrong"] == [] and by_name["ffn_output"]["wrong"] == []
    assert data["numbers"] > data["right"]


def test_document(example, g) -> None:
    doc = ("x\nprint(np.round(Q, 2))\n# [[0.5  1.5 ]\n#  [1.59 0.75]\n#  [0.37 1.5 ]\n"
           "#  [0.54 1.51]]\nprint(np.round(Q, 2))\n# [[1. 2.]\n#  [1. 2.]\n#  [1. 2.]\n"
           "#  [1. 2.]]\n")
    claims = claims_from_document(doc, "doc.md", ["Q=layer1.head1.Q", "Q=-"])
    assert len(claims) == 1 and claims[0].values[1] == ["1.59", "0.75"]
    with pytest.raises(InputError, match="no recognisable numbers"):
        claims_from_document("nothing here", "doc.md", [])


@pytest.mark.parametrize("text, message", [
    (claim_toml("a", "layer1.head1.Q", 2, [["1", "2", "3"]]), "values are 1x3"),
    (claim_toml("a", "layer1.head1.Qx", 2, [["1", "2"]]), "did you mean"),
    (claim_toml("a", "layer1.head1.Q", 99, [["1", "2"]]), "decimals"),
    (claim_toml("a", "layer1.ffn.output", 1, [["1"] * 4] * 4,
                'inputs = { "layer1.add_norm1" = "b" }')
     + claim_toml("b", "layer1.add_norm1", 1, [["1"] * 4] * 4,
                  'inputs = { "layer1.ffn.output" = "a" }'), "does not feed|cycle"),
    (claim_toml("a", "layer1.ffn.output", 1, [["1"] * 4] * 4,
                'inputs = { "layer1.add_norm1" = "a" }'), "cycle"),
])
def test_bad_input_exit_2(tmp_path: Path, capsys, text: str, message: str) -> None:
    path = tmp_path / "claims.toml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    import re

    assert re.search(message, err), err
