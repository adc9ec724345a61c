"""What authors print, read as they mean it (issue "Check an equation as its author wrote
it", item 4): update arrows, text labels, sizes a ``where`` defines, layer superscripts,
a Jacobian's left-hand side, sums and maxima over a range, ``diag``, ``E[x]``, matrices
written out, primed indices, accents over bold rows, ``sin`` without a backslash.

Correct forms hold; wrong ones fail with a counterexample recomputed here (float64
NumPy, or torch autograd for a derivative), never by the engine.
"""

from __future__ import annotations

import re
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


def _judge(example) -> Judge:
    checker = Checker(example)
    return Judge(example, checker.derivation, checker.causal)


@pytest.fixture(scope="module")
def builtin():
    return _judge(load_example())


@pytest.fixture(scope="module")
def attn():
    return _judge(load_example(DATA / "attn_model.toml"))


@pytest.fixture(scope="module")
def rope():
    return _judge(load_example(DATA / "rope4w.toml"))


def status(judge, stage, latex, **options) -> set[str]:
    found = judge.check(EquationClaim("t", stage, latex, examples=1, source="t", **options))
    return {link.status for link in found.links}


HOLDS = [
    ("layer1.head1.Q", r"Q^{(l)} = X^{(l)} W_Q^{(l)}", {}),
    ("layer1.add_norm1.mean",
     r"\text{LayerNorm:}\ \textstyle \mu \leftarrow \frac{1}{d}\sum_{j=1}^{d} r_j", {}),
    ("layer1.add_norm1.mean", r"\mu := \mathbb{E}[r]", {}),
    ("layer1.add_norm1.variance", r"\sigma^2 = \mathrm{Var}[r] \tag{2}", {}),
    ("positional_encoding", r"PE_{pos,2i} = sin(pos/10000^{2i/d}) \\ "
                            r"PE_{pos,2i+1} = cos(pos/10000^{2i/d})", {}),
    ("layer1.head1.output", r"o_{ic} = \sum_{j \le n-1} \alpha_{ij} v_{jc}", {}),
    ("layer1.head1.weights", r"\alpha_{ij} = \frac{e^{s_{ij} - \max_{0 \le k < n} s_{ik}}}"
                             r"{\sum_m e^{s_{im} - \max_k s_{ik}}}", {}),
    ("layer1.add_norm1", r"\hat{\mathbf{y}}_i = \gamma \odot \frac{\mathbf{r}_i - \mu_i}"
                         r"{\sqrt{\sigma^2_i + \epsilon}} + \beta",
     {r"\hat{\mathbf{y}}": "layer1.add_norm1"}),
    ("layer1.head1.output", r"O = \operatorname{diag}(\ell)^{-1} \exp(S) V",
     {r"\ell": "layer1.head1.weights.exp_sum"}),
    ("layer1.add_norm1.mean", r"\mu_n = \frac{1}{D}\sum_{c=1}^{D} r_{n,c}", {"D": "d_model"}),
    ("layer1.add_norm1.mean", r"\mu = \frac{1}{C}\sum_{j} r_j", {"C": "4"}),
    ("layer1.head1.weights", r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_{j'} e^{s_{ij'}}}", {}),
    ("layer1.head1.Q", r"q_{ic} = [x_{i,0}, x_{i,1}] [(W_Q)_{0,c}, (W_Q)_{1,c}]^\top + "
                       r"\sum_{m=2}^{3} x_{im} (W_Q)_{mc}", {}),
]


