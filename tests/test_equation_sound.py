"""Sound equation verdicts (issue "Check an equation as its author wrote it", item 1).

"holds" only when every entry of the named stage was compared, on the example and on
random examples; an index letter that is also a size is the left-hand side's index
(or, used as both, an error naming it); a training equation in t is judged at every
step; the juxtapositions authors write are read as they mean them.  Every
counterexample a failing verdict prints is recomputed here in float64 from the
example's own numbers (NumPy, math.erf), never by the engine.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import erf, sqrt
from pathlib import Path

import numpy as np
import pytest

from symformer import load_example
from symformer.errors import InputError
from symformer.verify.check import Checker
from symformer.verify.claims import training_run
from symformer.verify.equation_claims import INCOMPLETE, UNTRIED, EquationClaim, Judge

DATA = Path(__file__).parent / "data" / "equations"


def _judge(name: str) -> Judge:
    path = DATA / f"{name}.toml"
    example = load_example(path)
    checker = Checker(example, run=training_run(path))
    return Judge(example, checker.derivation, checker.causal, checker.run)


@pytest.fixture(scope="module")
def attn():
    return _judge("attn_model")


@pytest.fixture(scope="module")
def adam():
    return _judge("adam1")


def links(judge: Judge, stage: str, latex: str, examples: int = 1, **options):
    return judge.check(EquationClaim("t", stage, latex, examples=examples, source="t",
                                     **options)).links


def value_at(message: str) -> tuple[tuple[int, int], float]:
    m = re.search(r"at \[(\d+),(\d+)\] is (-?[0-9.e+-]+)", message)
    assert m, message
    return (int(m[1]), int(m[2])), float(m[3])


def _rows(table) -> np.ndarray:
    return np.array([[float(Fraction(str(v))) for v in row] for row in table])


def _attention(example_file: str) -> dict[str, np.ndarray]:
    """One head of tests/data/equations/attn_model.toml in float64."""
    import tomllib
    data = tomllib.loads((DATA / example_file).read_text())
    x = _rows(data["inputs"])
    head = data["layer"][0]["head"][0]
    q, k = x @ _rows(head["W_Q"]), x @ _rows(head["W_K"])
    s = q @ k.T / sqrt(q.shape[1])
    a = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    return {"scores": s, "weights": a}


# -- no verdict over fewer entries than the stage ----------------------------------------
@pytest.mark.parametrize("stage, latex", [
    ("layer1.head1.weights", r"\alpha_{in} = 42"),                 # n: the index here
    ("grad.layer1.head1.V", r"\frac{\partial L}{\partial v_{mn}} = 7"),
    ("layer1.head1.weights.jacobian.row1", r"J_{jn} = 42"),
])
def test_a_size_letter_alone_in_a_left_hand_index_is_the_index(attn, stage, latex):
    """The reproducers that "held at the 0 entries they cover": each now compares every
    entry and fails at [0,0] with the constant it claims."""
    (link,) = links(attn, stage, latex)
    assert link.status == "fails", link.message
    _, mine = value_at(link.message)
    assert mine == float(latex.rsplit("=", 1)[1])


def test_the_counterexample_is_the_stage_recomputed(attn):
    (link,) = links(attn, "layer1.head1.weights", r"\alpha_{in} = 42")
    theirs = float(re.search(r"the stage is (-?[0-9.e-]+)", link.message)[1])
    assert theirs == pytest.approx(_attention("attn_model.toml")["weights"][0, 0], rel=1e-9)


def test_a_letter_used_as_index_and_size_is_refused_naming_it(attn):
    latex = r"\alpha_{in} = \frac{e^{s_{in}}}{\sum_{m=0}^{n-1} e^{s_{im}}}"
    with pytest.raises(InputError, match=r"its index n is also the size n"):
        links(attn, "layer1.head1.weights", latex)


def test_a_line_covering_no_entry_is_not_holds(attn):
    (link,) = links(attn, "layer1.head1.weights", r"\alpha_{i,j+10} = 42")
    assert link.status == INCOMPLETE
    assert "covers none of the 9 entries" in link.message


def test_lines_covering_part_of_the_stage_are_incomplete(attn):
    """The even columns alone (a true statement about them) are not the stage."""
    (link,) = links(attn, "layer1.head1.weights",
                    r"\alpha_{i,2j} = \frac{e^{s_{i,2j}}}{\sum_m e^{s_{im}}}")
    assert link.status == INCOMPLETE and "covers only 6 of the 9 entries" in link.message


def test_no_random_example_is_not_holds(attn):
    (link,) = links(attn, "layer1.head1.weights", r"A = \mathrm{softmax}(S)", examples=0,
                    where={"A": "layer1.head1.weights"})
    assert link.status == UNTRIED and "examples = 0" in link.message


def test_a_wrong_equation_never_exits_0(tmp_path, capsys):
    from symformer.cli import main
    claims = tmp_path / "c.toml"
    claims.write_text("[[equation]]\nstage = \"layer1.head1.weights\"\n"
                      "latex = '\\alpha_{i,j+10} = 42'\n")
    assert main(["check", str(claims), str(DATA / "attn_model.toml")]) == 1
    assert "incomplete" in capsys.readouterr().out


# -- what authors juxtapose ------------------------------------------------------------
def test_d_alpha_is_the_gradient_of_alpha(attn):
    """FlashAttention's dS = P ∘ (dP − D) written with dα for dP."""
    latex = r"D = \operatorname{rowsum}(dO \circ O), \quad dS = P \circ (d\alpha - D)"
    (link,) = links(attn, "grad.layer1.head1.scores", latex,
                    where={"P": "layer1.head1.weights"})
    assert link.status == "holds", link.message


