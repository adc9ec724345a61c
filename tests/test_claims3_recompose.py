"""Reader rounding from the parts a worked line prints before its result: α from the
printed e^{s − max s}, the LayerNorm from the printed x − μ and σ² + ε, the mean from
the printed Σ_j x_j, q_1 from the printed terms x_c W_{c,j}.  The reader's numbers are
computed here in decimals from the printed parts (mpmath for the square root), the
exact ones by the mpmath forward pass of tests/test_claims3_builtin.py; each result's
wrong entries are the reference's, and the why cites the printed parts."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal

import mpmath
import pytest
from test_claims3_builtin import Builtin, claim, table, wrong_entries
from test_side_stages import run_cli

mpmath.mp.dps = 40


def by_hand(values) -> list[list[str]]:
    """Decimals rounded half to even to 2 places, as printed."""
    return [[str(v.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)) for v in r]
            for r in values]


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    ref = Builtin()
    h, n1 = ref.heads[0], ref.norm1
    shifted_exp = [[mpmath.exp(s - max(r)) for s in r] for r in h["scores"]]
    e = table(shifted_exp, 2)
    alpha = [[str((Decimal(v) / sum(Decimal(x) for x in r)).quantize(Decimal("0.001")))
              for v in r] for r in e]
    centred, var_eps = table(n1["centred"], 2), table([[v + ref.eps] for v in n1["var"]], 2)
    y = [[mpmath.nstr(mpmath.mpf(c) / mpmath.sqrt(mpmath.mpf(v[0])), 20) for c in r]
         for r, v in zip(centred, var_eps)]
    y = by_hand([[Decimal(v) for v in r] for r in y])
    total = table([[mpmath.fsum(r)] for r in n1["sum"]], 1)
    mean = by_hand([[Decimal(t[0]) / 4] for t in total])
    W = ref.W[0]["W_Q"]
    terms = table([[ref.input[1][c] * W[c][j] for j in range(2)] for c in range(4)], 2)
    q1 = by_hand([[sum(Decimal(r[j]) for r in terms) for j in range(2)]])
    text = (claim("e", "layer1.head1.weights.shifted_exp", e)
            + claim("alpha", "layer1.head1.weights", alpha)
            + claim("x - mu", "layer1.add_norm1.centred", centred)
            + claim("var + eps", "layer1.add_norm1.variance_eps", var_eps)
            + claim("y", "layer1.add_norm1", y)
            + claim("sum", "layer1.add_norm1.mean.total", total)
            + claim("mean", "layer1.add_norm1.mean", mean)
            + claim("terms", "layer1.head1.Q.terms.row1", terms)
            + claim("q_1", "layer1.head1.Q", q1, rows="[1]"))
    path = tmp_path_factory.mktemp("claims3rec") / "parts.toml"
    path.write_text(text)
    code, out = run_cli(["check", str(path), "--json"])
    assert code == 1, out
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    expected = {"alpha": (wrong_entries(h["alpha"], alpha), "e"),
                "y": (wrong_entries(n1["y"], y), "x - mu, var + eps"),
                "mean": (wrong_entries([[m] for m in n1["mean"]], mean), "sum"),
                "q_1": ([[1, j] for _, j in wrong_entries([h["Q"][1]], q1)], "terms")}
    return claims, expected


def test_results_from_printed_parts(checked):
    claims, expected = checked
    for name in ("e", "x - mu", "var + eps", "sum", "terms"):
        assert claims[name]["wrong"] == [], claims[name]
    for name, (wrong, cited) in expected.items():
        assert claims[name]["wrong"] == wrong, (name, claims[name])
        whys = [w for w in claims[name]["explanations"] if w.startswith("reader rounding")]
        assert bool(whys) == bool(wrong), (name, claims[name])
        assert not whys or whys[0].endswith(f"as printed ({cited})"), (name, whys)
    assert all(expected[n][0] for n in ("alpha", "y", "mean")), expected


def test_an_rms_norm_from_its_printed_mean_square(tmp_path):
    """llama_style's first RMSNorm (γ = 1) of the embeddings: ⟨x²⟩ + ε printed to one
    decimal (0.3), then y = x / √0.3 by mpmath: the reader's y is wrong where the exact
    x / √(⟨x²⟩ + 1e-6) rounds otherwise, and the why cites the printed mean square."""
    from test_claims3_examples import example

    data = example("llama_style")
    emb = dict(zip(data["vocab"], data["embeddings"]))
    x = [[mpmath.mpf(str(v)) for v in emb[t]] for t in data["tokens"]]
    ms = [[mpmath.fsum(v * v for v in r) / 4 + mpmath.mpf("1e-6")] for r in x]
    printed = table(ms, 1)
    exact = [[v / mpmath.sqrt(m[0]) for v in r] for r, m in zip(x, ms)]
    y = table([[v / mpmath.sqrt(mpmath.mpf(p[0])) for v in r] for r, p in zip(x, printed)], 2)
    path = tmp_path / "rms.toml"
    path.write_text(claim("ms", "layer1.norm1.mean_square_eps", printed)
                    + claim("y", "layer1.norm1", y))
    code, out = run_cli(["check", str(path), "--example", "llama_style", "--json"])
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    assert claims["ms"]["wrong"] == []
    assert claims["y"]["wrong"] == wrong_entries(exact, y) != [], claims["y"]
    assert any(w.startswith("reader rounding") and w.endswith("as printed (ms)")
               for w in claims["y"]["explanations"]), claims["y"]


def test_a_local_check_from_printed_parts(tmp_path):
    """α's row 0 from the printed e^{s − max s} of row 0 (inputs naming the side stage):
    the reader's e / Σ e in decimals is consistent, one unit off in every entry is not
    (each is more than the inputs' rounding allows, by mpmath's interval: e ± 0.005)."""
    ref = Builtin().heads[0]
    row = [mpmath.exp(s - max(ref["scores"][0])) for s in ref["scores"][0]]
    e = table([row], 2)
    alpha = [[str((Decimal(v) / sum(Decimal(x) for x in e[0])).quantize(Decimal("0.001")))
              for v in e[0]]]
    off = [[str(Decimal(v) + Decimal("0.05")) for v in alpha[0]]]
    h, es = Decimal("0.005"), [Decimal(x) for x in e[0]]
    for j, a in enumerate(off[0]):  # the largest α_j the inputs allow: e_j + h, others − h
        top = (es[j] + h) / (es[j] + h + sum(x - h for k, x in enumerate(es) if k != j))
        assert Decimal(a) - Decimal("0.0005") > top
    inputs = '{ "layer1.head1.weights.shifted_exp" = "e" }'
    path = tmp_path / "local.toml"
    path.write_text(claim("e", "layer1.head1.weights.shifted_exp", e, rows="[0]")
                    + claim("alpha", "layer1.head1.weights", alpha, rows="[0]", inputs=inputs)
                    + claim("off", "layer1.head1.weights", off, rows="[0]", inputs=inputs))
    code, out = run_cli(["check", str(path), "--json"])
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    assert claims["alpha"]["wrong"] == [] and claims["e"]["wrong"] == [], out
    assert claims["off"]["wrong"] == [[0, j] for j in range(4)], claims["off"]