HOLDS += [
    ("layer1.head1.weights", r"\sigma(\mathbf{z})_i = \frac{e^{z_i}}{\sum_{j=1}^{K} e^{z_j}}",
     {"z": "layer1.head1.scores", "K": "n"}),
    ("layer1.add_norm1", r"y_i = \gamma \hat{x}_i + \beta, \quad \hat{x}_i = "
     r"\frac{x_i - \mu}{\sqrt{\sigma^2 + \epsilon}}", {"x": "layer1.add_norm1.sum"}),
    ("layer1.add_norm1", r"\mathrm{LN}(x) = \frac{x - \mathrm{E}[x]}{\sqrt{\mathrm{Var}[x] "
     r"+ \epsilon}} \odot \gamma + \beta", {}),
    ("grad.layer1.head1.scores", r"dS = P \odot (dP - \mathrm{rowsum}(dP \odot P))",
     {"P": "layer1.head1.weights"}),
    ("layer1.head1.scores", r"s_{ij} = \frac{q_i^\top k_j}{\sqrt{d_k}}", {}),
    ("layer1.add_norm1.mean", r"\mu_i = \frac{1}{d}\sum_{j \in \{1, \ldots, d\}} r_{ij}", {}),
    ("layer1.add_norm1.mean", r"\mu_i = \frac{1}{d}\sum_{j \in [d]} r_{ij}", {}),
]
#: Each a wrong variant of one above: none may hold.
FAILS = [
    ("layer1.head1.weights", r"\sigma(\mathbf{z})_i = \frac{e^{z_i}}{\sum_{j=1}^{K} e^{z_i}}",
     {"z": "layer1.head1.scores", "K": "n"}),
    ("layer1.add_norm1", r"y_i = \gamma \hat{x}_i + \beta, \quad \hat{x}_i = "
     r"\frac{x_i - \mu}{\sqrt{\sigma^2} + \epsilon}", {"x": "layer1.add_norm1.sum"}),
    ("grad.layer1.head1.scores", r"dS = P \odot (dP - \mathrm{rowsum}(dP))",
     {"P": "layer1.head1.weights"}),
    ("layer1.head1.scores", r"s_{ij} = \frac{q_i^\top k_i}{\sqrt{d_k}}", {}),
    ("layer1.head1.scores", r"s_{ij} = q_i^\top k_j", {}),
    ("layer1.add_norm1.mean", r"\mu_i = \frac{1}{d}\sum_{j \in \{2, \ldots, d\}} r_{ij}", {}),
]


@pytest.mark.parametrize("stage, latex, where", HOLDS)
def test_what_authors_print_holds(builtin, stage, latex, where):
    assert status(builtin, stage, latex, where=where) == {"holds"}


@pytest.mark.parametrize("stage, latex, where", FAILS)
def test_their_wrong_variants_fail(builtin, stage, latex, where):
    assert status(builtin, stage, latex, where=where) <= {"fails", "example only"}


def test_a_rotation_matrix_holds_and_its_sign_flip_fails(rope):
    latex = (r"\begin{bmatrix} \tilde{q}_{p,2c} \\ \tilde{q}_{p,2c+1} \end{bmatrix} = "
             r"\begin{bmatrix} \cos(p\theta_c) & -\sin(p\theta_c) \\ \sin(p\theta_c) & "
             r"\cos(p\theta_c) \end{bmatrix} \begin{bmatrix} q_{p,2c} \\ q_{p,2c+1} "
             r"\end{bmatrix}, \quad \theta_c = 10000^{-2c/d}")
    assert status(rope, "layer1.head1.Q_rot", latex) == {"holds"}
    wrong = latex.replace(r"& -\sin(p\theta_c) \\ \sin", r"& \sin(p\theta_c) \\ -\sin")
    assert status(rope, "layer1.head1.Q_rot", wrong) == {"fails"}


def _softmax_row(row: int) -> np.ndarray:
    import tomllib
    data = tomllib.loads((DATA / "attn_model.toml").read_text())
    rows = [[float(Fraction(str(v))) for v in r] for r in data["inputs"]]
    head = data["layer"][0]["head"][0]
    x = np.array(rows)
    q = x @ np.array([[float(Fraction(str(v))) for v in r] for r in head["W_Q"]])
    k = x @ np.array([[float(Fraction(str(v))) for v in r] for r in head["W_K"]])
    return (q @ k.T / sqrt(q.shape[1]))[row]


def test_a_jacobian_left_hand_side_against_torch_autograd(attn):
    torch = pytest.importorskip("torch")
    stage = "layer1.head1.weights.jacobian.row2"
    where = {"p": "layer1.head1.weights"}
    good = r"\frac{\partial p_j}{\partial s_k} = p_j (\delta_{jk} - p_k)"
    assert status(attn, stage, good, where=where) == {"holds"}
    found = attn.check(EquationClaim("t", stage, r"\frac{\partial p_j}{\partial s_k} = "
                                     r"p_j \delta_{jk} - p_k", examples=1, source="t",
                                     where=where))
    (link,) = found.links
    assert link.status == "fails"
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", link.message)
    j, k = int(m[1]), int(m[2])
    s = torch.tensor(_softmax_row(2), dtype=torch.float64)  # row2: token 2 (from 0)
    jacobian = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, 0), s)
    assert float(m[4]) == pytest.approx(float(jacobian[j, k]), rel=1e-9)
    p = torch.softmax(s, 0)
    assert float(m[3]) == pytest.approx(float(p[j] * (j == k) - p[k]), abs=1e-12)


