"""More of what authors print (issue "Check an equation as its author wrote it", item 4):
``\\otimes`` (the outer product of two vectors, the Kronecker product of matrices), a
vector of ones (``\\mathbf{1}``, ``\\mathbb{1}``, ``\\mathbf 1_n``), superscript indices
``A^{ij}`` and ALiBi's bias ``m |i - j|``.

Each correct form holds; each mutation fails, and its counterexample is recomputed here
in float64 from the example file's own numbers (NumPy; torch autograd for the Jacobian),
never by the engine.
"""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction
from math import sqrt
from pathlib import Path

import numpy as np
import pytest

from symformer import load_example
from symformer.errors import InputError
from symformer.verify import latex_math as lm
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge

DATA = Path(__file__).parent / "data" / "equations"
HEAD = {"A": "layer1.head1.weights", "S": "layer1.head1.scores", "V": "layer1.head1.V",
        "O": "layer1.head1.output"}
ALIBI = """
title = "attention with an ALiBi bias"
tokens = ["a", "b", "c"]
scale = "none"
alibi_slopes = [0.5]

[attention]
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 0], [0, 1], [1, -1]]
V = [[1, 2], [3, 4], [5, 6]]
"""


def _judge(path: Path) -> Judge:
    checker = Checker(load_example(path))
    return Judge(checker.example, checker.derivation, checker.causal)


@pytest.fixture(scope="module")
def attn() -> Judge:
    return _judge(DATA / "attn_model.toml")


@pytest.fixture(scope="module")
def alibi(tmp_path_factory) -> Judge:
    path = tmp_path_factory.mktemp("alibi") / "alibi.toml"
    path.write_text(ALIBI)  # a file: its random examples are drawn from it
    return _judge(path)


def _links(judge: Judge, stage: str, latex: str, where: dict | None = None):
    found = judge.check(EquationClaim("t", stage, latex, where=where or {}, examples=2,
                                      source="t"))
    return found.links


def _verdict(judge: Judge, stage: str, latex: str, where: dict | None = None) -> set[str]:
    return {link.status for link in _links(judge, stage, latex, where)}


def _counterexample(judge: Judge, stage: str, latex: str, where: dict | None = None
                    ) -> tuple[int, int, float, float]:
    """(row, column, the equation's value, the stage's) of the failure printed."""
    (link,) = _links(judge, stage, latex, where)
    assert link.status == "fails", link.message
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", link.message)
    return int(m[1]), int(m[2]), float(m[3]), float(m[4])


def _head() -> dict[str, np.ndarray]:
    """The attention head of attn_model.toml in float64, from the file's numbers."""
    data = tomllib.loads((DATA / "attn_model.toml").read_text())

    def floats(rows):
        return np.array([[float(Fraction(str(v))) for v in r] for r in rows])
    x = floats(data["inputs"])
    head = data["layer"][0]["head"][0]
    q, k, v = (x @ floats(head[w]) for w in ("W_Q", "W_K", "W_V"))
    s = q @ k.T / sqrt(q.shape[1])
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    return {"S": s, "A": a, "V": v, "O": a @ v}


# -- \otimes ------------------------------------------------------------------------------
def test_otimes_is_read_as_a_product_operator():
    (chain,) = lm.parse_equations(r"J = \mathrm{diag}(p) - p \otimes p")
    assert isinstance(chain.rhs[0], lm.Binary) and chain.rhs[0].right.op == "otimes"


def test_the_softmax_jacobian_with_an_outer_product(attn):
    torch = pytest.importorskip("torch")
    stage, where = "layer1.head1.weights.jacobian.row2", {"p": HEAD["A"]}
    good = r"J = \mathrm{diag}(\mathbf{p}) - \mathbf{p} \otimes \mathbf{p}"
    assert _verdict(attn, stage, good, where) == {"holds"}
    i, j, got, stage_value = _counterexample(attn, stage, good.replace("- \\mathbf{p} \\otimes",
                                                                       "+ \\mathbf{p} \\otimes"),
                                             where)
    s = torch.tensor(_head()["S"][2], dtype=torch.float64)  # row2: token 2 (from 0)
    jacobian = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, 0), s)
    p = torch.softmax(s, 0)
    assert stage_value == pytest.approx(float(jacobian[i, j]), rel=1e-9)
    assert got == pytest.approx(float(p[i] * (i == j) + p[i] * p[j]), rel=1e-9)


