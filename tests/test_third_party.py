"""Two published worked examples (symformer/examples/illustrated_self_attention.toml,
scaled_identity_attention.toml): their printed numbers, checked by ``symformer check``
and against an independent float64 computation written here from the pages' recipe
(softmax(Q Kᵀ / c) V with Q = X W_Q, K = X W_K, V = X W_V).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from symformer.blocks import derive
from symformer.cli import main
from symformer.example import load_example

EXAMPLES = Path(__file__).resolve().parents[1] / "symformer" / "examples"

# Each claim's precision as the page prints it (read off the page, not off the engine):
# ("decimals", d) or ("significant", n).  TOML floats lose their text, so it is given here.
PRECISION = {
    "illustrated_self_attention": {
        "3. keys": ("decimals", 0),
        "3. queries": ("decimals", 0),
        "3. values": ("decimals", 0),
        "4. attention scores": ("decimals", 0),
        "5. softmax (PyTorch's print)": ("significant", 5),
        "5. softmax, approximated for readability": ("decimals", 1),
        "7. outputs": ("decimals", 1),
    },
    "scaled_identity_attention": {
        "dot-product scores": ("decimals", 0),
        "divided by sqrt(d_k) = 2": ("decimals", 1),
        "attention weights": ("decimals", 3),
        "final attention output": ("decimals", 3),
    },
}
STAGES = {"layer1.head1.Q": "Q", "layer1.head1.K": "K", "layer1.head1.V": "V",
          "layer1.head1.raw_scores": "raw", "layer1.head1.scores": "scores",
          "layer1.head1.weights": "weights", "layer1.head1.output": "output"}


def read(name: str) -> dict:
    return tomllib.loads((EXAMPLES / f"{name}.toml").read_text("utf-8"))


def float64_attention(data: dict) -> dict[str, np.ndarray]:
    """The pages' recipe in float64: one head, no positions, no residual, no norm."""
    x = np.array(data["embeddings"], dtype=np.float64)
    head = data["layer"][0]["head"][0]
    q, k, v = (x @ np.array(head[w], dtype=np.float64) for w in ("W_Q", "W_K", "W_V"))
    raw = q @ k.T
    c = 1.0 if data["scale"] == "none" else math.sqrt(k.shape[1])
    scores = raw / c
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)
    return {"Q": q, "K": k, "V": v, "raw": raw, "scores": scores, "weights": weights,
            "output": weights @ v}


def decimals_of(value: float, precision: tuple[str, int]) -> int:
    kind, n = precision
    if kind == "decimals":
        return n
    return n - 1 - math.floor(math.log10(abs(value)))


def expected_wrong(claimed: np.ndarray, exact: np.ndarray, precision) -> list[list[int]]:
    """Entries whose float64 value is not within half a unit of the printed last digit."""
    wrong = []
    for (i, j), c in np.ndenumerate(claimed):
        half = 0.5 * 10.0 ** -decimals_of(c, precision)
        distance = abs(exact[i, j] - c)
        assert abs(distance - half) > 1e-9 * half, "too close to call in float64"
        if distance > half:
            wrong.append([i, j])
    return wrong


def check_json(name: str, capsys) -> dict:
    code = main(["check", name, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["ok"] else 1)
    return report


@pytest.mark.parametrize("name", sorted(PRECISION))
def test_engine_values_match_float64(name: str) -> None:
    g = derive(load_example(name))
    reference = float64_attention(read(name))
    for stage, key in STAGES.items():
        got = np.array([[float(b.mid()) for b in row] for row in g[stage].balls(128)])
        assert np.allclose(got, reference[key], rtol=1e-13, atol=1e-13), stage


@pytest.mark.parametrize("name", sorted(PRECISION))
def test_check_flags_exactly_the_numbers_float64_refutes(name: str, capsys) -> None:
    data = read(name)
    reference = float64_attention(data)
    report = check_json(name, capsys)
    verdicts = {c["name"]: c for c in report["claims"] if not c["local"]}
    assert set(verdicts) == set(PRECISION[name])
    for claim in data["claim"]:
        if "inputs" in claim:
            continue
        claimed = np.array(claim["values"], dtype=np.float64)
        want = expected_wrong(claimed, reference[STAGES[claim["stage"]]],
                              PRECISION[name][claim["name"]])
        assert verdicts[claim["name"]]["wrong"] == want, claim["name"]


def test_illustrated_self_attention_findings(capsys) -> None:
    report = check_json("illustrated_self_attention", capsys)
    by_name = {c["name"]: c for c in report["claims"]}
    assert (report["right"], report["numbers"]) == (66, 72)
    # PyTorch's 5-significant-digit softmax is right; the "0.0" of 1/(1 + 2e^2) is not
    assert by_name["5. softmax (PyTorch's print)"]["wrong"] == []
    detail = by_name["5. softmax, approximated for readability"]["details"]
    assert [(d["row"], d["col"], d["claimed"], d["correct"]) for d in detail] == [
        (0, 0, "0.0", "0.1")]
    outputs = by_name["7. outputs"]
    assert outputs["wrong"] == [[0, 0], [0, 1], [0, 2], [1, 2], [2, 2]]
    assert any("reader rounding" in text for text in outputs["explanations"])
    local = by_name["outputs_from_rounded_softmax"]
    assert local["local"] and local["wrong"] == []  # the step from the rounded softmax


def test_scaled_identity_attention_findings(capsys) -> None:
    report = check_json("scaled_identity_attention", capsys)
    by_name = {c["name"]: c for c in report["claims"]}
    assert (report["right"], report["numbers"]) == (28, 39)
    # softmax([1, 1, 2]) = [1, 1, e] / (2 + e) = [0.21194, 0.21194, 0.57612]
    weights = by_name["attention weights"]["details"]
    assert [(d["row"], d["col"], d["claimed"], d["correct"]) for d in weights] == [
        (2, 0, "0.211", "0.212"), (2, 1, "0.211", "0.212"), (2, 2, "0.577", "0.576")]
    output = by_name["final attention output"]
    assert output["wrong"] == [[r, c] for r in (0, 1) for c in range(4)]
    assert any("reader rounding" in text for text in output["explanations"])
    # 2e / (2e + 1) and (1 + e) / (2e + 1), by hand
    e = math.e
    assert round(2 * e / (2 * e + 1), 3) == 0.845 and round((1 + e) / (2 * e + 1), 3) == 0.578


def test_check_of_a_plain_claims_file_still_rejects_example_keys(tmp_path, capsys) -> None:
    claims = tmp_path / "claims.toml"
    claims.write_text('tokenz = ["a"]\n[[claim]]\nstage = "input"\nvalues = [[1.0]]\n')
    assert main(["check", str(claims)]) == 2
    assert "unknown key 'tokenz'" in capsys.readouterr().err