@pytest.fixture(scope="module")
def swiglu():
    return _judge("swiglu_nobias")


@pytest.mark.parametrize("latex, where", [
    (r"\phi = xW \odot \sigma(xW)", {"W": "layer1.W_gate"}),
    (r"\text{FFN}_{\text{SwiGLU}}(x, W, V, W_2) = \left(\mathrm{SiLU}(xW)\odot xV\right)W_2",
     {"W": "layer1.W_gate", "V": "layer1.W_1"}),
])
def test_sigma_of_a_product_and_a_named_subscript(swiglu, latex, where):
    """σ(xW) is σ of the product (not σ(x)·W); W_2 beside a bound W is the weight W_2."""
    stage = "layer1.ffn.gate_activation" if latex.startswith(r"\phi") else "layer1.ffn.output"
    (link,) = links(swiglu, stage, latex, where=where)
    assert link.status == "holds", link.message


def test_cdot_before_a_function_multiplies_entry_by_entry():
    """x · erf(x/√2) on rows is entry by entry: it fails at x erf(x/√2), computed here."""
    judge = _judge("gelu")
    latex = r"\text{GELU}(x) = x \cdot \text{erf}\left(\frac{x}{\sqrt{2}}\right)"
    (link,) = links(judge, "layer1.ffn.activation", latex)
    assert link.status == "fails"
    (i, j), mine = value_at(link.message)
    import tomllib
    data = tomllib.loads((DATA / "gelu.toml").read_text())
    layer = data["layer"][0]
    h = _rows(data["inputs"]) @ _rows(layer["W_1"]) + _rows([layer["b_1"]])
    assert mine == pytest.approx(h[i, j] * erf(h[i, j] / sqrt(2)), rel=1e-9)
    good = latex.replace(r"x \cdot \text{erf}", r"x \cdot 0.5\left(1+\text{erf}") + r"\right)"
    (link,) = links(judge, "layer1.ffn.activation", good)
    assert link.status == "holds", link.message


@pytest.mark.parametrize("name, stage", [
    ("rope4w", "layer1.head1.Q_rot"),
    ("gelu_tanh", "grad.layer1.ffn.hidden"),
])
def test_symformers_own_equation_reads_back(name, stage):
    """RoPE with d the head width (d_model 6, d_k 4) and GELU-tanh's backward with
    \\tanh^{2}: as ``export`` prints them, they hold."""
    from symformer.blocks import derive
    from symformer.equations.stage import equation_lines
    judge = _judge(name)
    g = derive(judge.example)
    if stage.startswith("grad."):
        from symformer.blocks.backward import stage_of
        stage_of(g, stage)
    lines = equation_lines(g[stage])
    latex = r" \\ ".join(line.latex for line in lines[:2]) if name == "rope4w" else \
        ", \\quad ".join(line.latex for line in lines)
    for link in links(judge, stage, latex):
        assert link.status == "holds", link.message


# -- training equations: t is the step, judged at every step ---------------------------
def _adam_float(steps: int, lr=0.1, b1=0.9, b2=0.99, eps=0.1, theta=1.0):
    """Adam on (θ − 3)² in float64: θ_t, m_t, v_t for t = 0..steps."""
    out = [(theta, 0.0, 0.0)]
    m = v = 0.0
    for t in range(1, steps + 1):
        g = 2 * (theta - 3)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        theta = theta - lr * (m / (1 - b1 ** t)) / (sqrt(v / (1 - b2 ** t)) + eps)
        out.append((theta, m, v))
    return out