def test_otimes_of_matrices_is_the_kronecker_product():
    from flint import arb

    from symformer.verify.equation_eval import Mat, _outer
    a, b = [[1, 2], [3, 4]], [[0, 5], [6, 7]]
    got = _outer(Mat([[arb(x) for x in r] for r in a]), Mat([[arb(x) for x in r] for r in b]))
    assert [[float(x.mid()) for x in r] for r in got.rows] == np.kron(a, b).tolist()


# -- a vector of ones ---------------------------------------------------------------------
@pytest.mark.parametrize("ones", [r"\mathbf{1}", r"\mathbb{1}", r"\mathbf 1", r"\mathbf{1}_n",
                                  r"\boldsymbol{1}_{n}"])
def test_a_vector_of_ones_is_not_an_indicator(ones):
    (chain,) = lm.parse_equations(rf"y = X {ones}")
    assert isinstance(chain.rhs[0].right, lm.Ones)
    (chain,) = lm.parse_equations(r"y = \mathbb{1}_{i = j} + \mathbf{1}[j \le i]")
    assert isinstance(chain.rhs[0].left, lm.Indicator)
    assert isinstance(chain.rhs[0].right, lm.Indicator)


def test_rows_of_attention_weights_sum_to_one(attn):
    """(A 1 - 1_n) 1^T is 0: O = A V plus it holds; with A 1 1^T alone the value at
    every entry is the stage's plus 1 (each row of A sums to 1)."""
    good = r"O = A V + (A \mathbf{1} - \mathbf{1}_n) \mathbf{1}^\top"
    assert _verdict(attn, HEAD["O"], good, HEAD) == {"holds"}
    i, j, got, stage_value = _counterexample(attn, HEAD["O"],
                                             r"O = A V + A \mathbf{1} \mathbf{1}^\top", HEAD)
    assert stage_value == pytest.approx(_head()["O"][i, j], rel=1e-9)
    assert got == pytest.approx(_head()["O"][i, j] + 1, rel=1e-9)


def test_a_ones_vector_without_a_length_or_a_product_is_refused(attn):
    with pytest.raises(InputError, match=r"\\mathbf\{1\} at column \d+: write its length"):
        _links(attn, HEAD["O"], r"O = A V + \mathbf{1} - \mathbf{1}", HEAD)


# -- superscript indices --------------------------------------------------------------------
def test_superscript_indices_are_entries(attn):
    good = r"A^{ij} = \frac{e^{S^{ij}}}{\sum_{k=1}^{n} e^{S^{ik}}}"
    assert _verdict(attn, HEAD["A"], good, HEAD) == {"holds"}
    i, j, got, stage_value = _counterexample(
        attn, HEAD["A"], r"A^{ij} = \frac{e^{S^{ji}}}{\sum_{k=1}^{n} e^{S^{jk}}}", HEAD)
    i, j = i - 1, j - 1  # the sum from 1: the entries are printed from 1
    head = _head()
    assert stage_value == pytest.approx(head["A"][i, j], rel=1e-9)
    s = head["S"]
    assert got == pytest.approx(np.exp(s[j, i]) / np.exp(s[j]).sum(), rel=1e-9)


def test_a_superscript_that_is_no_index_stays_a_power(attn):
    """S^{2} squares (no letters); on the right S^{ij} with i, j not in scope is refused
    rather than read as entries."""
    i, j, got, _ = _counterexample(attn, HEAD["A"], r"A = S^{2}", HEAD)
    assert got == pytest.approx(_head()["S"][i, j] ** 2, rel=1e-9)
    with pytest.raises(InputError):
        _links(attn, HEAD["A"], r"A = S^{ij}", HEAD)


# -- ALiBi --------------------------------------------------------------------------------
@pytest.mark.parametrize("latex", [r"\hat{s}_{ij} = s_{ij} - m |i - j|",
                                   r"\hat{s}_{ij} = s_{ij} - m \left\lvert j - i \right\rvert",
                                   r"\hat{s}_{ij} = s_{ij} - \frac{1}{2} \left| i - j \right|"])