def test_an_update_arrow_reads_the_value_before_the_update():
    """θ ← θ − η m̂/(√v̂ + ε) at every step of the run; θ on the right is θ_{t-1}."""
    from symformer.verify.claims import training_run
    path = DATA / "adam1.toml"
    example = load_example(path)
    checker = Checker(example, run=training_run(path))
    judge = Judge(example, checker.derivation, checker.causal, checker.run)
    where = {r"\hat{m}": "step2.adam_mhat.theta", r"\hat{v}": "step2.adam_vhat.theta"}
    latex = (r"\text{Adam:}\quad \theta \leftarrow \theta - \eta "
             r"\frac{\hat{m}}{\sqrt{\hat{v}} + \epsilon}")
    found = judge.check(EquationClaim("t", "step2.theta", latex, examples=1, source="t",
                                      where=where))
    (link,) = found.links
    assert link.status == "holds" and "steps 1 to 4" in link.message


@pytest.mark.parametrize("latex, message", [
    (r"\mu = \unknownmacro{r}", r"cannot read \unknownmacro at column 7"),
    (r"\mu = \operatorname{argsort}(r)", "argsort"),
])
def test_an_unknown_macro_stays_a_one_line_refusal(builtin, latex, message):
    with pytest.raises(InputError) as error:
        builtin.check(EquationClaim("t", "layer1.add_norm1.mean", latex, source="t"))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_grammar_reads_the_new_forms_into_trees():
    (chain,) = lm.parse_equations(r"\theta \gets \theta - \eta g")
    assert chain.update
    (chain,) = lm.parse_equations(r"m_i = \max_{j < i} s_{ij}")
    reduce = chain.rhs[0]
    assert reduce.indices == ("j",) and reduce.low is None
    assert reduce.high == lm.Binary("-", lm.Sym("i"), lm.Num(Fraction(1)))
    (chain,) = lm.parse_equations(r"y = \tanh^{2} x")
    assert chain.rhs[0] == lm.Binary("pow", lm.Call("tanh", (lm.Sym("x"),)),
                                      lm.Num(Fraction(2)))
    with pytest.raises(InputError, match="only a positive whole power"):
        lm.parse_equations(r"y = \sin^{-1} x")


GELU_GRAD = r"\frac{\partial L}{\partial h_{ij}} = \frac{\partial L}{\partial a_{ij}} " \
    r"\mathrm{GELU}'(h_{ij})"


@pytest.mark.parametrize("latex, holds", [
    (r"\frac{\partial L}{\partial h} = \frac{\partial L}{\partial a} \odot "
     r"\mathrm{GELU}'(h)", True),
    (GELU_GRAD + r", \quad \mathrm{GELU}'(x) = \Phi(x) + x\phi(x)", True),
    (GELU_GRAD + r", \quad \mathrm{GELU}'(x) = \Phi(x)", False),
    (GELU_GRAD + r", \quad \frac{d}{dx}\mathrm{GELU}(x) = \Phi(x) + x\phi(x)", True),
    (r"\frac{\partial L}{\partial h_{ij}} = \frac{\partial L}{\partial a_{ij}} "
     r"\tanh'(h_{ij})", False),
])
def test_derivative_forms_against_torch_autograd(latex, holds):
    """GELU'(h) built in or defined beside the gradient (Φ + xφ); a wrong definition's
    value and the stage's both recomputed with torch autograd."""
    torch = pytest.importorskip("torch")
    import tomllib
    judge = _judge(load_example(DATA / "gelu.toml"))
    found = judge.check(EquationClaim("t", "grad.layer1.ffn.hidden", latex, examples=1,
                                      source="t"))
    (link,) = found.links
    assert link.status == ("holds" if holds else "fails"), link.message
    if holds:
        return
    data = tomllib.loads((DATA / "gelu.toml").read_text())
    layer = data["layer"][0]

    def t(rows):
        return torch.tensor([[float(Fraction(str(v))) for v in r] for r in rows],
                            dtype=torch.float64)
    h = (t(data["inputs"]) @ t(layer["W_1"]) + t([layer["b_1"]])).requires_grad_()
    a = torch.nn.functional.gelu(h)
    f = a @ t(layer["W_2"]) + t([layer["b_2"]])
    (f * t(data["loss"]["gradient"])).sum().backward()
    da = t(data["loss"]["gradient"]) @ t(layer["W_2"]).T
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", link.message)
    i, j = int(m[1]), int(m[2])
    assert float(m[4]) == pytest.approx(float(h.grad[i, j]), rel=1e-9)
    x = h.detach()[i, j]
    local = torch.special.ndtr(x) if "Phi" in latex else 1 - torch.tanh(x) ** 2
    assert float(m[3]) == pytest.approx(float(da[i, j] * local), rel=1e-9)


