"""A lecturer's claims about the built-in example, one per address a worked line prints
(docs/verify.md, "Addresses of the terms"), each with a right and a wrong version, and
every verdict compared with an independent mpmath forward pass written here from the
example file's numbers (never the engine's values): the terms of a projection and of a
weighted sum, the max-subtracted softmax (and an author's max-subtracted e^s claimed on
S.exp named as that convention), LayerNorm's x − μ, Σ (x − μ)² and σ² + ε, the
sinusoid's divisors and angles, 1/√d_k as a bare number, log p and 1 − p, the softmax
backward's Σ_j α_j g_j (by central differences of the loss), the loss as a bare
number; reader rounding from printed partial rows (citing only the tables that feed
the stage), claims of some rows or one entry as another claim's inputs, integer
truncation named as a convention, and no verdict over nothing compared."""

from __future__ import annotations

import json
import tomllib
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import mpmath
import pytest
from test_side_stages import run_cli

from symformer.example.loader import builtin_text

mpmath.mp.dps = 40
Matrix = list[list[mpmath.mpf]]


def exact(v: object) -> mpmath.mpf:
    f = Fraction(str(v))
    return mpmath.mpf(f.numerator) / f.denominator


def mat(rows) -> Matrix:
    return [[exact(v) for v in r] for r in rows]


def matmul(A: Matrix, B: Matrix) -> Matrix:
    return [[mpmath.fsum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))]
            for i in range(len(A))]


def plus(A: Matrix, B: Matrix) -> Matrix:
    return [[a + b for a, b in zip(r, s)] for r, s in zip(A, B)]


def layer_norm(x: Matrix, eps: mpmath.mpf) -> dict:
    """Per-row LayerNorm (biased variance, γ = 1, β = 0) and its parts."""
    mu = [mpmath.fsum(r) / len(r) for r in x]
    centred = [[v - m for v in r] for r, m in zip(x, mu)]
    total = [mpmath.fsum(c * c for c in r) for r in centred]
    var = [t / len(r) for t, r in zip(total, x)]
    y = [[c / mpmath.sqrt(s + eps) for c in r] for r, s in zip(centred, var)]
    return {"sum": x, "mean": mu, "centred": centred, "total": total, "var": var, "y": y}