def test_beta_to_the_t_is_a_power_of_the_step(adam):
    (link,) = links(adam, "step3.theta", r"\theta = \beta_2^t")
    assert link.status == "fails"
    assert value_at(link.message)[1] == pytest.approx(0.99 ** 3, rel=1e-12)
    (link,) = links(adam, "step3.theta", r"\theta = 0.99^{t}")
    assert value_at(link.message)[1] == pytest.approx(0.99 ** 3, rel=1e-12)


ADAM = r"\theta_t = \theta_{t-1} - \eta \frac{\hat{m}_t}{\sqrt{\hat{v}_t} + \epsilon}"
HATS = {r"\hat{m}": "step2.adam_mhat.theta", r"\hat{v}": "step2.adam_vhat.theta"}


def test_the_docs_adam_step_holds_at_every_step(adam):
    latex = r"W = W_0 - \eta \frac{m/(1-\beta_1^t)}{\sqrt{v/(1-\beta_2^t)} + \epsilon}"
    where = {"W_0": "step1.theta", "m": "step2.adam_m.theta", "v": "step2.adam_v.theta"}
    (link,) = links(adam, "step2.theta", latex, where=where)
    assert link.status == "holds", link.message
    assert "steps 1 to 4" in link.message


@pytest.mark.parametrize("latex, where, status", [
    (ADAM, HATS, "holds"),
    (r"\theta_{t+1} = \theta_t - \eta \frac{\hat{m}_{t+1}}{\sqrt{\hat{v}_{t+1}} + \epsilon}",
     HATS, "holds"),
    (r"m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t", {"g": "grad.step1.theta"}, "holds"),
    (r"\theta_t = 12345", {}, "fails"),
])
def test_adam_as_its_authors_write_it(adam, latex, where, status):
    stage = "step2.adam_m.theta" if latex.startswith("m_t") else "step2.theta"
    (link,) = links(adam, stage, latex, where=where)
    assert link.status == status, link.message


def test_epsilon_inside_the_root_fails_with_the_float64_value(adam):
    (link,) = links(adam, "step2.theta", ADAM.replace(r"} + \epsilon}", r" + \epsilon}}"),
                    where=HATS)
    assert link.status == "fails"
    run = _adam_float(2)
    (theta1, _, _), (_, m, v) = run[1], run[2]
    mine = theta1 - 0.1 * (m / (1 - 0.9 ** 2)) / sqrt(v / (1 - 0.99 ** 2) + 0.1)
    assert value_at(link.message)[1] == pytest.approx(mine, rel=1e-9)


def test_a_bias_correction_written_at_one_step_fails_at_another(adam):
    """v̂_t = v_t/(1 − β₂²) agrees at step 2 only: judged at every step, it fails at 1."""
    (link,) = links(adam, "step2.adam_vhat.theta", r"\hat{v}_t = v_t/(1-\beta_2^2)")
    assert link.status == "fails" and "at step 1" in link.message
    _, _, v1 = _adam_float(1)[1]
    assert value_at(link.message)[1] == pytest.approx(v1 / (1 - 0.99 ** 2), rel=1e-9)


def test_an_attention_table_example_is_redrawn_for_random_examples(tmp_path):
    """Given Q, K, V (an [attention] table) and dL/dO: the random examples redraw them,
    so dV = A^T dO holds (not "on this example only") and dV = A dO fails."""
    path = tmp_path / "given.toml"
    path.write_text('tokens = ["a", "b", "c"]\ncausal = true\n[attention]\n'
                    'Q = [[1, 0], [0, 1], [1, 1]]\nK = [[1, 0], [0, 1], [1, -1]]\n'
                    'V = [[1, 2], [3, 4], [5, 6]]\n[loss]\nkind = "upstream"\n'
                    'stage = "output"\ngradient = [[1, 0], [0, 1], [1, 1]]\n')
    example = load_example(path)
    checker = Checker(example)
    judge = Judge(example, checker.derivation, checker.causal)
    (link,) = links(judge, "grad.V", r"dV = A^\top dO", examples=2, where={"A": "weights"})
    assert link.status == "holds" and "2 random examples" in link.message
    (link,) = links(judge, "grad.V", r"dV = A dO", where={"A": "weights"})
    assert link.status in ("fails", "example only")