def test_alibi_bias_as_slope_times_distance(alibi, latex):
    assert _verdict(alibi, "alibi_scores", latex) == {"holds"}


def test_alibi_with_the_sign_flipped_fails(alibi):
    i, j, got, stage_value = _counterexample(alibi, "alibi_scores",
                                             r"\hat{s}_{ij} = s_{ij} + m |i - j|")
    q = np.array([[1, 0], [0, 1], [1, 1]], float)
    k = np.array([[1, 0], [0, 1], [1, -1]], float)
    s = q @ k.T
    assert stage_value == pytest.approx(s[i, j] - 0.5 * abs(i - j), abs=1e-12)
    assert got == pytest.approx(s[i, j] + 0.5 * abs(i - j), abs=1e-12)


def test_the_vocabulary_size_stays_a_size():
    (chain,) = lm.parse_equations(r"p = \frac{1}{|V|}")
    assert chain.rhs[0].right == lm.Sym("|V|")


# -- FlashAttention's tiles of keys -------------------------------------------------------
ONLINE = r"""
\begin{align}
O &= \mathrm{diag}(\ell)^{-1} \left( \mathrm{diag}(e^{m_1 - m}) \tilde{O}_1
     + \mathrm{diag}(e^{m_2 - m}) \tilde{O}_2 \right) \\
m_1 &= \mathrm{rowmax}(S_1) \\
m_2 &= \mathrm{rowmax}(S_2) \\
m &= \max(m_1, m_2) \\
\ell &= e^{m_1 - m} \odot \mathrm{rowsum}(e^{S_1 - m_1})
       + e^{m_2 - m} \odot \mathrm{rowsum}(e^{S_2 - m_2}) \\
\tilde{O}_1 &= e^{S_1 - m_1} V_1 \\
\tilde{O}_2 &= e^{S_2 - m_2} V_2
\end{align}"""
TILES = {"S_1": "layer1.head1.scores[:, 0:2]", "S_2": "layer1.head1.scores[:, 2:3]",
         "V_1": "layer1.head1.V[0:2]", "V_2": "layer1.head1.V[2:3]", "O": HEAD["O"]}


def test_the_online_softmax_over_two_tiles_of_keys_is_attention(attn):
    """FlashAttention's running max m, its rescaled sum ℓ and the rescaled outputs of
    two tiles of keys (keys 0-1 and key 2), combined: the head's output."""
    assert _verdict(attn, HEAD["O"], ONLINE, TILES) == {"holds"}


def test_the_online_softmax_without_its_rescaling_fails(attn):
    """ℓ without e^{m_2 - m} on the second tile's sum: the counterexample is recomputed
    from the file's numbers."""
    wrong = ONLINE.replace(r"+ e^{m_2 - m} \odot", "+")
    i, j, got, stage_value = _counterexample(attn, HEAD["O"], wrong, TILES)
    head = _head()
    s, v = head["S"], head["V"]
    m1, m2 = s[:, :2].max(axis=1), s[:, 2:].max(axis=1)
    m = np.maximum(m1, m2)
    p1, p2 = np.exp(s[:, :2] - m1[:, None]), np.exp(s[:, 2:] - m2[:, None])
    ell = np.exp(m1 - m) * p1.sum(axis=1) + p2.sum(axis=1)
    out = (np.exp(m1 - m)[:, None] * (p1 @ v[:2]) + np.exp(m2 - m)[:, None] * (p2 @ v[2:]))
    assert stage_value == pytest.approx(head["O"][i, j], rel=1e-9)
    assert got == pytest.approx(out[i, j] / ell[i], rel=1e-9)


@pytest.mark.parametrize("block, message", [
    ("layer1.head1.V[2:1]", "first < end"), ("layer1.head1.V[0:2", "cannot read the block"),
    ("layer1.head1.V[0:9]", "reaches past its 3x3"),
])
def test_a_block_that_is_not_one_is_refused(attn, block, message):
    with pytest.raises(InputError, match=re.escape(message)):
        _links(attn, HEAD["O"], r"O = A V_1", {**HEAD, "V_1": block})