ADAM_PAPER = (r"\begin{aligned} m_t &\leftarrow \beta_1 \cdot m_{t-1} + (1-\beta_1) \cdot g_t "
              r"\\ v_t &\leftarrow \beta_2 \cdot v_{t-1} + (1-\beta_2) \cdot g_t^2 \\ "
              r"\hat{m}_t &\leftarrow m_t/(1-\beta_1^t) \\ \hat{v}_t &\leftarrow "
              r"v_t/(1-\beta_2^t) \\ \theta_t &\leftarrow \theta_{t-1} - \alpha \cdot "
              r"\hat{m}_t/(\sqrt{\hat{v}_t} + \epsilon) \end{aligned}")


@pytest.mark.parametrize("latex, statuses", [
    (ADAM_PAPER, ["holds", "holds", "holds"]),
    (ADAM_PAPER.replace(r"(1-\beta_1) \cdot g_t", "g_t"), ["fails", "holds", "holds"]),
    (ADAM_PAPER.replace(r"\sqrt{\hat{v}_t} + \epsilon", r"\sqrt{\hat{v}_t + \epsilon}"),
     ["holds", "holds", "fails"]),
])
def test_the_adam_papers_algorithm_each_line_about_its_stage(latex, statuses):
    """Algorithm 1 of Kingma & Ba as printed: α the step size, g_t the gradient, m_t and
    v_t judged against the run's moments, m̂ and v̂ read into θ's update, every step."""
    from symformer.verify.claims import training_run
    path = DATA / "adam1.toml"
    example = load_example(path)
    checker = Checker(example, run=training_run(path))
    judge = Judge(example, checker.derivation, checker.causal, checker.run)
    found = judge.check(EquationClaim("t", "step2.theta", latex, examples=1, source="t"))
    assert [k.status for k in found.links] == statuses, [k.message for k in found.links]
    assert "(of step2.adam_m.theta)" in found.links[0].message


@pytest.mark.parametrize("stage, latex, where, status, note", [
    ("layer1.head1.weights", r"P = \exp(S - \mathrm{rowmax}(S)) ./ "
     r"\mathrm{rowsum}(\exp(S - \mathrm{rowmax}(S)))", {"P": "layer1.head1.weights"},
     "holds", None),
    ("layer1.add_norm1.mean", r"\mu = \mathrm{mean}(r)", {}, "holds", None),
    ("layer1.add_norm1.mean", r"\mu_i = \frac{1}{n}\sum_{j} r_{ij}", {}, "fails",
     'it holds with n the number of features (where = { n = "d_model" })'),
])
def test_row_functions_and_the_feature_count(stage, latex, where, status, note):
    judge = _judge(load_example(DATA / "addnorm_post.toml"))  # 3 tokens, 4 features
    found = judge.check(EquationClaim("t", stage, latex, examples=1, source="t",
                                      where=where))
    (link,) = found.links
    assert link.status == status, link.message
    assert note is None or note in link.notes


def test_the_four_index_jacobian_on_one_rows_stage(attn):
    """∂A_{ij}/∂S_{mn} on S.jacobian.row2: i = m = 2; the wrong form's stage value is
    torch autograd's."""
    torch = pytest.importorskip("torch")
    stage = "layer1.head1.weights.jacobian.row2"
    where = {"A": "layer1.head1.weights"}
    good = r"\frac{\partial A_{ij}}{\partial S_{mn}} = \delta_{im} A_{ij}(\delta_{jn} - A_{in})"
    assert status(attn, stage, good, where=where) == {"holds"}
    found = attn.check(EquationClaim("t", stage, good.replace("- A_{in}", "- A_{ij}"),
                                     examples=1, source="t", where=where))
    (link,) = found.links
    assert link.status == "fails"
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", link.message)
    s = torch.tensor(_softmax_row(2), dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, 0), s)
    assert float(m[4]) == pytest.approx(float(jacobian[int(m[1]), int(m[2])]), rel=1e-9)


@pytest.mark.parametrize("latex, status", [
    (r"W_t = W_{t-1} - \eta g_t", "holds"),
    (r"W \leftarrow W - \eta \nabla_W L", "holds"),
    (r"W \leftarrow W - \eta \nabla_{W} \mathcal{L}(W)", "holds"),
    (r"W_t = W_{t-1} + \eta g_t", "fails"),
])
def test_sgd_as_written(tmp_path, latex, status):
    """SGD on the built-in example: g_t the gradient the step reads, ∇_W L (before the
    update on the right of an arrow), at every step of the run."""
    from symformer.blocks.train import Run, learning_rate, options
    example = load_example()
    run = Run(learning_rate("1/10"), 2, "sgd", options("sgd"))
    checker = Checker(example, run=run)
    judge = Judge(example, checker.derivation, checker.causal, checker.run)
    stage = "step2.layer1.W_O"
    found = judge.check(EquationClaim("t", stage, latex, examples=1, source="t",
                                      where={"W": stage}))
    (link,) = found.links
    assert link.status == status, link.message
