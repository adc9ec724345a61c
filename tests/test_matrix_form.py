"""Every matrix-form equation the notes display equals its stage at every entry.

The notes state each sub-layer as textbooks write it (``Q = X W_Q``, ``A = softmax(Q
K^T / sqrt(d_k) + M)``, ``O = A V``, ``F = act(Y W_1 + b_1) W_2 + b_2``,
``Y = LayerNorm(R)``) from one expression tree (symformer/latex/matrix_form.py).  Here
an evaluator of its own -- float64 NumPy, the textbook formulas written out below, the
example's weights -- computes each line's right-hand side from its input stages and
compares it with the stage the line names, entry by entry.  A line that wrote ``K Q^T``
or dropped a bias would fail.
"""

from __future__ import annotations

import glob
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symformer import derive, load_example
from symformer.latex import matrix_form as mf

#: An optimiser lesson ([objective]: no token rows, no block) has no matrix form
#: (the sub-layers' matrix equations); its numbers are its training run's stages
#: (tests/test_optimizer_lesson.py).
NO_TOKENS = ("optimizer_lesson",)
EXAMPLES = sorted(Path(p).stem for p in glob.glob(str(
    Path(__file__).parent.parent / "symformer" / "examples" / "*.toml")) if "claims" not in p
    and Path(p).stem not in NO_TOKENS)


def _floats(stage) -> np.ndarray:
    return np.array([[-math.inf if t == "-inf" else float(Fraction(t)) for t in row]
                     for row in stage.values(decimals=14)])


def _matrix(value) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in value.tolist()])


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


ACTIVATIONS = {
    "relu": lambda h: np.maximum(h, 0.0),
    "gelu": lambda h: 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))),
    "gelu_tanh": lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                  * (h + 0.044715 * h ** 3))),
    "silu": lambda h: h / (1 + np.exp(-h)),
}


def evaluate(node, g) -> np.ndarray:
    """A matrix-form tree in float64, from the stages it reads and the weights."""
    if isinstance(node, mf.Ref):
        return _floats(g[node.stage])
    if isinstance(node, mf.Weight):
        return _matrix(g[node.stage].op.parameters()[node.name])
    if isinstance(node, mf.MatMul):
        return evaluate(node.left, g) @ evaluate(node.right, g)
    if isinstance(node, mf.Sum):
        return sum(evaluate(t, g) for t in node.terms)
    if isinstance(node, mf.Transpose):
        return evaluate(node.arg, g).T
    if isinstance(node, mf.Scores):
        op = g[node.stage].op
        s = evaluate(node.product, g)
        s = s / (math.sqrt(op.d_k) if op.scale is None else float(op.scale))
        for i, j in op.masked:
            s[i, j] = -math.inf
        return s
    if isinstance(node, mf.RowSoftmax):
        return _softmax(evaluate(node.arg, g))
    if isinstance(node, mf.Apply):
        op = g[node.stage].op
        name = getattr(op, "activation", op).name
        return ACTIVATIONS[name](evaluate(node.arg, g))
    if isinstance(node, mf.Hadamard):
        return evaluate(node.left, g) * evaluate(node.right, g)
    if isinstance(node, mf.Columns):
        return np.hstack([evaluate(p, g) for p in node.parts])
    if isinstance(node, mf.RowNorm):
        op, x = g[node.stage].op, evaluate(node.arg, g)
        gamma = _matrix(op.gamma).reshape(-1)
        eps = float(op.eps)
        if not hasattr(op, "beta"):  # RMSNorm
            return x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + eps) * gamma
        mu = x.mean(axis=1, keepdims=True)
        beta = _matrix(op.beta).reshape(-1)
        if op.unbiased:
            sd = x.std(axis=1, ddof=1, keepdims=True)
            return gamma * (x - mu) / (sd + eps) + beta
        return gamma * (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + eps) + beta
    if isinstance(node, mf.Rotate):
        op, x = g[node.stage].op, evaluate(node.arg, g)
        out = x.copy()
        for m in range(x.shape[0]):
            for i, (a, b) in enumerate(op.pairs):
                t = float(op.angle(m, i))
                out[m, a] = x[m, a] * math.cos(t) - x[m, b] * math.sin(t)
                out[m, b] = x[m, a] * math.sin(t) + x[m, b] * math.cos(t)
        return out
    raise TypeError(type(node).__name__)


@pytest.fixture(scope="module", params=EXAMPLES)
def derivation(request):
    return derive(load_example(request.param))


def test_every_matrix_line_equals_its_stage_at_every_entry(derivation):
    g = derivation
    shown = [line for stage in g for line in mf.lines(stage)]
    assert shown, "no matrix-form line: nothing was checked"
    kinds = {g[line.stage].kind for line in shown}
    assert {"Q", "K", "V", "weights", "head_output"} <= kinds
    for line in shown:
        got = evaluate(line.rhs, g)
        want = _floats(g[line.stage])
        assert got.shape == want.shape, line.stage
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=line.stage)


def test_a_wrong_matrix_line_fails(block):
    """The evaluator is not the stage: K Q^T in place of Q K^T gives other weights."""
    line = mf.lines(block["layer1.head1.weights"])[0]
    scores = line.rhs.arg
    swapped = mf.RowSoftmax(mf.Scores(mf.MatMul(mf.Ref("layer1.head1.K"), mf.Transpose(
        mf.Ref("layer1.head1.Q"))), scores.stage))
    assert not np.allclose(evaluate(swapped, block), _floats(block["layer1.head1.weights"]),
                           atol=1e-6)


def test_matrix_lines_read_as_textbooks_write_them(block):
    rows = dict(mf.equation_lines(list(block)))
    assert rows["Q^{(1)}"] == "X W_{Q}^{(1)}"
    assert rows["A^{(1)}"].startswith(
        r"\operatorname{softmax}\Bigl(\frac{Q^{(1)} \bigl(K^{(1)}\bigr)^{\top}}{\sqrt{d_{k}}}")
    assert rows["O^{(1)}"] == "A^{(1)} V^{(1)}"
    assert rows["M"] == r"\bigl[\,O^{(1)} \;\; O^{(2)}\,\bigr] W_{O}"
    assert rows["F"] == r"\operatorname{ReLU}\bigl(Y W_{1} + b_{1}\bigr) W_{2} + b_{2}"