def test_tile_names_the_blocks_of_keys(attn):
    """``tile = 2``: S_1, S_2 the scores' columns 0-1 and 2, V_1, V_2 V's rows."""
    where = {"S": HEAD["S"], "V": HEAD["V"], "O": HEAD["O"]}
    found = attn.check(EquationClaim("t", HEAD["O"], ONLINE, where=where, examples=2,
                                     source="t", tile=2))
    assert {link.status for link in found.links} == {"holds"}
    wrong = attn.check(EquationClaim("t", HEAD["O"], ONLINE.replace(r"V_2", r"V_1"),
                                     where=where, examples=2, source="t", tile=2))
    assert "holds" not in {link.status for link in wrong.links}


@pytest.mark.parametrize("bad", [0, True, "2", 2.5])
def test_tile_in_a_claims_file_is_a_whole_number(bad):
    from symformer.verify.equation_claims import equations_from_toml
    with pytest.raises(InputError, match="tile must be a whole number"):
        equations_from_toml({"equation": [{"stage": "s", "latex": "x = y", "tile": bad}]},
                            "c.toml")


# -- ALiBi's bias as the paper prints it ----------------------------------------------------
CAUSAL_ALIBI = ALIBI.replace('scale = "none"\n', 'causal = true\n')
PAPER = (r"\mathbf{a}_i = \mathrm{softmax}\left(\frac{\mathbf{q}_i K^\top}{\sqrt{d_k}}"
         r" + m \cdot [-i, \ldots, -2, -1, 0]\right)")


@pytest.fixture(scope="module")
def causal_alibi(tmp_path_factory) -> Judge:
    path = tmp_path_factory.mktemp("alibi") / "causal_alibi.toml"
    path.write_text(CAUSAL_ALIBI)
    return _judge(path)


def _causal_scores(sign: float) -> np.ndarray:
    """q_i k_j / sqrt(2) + sign * 0.5 (i - j) where j <= i, -inf after (float64)."""
    q = np.array([[1, 0], [0, 1], [1, 1]], float)
    k = np.array([[1, 0], [0, 1], [1, -1]], float)
    i, j = np.indices((3, 3))
    s = q @ k.T / sqrt(2) + sign * 0.5 * (i - j)
    return np.where(j <= i, s, -np.inf)


def test_the_paper_s_bias_row_holds_in_a_causal_model(causal_alibi):
    """[-i, ..., -1, 0] lists the keys query i sees; the masked ones after it get -∞."""
    where = {"m": "1/2"}
    assert _verdict(causal_alibi, "weights", PAPER, where) == {"holds"}
    assert _verdict(causal_alibi, "alibi_scores",
                    r"\hat{\mathbf{s}}_i = \mathbf{s}_i + m \cdot [-i, \ldots, -1, 0]") \
        == {"holds"}


def test_the_paper_s_bias_row_with_the_sign_flipped_fails(causal_alibi):
    i, j, got, stage_value = _counterexample(
        causal_alibi, "alibi_scores",
        r"\hat{\mathbf{s}}_i = \mathbf{s}_i + m \cdot [i, \ldots, 1, 0]")
    assert stage_value == pytest.approx(_causal_scores(-1)[i, j], abs=1e-12)
    assert got == pytest.approx(_causal_scores(+1)[i, j], abs=1e-12)


def test_the_paper_s_one_based_row_is_named_not_held(causal_alibi):
    """-(i-1), ..., 0 counts the query from 1: not "holds", and the convention named."""
    (link,) = _links(causal_alibi, "weights", PAPER.replace("[-i,", "[-(i-1),"), {"m": "1/2"})
    assert link.status != "holds"
    assert any("counted from 1" in note for note in link.notes)


def test_a_written_row_is_not_padded_without_a_mask(alibi):
    """Without a causal mask a short row is a shape error, never -∞ filled in."""
    assert "holds" not in _verdict(
        alibi, "alibi_scores", r"\hat{\mathbf{s}}_i = \mathbf{s}_i + m \cdot [-i, \ldots, -1, 0]")
    with pytest.raises(InputError, match="step evenly"):  # no step to read
        _links(alibi, "alibi_scores",
               r"\hat{\mathbf{s}}_i = \mathbf{s}_i + m \cdot [-i, \ldots, 0]")
