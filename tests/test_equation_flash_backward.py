"""FlashAttention-2's backward as its paper prints it (Algorithm 2): bold gradients
(``\\mathbf{dV} = \\mathbf{P}^\\top \\mathbf{dO}``) and the gradient of a symbol bound
by ``where`` with its indices (``dP_{ij}`` with P the attention weights) -- each holds
where it is right and a mutation fails at an entry whose two values NumPy recomputes
from the example file's numbers (float64, written here from the definitions)."""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction

import numpy as np
import pytest
from test_equation_constructs import DATA, _head

from symformer import load_example
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge

WHERE = {"P": "layer1.head1.weights", "O": "layer1.head1.output"}
D_S = r"dS_{ij} = P_{ij}(dP_{ij} - D_i), \quad D_i = \sum_j dO_{ij} O_{ij}"


@pytest.fixture(scope="module")
def judge() -> Judge:
    checker = Checker(load_example(DATA / "attn_model.toml"))
    return Judge(checker.example, checker.derivation, checker.causal)


def _reference() -> dict[str, np.ndarray]:
    """The head backward in float64, from its forward (test_equation_constructs' float64
    head, written from the file's numbers) and the file's dL/dO."""
    head = _head()
    p, v, o = head["A"], head["V"], head["O"]
    data = tomllib.loads((DATA / "attn_model.toml").read_text())
    d_o = np.array([[float(Fraction(str(x))) for x in r] for r in data["loss"]["gradient"]])
    d_p = d_o @ v.T
    d_s = p * (d_p - (d_o * o).sum(axis=1, keepdims=True))
    return {"P": p, "O": o, "dO": d_o, "dV": p.T @ d_o, "dP": d_p, "dS": d_s}


def _links(judge: Judge, stage: str, latex: str):
    return judge.check(EquationClaim("t", stage, latex, where=dict(WHERE), examples=2,
                                     source="t")).links


def _failure(judge: Judge, stage: str, latex: str) -> tuple[int, int, float, float]:
    (link,) = _links(judge, stage, latex)
    assert link.status == "fails", link.message
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", link.message)
    return int(m[1]), int(m[2]), float(m[3]), float(m[4])


def test_bold_gradients_as_the_paper_prints_them(judge):
    latex = r"\mathbf{dV} = \mathbf{P}^\top \mathbf{dO}"
    assert {link.status for link in _links(judge, "grad.layer1.head1.V", latex)} == {"holds"}
    i, j, got, stage = _failure(judge, "grad.layer1.head1.V",
                                r"\mathbf{dV} = \mathbf{P} \mathbf{dO}")
    ref = _reference()
    assert stage == pytest.approx(ref["dV"][i, j], rel=1e-9)
    assert got == pytest.approx((ref["P"] @ ref["dO"])[i, j], rel=1e-9)


def test_the_gradient_of_a_where_bound_symbol_with_indices(judge):
    stage = "grad.layer1.head1.scores"
    assert {link.status for link in _links(judge, stage, D_S)} == {"holds"}
    i, j, got, value = _failure(judge, stage, D_S.replace("- D_i", "+ D_i"))
    ref = _reference()
    assert value == pytest.approx(ref["dS"][i, j], rel=1e-9)
    d = (ref["dO"] * ref["O"]).sum(axis=1)
    assert got == pytest.approx(ref["P"][i, j] * (ref["dP"][i, j] + d[i]), rel=1e-9)