class Builtin:
    """The built-in example's forward pass in mpmath, from its file's numbers."""

    def __init__(self) -> None:
        data = tomllib.loads(builtin_text())
        self.data = data
        table = dict(zip(data["vocab"], mat(data["embeddings"])))
        n, d = len(data["tokens"]), 4
        self.divisors = [mpmath.mpf(10000) ** (mpmath.mpf(2 * i) / d) for i in range(d // 2)]
        self.angles = [[p / q for q in self.divisors] for p in range(n)]
        pe = [[(mpmath.sin if j % 2 == 0 else mpmath.cos)(self.angles[p][j // 2])
               for j in range(d)] for p in range(n)]
        self.input = plus([table[t] for t in data["tokens"]], pe)
        self.eps = exact("1e-6")
        layer = data["layer"][0]
        self.W = [{k: mat(h[k]) for k in ("W_Q", "W_K", "W_V")} for h in layer["head"]]
        self.heads = []
        for W in self.W:
            Q, K, V = (matmul(self.input, W[k]) for k in ("W_Q", "W_K", "W_V"))
            raw = [[mpmath.fsum(a * b for a, b in zip(q, k)) for k in K] for q in Q]
            scores = [[u / mpmath.sqrt(2) for u in r] for r in raw]
            e = [[mpmath.exp(s) for s in r] for r in scores]
            alpha = [[v / mpmath.fsum(r) for v in r] for r in e]
            self.heads.append({"Q": Q, "K": K, "V": V, "raw": raw, "scores": scores,
                               "alpha": alpha})
        self.norm1 = None
        self.loss = self.from_alpha(self.heads[0]["alpha"])

    def from_alpha(self, alpha1: Matrix) -> mpmath.mpf:
        """The mse loss with head 1's weights replaced by ``alpha1`` (the rest as is)."""
        layer, data = self.data["layer"][0], self.data
        outs = [matmul(alpha1, self.heads[0]["V"]), matmul(self.heads[1]["alpha"],
                                                          self.heads[1]["V"])]
        concat = [a + b for a, b in zip(*outs)]
        n1 = layer_norm(plus(self.input, matmul(concat, mat(layer["W_O"]))), self.eps)
        if self.norm1 is None:
            self.norm1 = n1
        hidden = plus(matmul(n1["y"], mat(layer["W_1"])), mat([layer["b_1"]] * 4))
        f = plus(matmul([[max(v, 0) for v in r] for r in hidden], mat(layer["W_2"])),
                 mat([layer["b_2"]] * 4))
        out = layer_norm(plus(n1["y"], f), self.eps)["y"]
        target = mat(data["loss"]["target"])
        return mpmath.fsum((o - t) ** 2 for r, s in zip(out, target)
                           for o, t in zip(r, s)) / 16

    def dot(self) -> Matrix:
        """Σ_j α_j ∂L/∂α_j of head 1's rows, ∂L/∂α by central differences (h = 1e-15)."""
        alpha, h = self.heads[0]["alpha"], mpmath.mpf(10) ** -15
        grad = [[(self.from_alpha(bump(alpha, i, j, h)) - self.from_alpha(bump(alpha, i, j, -h)))
                 / (2 * h) for j in range(4)] for i in range(4)]
        return [[mpmath.fsum(a * g for a, g in zip(ra, rg))] for ra, rg in zip(alpha, grad)]


def bump(A: Matrix, i: int, j: int, h: mpmath.mpf) -> Matrix:
    out = [list(r) for r in A]
    out[i][j] += h
    return out


def rounded(v: mpmath.mpf, decimals: int, mode: str = ROUND_HALF_EVEN) -> str:
    return str(Decimal(mpmath.nstr(v, 35, strip_zeros=False, min_fixed=-40, max_fixed=40))
               .quantize(Decimal(1).scaleb(-decimals), rounding=mode))


def table(M: Matrix, decimals: int, wrong: tuple[int, int] | None = None,
          mode: str = ROUND_HALF_EVEN) -> list[list[str]]:
    """M printed to ``decimals`` (correctly rounded, or truncated with ROUND_DOWN);
    ``wrong``: that entry one unit in the last place off."""
    out = [[rounded(v, decimals, mode) for v in r] for r in M]
    if wrong is not None:
        i, j = wrong
        out[i][j] = str(Decimal(out[i][j]) + Decimal(1).scaleb(-decimals))
    return out


def wrong_entries(M: Matrix, printed: list[list[str]], rows=None) -> list[list[int]]:
    """The entries whose printed number is more than half a unit from the reference."""
    rows = rows or range(len(M))
    found = []
    for i, r in zip(rows, printed):
        for j, text in enumerate(r):
            half = mpmath.mpf(10) ** Decimal(text).as_tuple().exponent / 2
            distance = abs(M[i][j] - mpmath.mpf(text))
            assert abs(distance - half) > mpmath.mpf(10) ** -30  # the reference decides it
            if distance > half:
                found.append([i, j])
    return found


def truncates(M: Matrix, printed: list[list[str]], rows=None) -> bool:
    """Is every printed number its reference value cut off toward zero after its last
    digit: c <= x < c + u (c > 0), c - u < x <= c (c < 0), -u < x < u (c = 0)?  A value
    within 1e-30 of an end is taken as that end (the examples' exact decimals)."""
    rows = rows or range(len(M))
    tiny = mpmath.mpf(10) ** -30
    for i, r in zip(rows, printed):
        for j, text in enumerate(r):
            c, u = mpmath.mpf(text), mpmath.mpf(10) ** Decimal(text).as_tuple().exponent
            x = abs(M[i][j]) if c >= 0 else -M[i][j]  # the same cut, mirrored
            c = abs(c)
            if not (x > c - tiny if c else x > -u + tiny) or not x < c + u - tiny:
                return False
    return True


def claim(name: str, stage: str, values: list[list[str]] | str, **keys: str) -> str:
    text = values if isinstance(values, str) else \
        "[" + ", ".join("[" + ", ".join(r) + "]" for r in values) + "]"
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return f'[[claim]]\nname = "{name}"\nstage = "{stage}"\n{extra}values = {text}\n\n'


@pytest.fixture(scope="module")
def ref() -> Builtin:
    return Builtin()


def lecture(ref: Builtin) -> tuple[str, dict[str, tuple]]:
    """The claims file, and each claim's (reference matrix, printed values, rows)."""
    h = ref.heads[0]
    W_Q = ref.W[0]["W_Q"]
    shifted = [[s - max(r) for s in r] for r in h["scores"]]
    shifted_exp = [[mpmath.exp(z) for z in r] for r in shifted]
    n1 = ref.norm1
    parts = {
        "layer1.head1.Q.terms.row1": ([[ref.input[1][c] * W_Q[c][j] for j in range(2)]
                                       for c in range(4)], 4, (3, 1)),
        "layer1.head1.output.terms.row2": ([[h["alpha"][2][j] * h["V"][j][c] for c in range(2)]
                                            for j in range(4)], 4, (0, 1)),
        "layer1.head1.weights.shifted": (shifted, 4, (1, 0)),
        "layer1.head1.weights.shifted_exp": (shifted_exp, 4, (2, 2)),
        "layer1.head1.weights.shifted_exp_sum": ([[mpmath.fsum(r)] for r in shifted_exp], 4,
                                                 (3, 0)),
        "layer1.add_norm1.centred": (n1["centred"], 3, (3, 3)),
        "layer1.add_norm1.variance.total": ([[t] for t in n1["total"]], 3, (1, 0)),
        "layer1.add_norm1.mean.total": ([[mpmath.fsum(r)] for r in n1["sum"]], 3, (0, 0)),
        "layer1.add_norm1.variance_eps": ([[v + ref.eps] for v in n1["var"]], 7, (2, 0)),
        "positional_encoding.divisors": ([ref.divisors], 2, (0, 1)),
        "positional_encoding.angles": (ref.angles, 4, (2, 1)),
        "layer1.head1.weights.log": ([[mpmath.log(a) for a in r] for r in h["alpha"]], 4,
                                     (0, 3)),
        "layer1.head1.weights.complement": ([[1 - a for a in r] for r in h["alpha"]], 4,
                                            (1, 1)),
        "grad.layer1.head1.weights.dot": (ref.dot(), 5, (2, 0)),
    }
    text, expect = "", {}
    for stage, (M, decimals, off) in parts.items():
        for name, at in ((stage, None), (stage + " (wrong)", off)):
            printed = table(M, decimals, at)
            text += claim(name, stage, printed)
            expect[name] = (M, printed, None)
    for name, stage, v, d in (("1/sqrt(d_k)", "layer1.head1.scores.inv_scale",
                               1 / mpmath.sqrt(2), 4),
                              ("the loss", "loss", ref.loss, 3)):
        for label, shift in ((name, 0), (name + " (wrong)", 1)):
            printed = str(Decimal(rounded(v, d)) + shift * Decimal(1).scaleb(-d))
            text += claim(label, stage, printed)  # a 1x1 stage: a bare number
            expect[label] = ([[v]], [[printed]], None)
    # an author's max-subtracted exponentials (and their sums) claimed on S.exp
    text += claim("author e^s", "layer1.head1.weights.exp", table(shifted_exp, 4))
    text += claim("author sum e^s", "layer1.head1.weights.exp_sum",
                  table([[mpmath.fsum(r)] for r in shifted_exp], 4))
    text += claim("author s - max s", "layer1.head1.scores", table(shifted, 4))
    # astype(int) of the raw scores: integers truncated toward zero
    text += claim("int raw scores", "layer1.head1.raw_scores",
                  table(h["raw"], 0, mode=ROUND_DOWN))
    # printed partial rows (q_1 and the keys; the values too, which do not feed the
    # scores), then a score row a reader computed from them
    text += claim("q_1", "layer1.head1.Q", table([h["Q"][1]], 2), rows="[1]")
    text += claim("K", "layer1.head1.K", table(h["K"], 2))
    text += claim("V", "layer1.head1.V", table(h["V"], 2))
    q1 = [Decimal(v) for v in table([h["Q"][1]], 2)[0]]
    keys = [[Decimal(v) for v in r] for r in table(h["K"], 2)]
    by_hand = [[str(sum(a * b for a, b in zip(q1, k)).quantize(Decimal("0.01"),
                                                               rounding=ROUND_HALF_EVEN))
                for k in keys]]
    text += claim("u_1 by hand", "layer1.head1.raw_scores", by_hand, rows="[1]")
    text += claim("u_1 from q_1 and K", "layer1.head1.raw_scores", by_hand, rows="[1]",
                  inputs='{ "layer1.head1.Q" = "q_1", "layer1.head1.K" = "K" }')
    text += claim("u_0 from q_1 and K", "layer1.head1.raw_scores",
                  [[str(sum(a * b for a, b in zip((Decimal("0.5"), Decimal("1.5")), k)))
                    for k in keys]], rows="[0]",
                  inputs='{ "layer1.head1.Q" = "q_1", "layer1.head1.K" = "K" }')
    text += claim("q_10", "layer1.head1.Q", rounded(h["Q"][1][0], 3), entry="[1, 0]",
                  check="false")
    text += claim("u_10 from q_10", "layer1.head1.raw_scores", rounded(h["raw"][1][0], 3),
                  entry="[1, 0]", inputs='{ "layer1.head1.Q" = "q_10" }')
    expect["by hand"] = (q1, keys, by_hand)
    return text, expect


@pytest.fixture(scope="module")
def checked(ref, tmp_path_factory) -> tuple[dict, dict]:
    text, expect = lecture(ref)
    path = tmp_path_factory.mktemp("claims3") / "lecture.toml"
    path.write_text(text)
    code, out = run_cli(["check", str(path), "--json"])
    assert code == 1, out
    return {c["name"]: c for c in json.loads(out)["claims"]}, expect


def test_every_address_right_and_wrong_as_the_reference_says(checked):
    """Each address's right table is all right and its wrong one wrong exactly where
    mpmath says so (a bare number on a 1x1 stage included)."""
    claims, expect = checked
    compared = 0
    for name, (M, printed, rows) in expect.items():
        if name == "by hand":
            continue
        assert claims[name]["wrong"] == wrong_entries(M, printed, rows), (name, claims[name])
        named = any("truncation" in why for why in claims[name]["explanations"])
        assert named == (bool(claims[name]["wrong"]) and truncates(M, printed, rows)), name
        compared += 1
        assert name.endswith("(wrong)") == bool(claims[name]["wrong"]), name
    assert compared == 32


def test_why_lines(ref, checked):
    """The max-subtracted e^s and its sums on S.exp, and s − max s on the scores, are
    named as that convention with their own address; integer truncation is named as
    truncation (astype(int)); a score row computed by hand from the printed q_1 and K
    is wrong where mpmath's exact row rounds otherwise, and is reader rounding citing
    those two tables and not V (printed, but not read by the scores)."""
    claims, expect = checked
    for name, address in (("author e^s", "shifted_exp"), ("author sum e^s", "shifted_exp_sum"),
                          ("author s - max s", "shifted")):
        assert claims[name]["wrong"], claims[name]
        assert any("max-subtracted softmax" in why and
                   f"layer1.head1.weights.{address})" in why
                   for why in claims[name]["explanations"]), claims[name]
    truncated = claims["int raw scores"]
    assert truncated["wrong"] == wrong_entries(ref.heads[0]["raw"], table(
        ref.heads[0]["raw"], 0, mode=ROUND_DOWN)) != []
    assert any("truncation" in why and "astype(int)" in why
               for why in truncated["explanations"]), truncated
    q1, keys, by_hand = expect["by hand"]
    wrong = [[1, j] for _, j in wrong_entries([ref.heads[0]["raw"][1]], by_hand)]
    assert claims["u_1 by hand"]["wrong"] == wrong != [], claims["u_1 by hand"]
    why = [w for w in claims["u_1 by hand"]["explanations"] if w.startswith("reader rounding")]
    assert why and why[0].endswith("as printed (q_1, K)"), claims["u_1 by hand"]


def test_rows_and_entries_as_inputs(ref, checked):
    """The score row from the printed q_1 and K, recomputed by hand in decimals, is
    right as printed (consistent); row 0, where q_0 = (1/2, 3/2) stays exact and K is
    printed, is decided exactly on a tie (0.5·1.21 + 1.5·1.14 = 2.315); the score from
    the one printed entry q_10 is consistent."""
    claims, _ = checked
    for name in ("u_1 from q_1 and K", "u_0 from q_1 and K", "u_10 from q_10"):
        assert claims[name]["wrong"] == [], claims[name]
    assert ref.heads[0]["Q"][0] == [mpmath.mpf("0.5"), mpmath.mpf("1.5")]


def test_a_printed_row_that_does_not_feed_the_entries_is_not_cited(ref, tmp_path):
    """q_3 and K printed, then the score row 1 computed from the exact q_1 and the
    printed K (mpmath): the why cites K, not q_3 (row 3 of Q feeds row 3 of the scores,
    never row 1)."""
    h = ref.heads[0]
    K = table(h["K"], 2)
    row = [[rounded(mpmath.fsum(q * mpmath.mpf(k) for q, k in zip(h["Q"][1], ks)), 2)
            for ks in K]]
    path = tmp_path / "feed.toml"
    path.write_text(claim("q_3", "layer1.head1.Q", table([h["Q"][3]], 2), rows="[3]")
                    + claim("K", "layer1.head1.K", K)
                    + claim("u_1", "layer1.head1.raw_scores", row, rows="[1]"))
    code, out = run_cli(["check", str(path), "--json"])
    u = {c["name"]: c for c in json.loads(out)["claims"]}["u_1"]
    assert u["wrong"] == [[1, j] for _, j in wrong_entries([h["raw"][1]], row)] != [], u
    assert [w for w in u["explanations"] if w.startswith("reader rounding")] == [
        "reader rounding: every number is what a reader gets recomputing from the tables "
        "printed before it, as printed (K)"], u
