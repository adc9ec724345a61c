"""The intermediate stages lessons print, exact claimed values, and a rule's printed form.

References, independent of the engine:

* hand-derived values on the ln 2 example of ``test_irrational_inputs`` (scores
  [ln 2, 0, 0], weights [1/2, 1/4, 1/4], head output sqrt(2)/4);
* the cross-entropy rule with positions without a target written -w_i (not -1 w_i);
* PyTorch: ``torch.autograd.functional.jacobian`` of softmax for a row's Jacobian,
  ``cross_entropy(reduction="none")`` with ``ignore_index`` for per-position losses;
* the independent float64 forward pass (``tests/float_reference.py``) for the products
  inside the dot products and the per-position squared errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from fractions import Fraction

import numpy as np
import pytest
from float_reference import float_forward

from symformer import derive
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.equations.stage import stage_equation
from symformer.errors import InputError
from symformer.example.fields import Where
from symformer.example.loader import parse_example
from symformer.example.stages import parse_stages
from symformer.fill import fill
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_toml, validate
from tests.test_irrational_inputs import LN2


def torch_or_skip():
    """PyTorch, the reference of two tests here; skipped without it (not in the test
    extra: the README's test command runs on a machine without it)."""
    return pytest.importorskip("torch", reason="PyTorch is these tests' reference "
                                               "(pip install torch, the CPU wheel)")


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``symformer ARGV`` in process: (exit status, stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def ln2():
    example = parse_example(LN2, "ln2.toml")
    return example, derive(example)


def verdicts(example, g, text: str) -> dict[str, list[bool]]:
    claims = claims_from_toml(text, "claims.toml")
    validate(claims, g)
    return {r.claim.name: [e.ok for e in r.entries] for r in Checker(example).check_all(claims)}


def test_exact_irrational_claims(ln2):
    """ "log(2)" is right only where the value is exactly ln 2; 1e-30 off is wrong."""
    found = verdicts(*ln2, '''
[[claim]]
name = "scores"
stage = "layer1.head1.scores"
rows = [0]
values = [["log(2)", "0", "0.0"]]
[[claim]]
name = "output"
stage = "layer1.head1.output"
entry = [0, 0]
values = "sqrt(2)/4"
[[claim]]
name = "output off"
stage = "layer1.head1.output"
entry = [0, 0]
values = "sqrt(2)/4 + 1/10^30"
[[claim]]
name = "weights"
stage = "layer1.head1.weights"
rows = [0]
significant = 3
values = [["exp(-log(2))", 0.25, "exp(-log(4))"]]
''')
    assert found == {"scores": [True, True, True], "output": [True], "output off": [False],
                     "weights": [True, True, True]}


def test_irrational_claim_refused_politely(ln2):
    with pytest.raises(InputError, match="not a number"):
        claims_from_toml('[[claim]]\nstage = "output"\nentry = [0, 0]\n'
                         'values = "__import__(1)"\n', "claims.toml")


# -- the [stages] table's side stages ---------------------------------------------------

def _with(example, **asked):
    """``example`` with a [stages] table asking for ``asked``."""
    return dataclasses.replace(example, stages=parse_stages(asked, Where("test.toml")))


def mid(ball) -> float:
    return float(ball.mid())


def test_softmax_jacobian_against_torch(builtin):
    """J_jk = α_j(δ_jk − α_k) equals PyTorch's autograd Jacobian of softmax at the
    independent float64 scores, for every row of a head."""
    torch = torch_or_skip()
    g = derive(_with(builtin, jacobian=["layer1.head2.weights"]))
    scores = float_forward(builtin)["layer1.head2.scores"]
    balls = g.evaluate(128)
    for r in range(len(scores)):
        want = torch.autograd.functional.jacobian(
            lambda s: torch.softmax(s, dim=0), torch.tensor(scores[r], dtype=torch.float64))
        got = balls[f"layer1.head2.weights.jacobian.row{r}"]
        assert np.allclose([[mid(b) for b in row] for row in got], want.numpy(),
                           rtol=0, atol=1e-12), r


def test_softmax_jacobian_masked_row_exact():
    """Causal row 1 of softmax([ln 2, 0, 0]) attends to [1/2, 1/2, 0]: the Jacobian is
    [[1/4, -1/4, 0], [-1/4, 1/4, 0], [0, 0, 0]] exactly (hand-derived)."""
    example = _with(parse_example("causal = true\n" + LN2, "ln2.toml"),
                    jacobian=["layer1.head1.weights[1]"])
    g = derive(example)
    stage = g["layer1.head1.weights.jacobian.row1"]
    assert stage.rows == stage.cols == ("a", "b", "c")
    want = [[Fraction(1, 4), Fraction(-1, 4), 0], [Fraction(-1, 4), Fraction(1, 4), 0],
            [0, 0, 0]]
    assert [[g.exact_rational(stage.name, i, j) for j in range(3)] for i in range(3)] == want
    facts = stage.op.facts(stage)  # prove's: symmetric, rows sum to 0
    assert [f.status for f in facts] == ["proved", "proved"], facts


def test_dot_products_against_float_reference(builtin):
    """P_jc = q_c k_{j,c} for query 1, from the independent float64 Q and K; each row
    adds up to the score."""
    g = derive(_with(builtin, products=["layer1.head1.raw_scores[1]"]))
    ref = float_forward(builtin)
    got = [[mid(b) for b in row]
           for row in g.evaluate(128)["layer1.head1.raw_scores.products.row1"]]
    want = ref["layer1.head1.Q"][1] * ref["layer1.head1.K"]
    assert np.allclose(got, want, rtol=0, atol=1e-12)
    assert np.allclose(np.sum(got, axis=1), ref["layer1.head1.raw_scores"][1], atol=1e-12)


def test_per_position_mse_against_float_reference(builtin):
    """L_i = sum_j (z_ij - T_ij)^2 from the independent float64 output, and the loss is
    their sum over n d (the [loss] mean)."""
    g = backward(derive(_with(builtin, per_position_loss=True)))
    z = float_forward(builtin)["output"]
    T = np.array([[float(v) for v in row] for row in builtin.loss.target.tolist()])
    balls = g.evaluate(128)
    got = [mid(row[0]) for row in balls["loss.per_position"]]
    assert np.allclose(got, np.sum((z - T) ** 2, axis=1), rtol=1e-12, atol=0)
    assert np.isclose(sum(got) / z.size, mid(balls["loss"][0][0]), rtol=1e-12)


LM = LN2.replace('[loss]\nkind = "mse"\ntarget = [["log(2)"], [0], ["1/2"]]',
                 '[lm_head]\nW_vocab = [[1, 0, "log(2)"]]\n\n[loss]\nkind = "cross_entropy"\n'
                 'targets = ["c", "", "a"]\n\n[stages]\nper_position_loss = true\n')


def test_per_position_cross_entropy_against_torch():
    """-log p of each target, 0 at the position without one: PyTorch's
    cross_entropy(reduction="none", ignore_index) on the float64 logits of the
    hand-derived outputs (sqrt(2)/4, sqrt(2)/6, sqrt(2)/6); the mean over the two
    targets is the loss."""
    torch = torch_or_skip()
    g = backward(derive(parse_example(LM, "lm.toml")))
    z = np.sqrt(2) * np.array([[1 / 4], [1 / 6], [1 / 6]])  # hand-derived outputs
    logits = torch.tensor(z @ np.array([[1.0, 0.0, np.log(2.0)]]), dtype=torch.float64)
    want = torch.nn.functional.cross_entropy(logits, torch.tensor([2, -100, 0]),
                                             reduction="none")
    balls = g.evaluate(128)
    got = [mid(row[0]) for row in balls["loss.per_position"]]
    assert np.allclose(got, want.numpy(), rtol=1e-12, atol=0)
    assert g.exact_rational("loss.per_position", 1, 0) == 0  # no target: exactly 0
    assert np.isclose(mid(balls["loss"][0][0]), (got[0] + got[2]) / 2, rtol=1e-12)
    lines = [line.latex for line in stage_equation(g["loss.per_position"]).lines()]
    assert lines == [r"L_{i} = -w_{i} \log p_{i,t_{i}}"], lines


def test_ce_rule_without_target_reads_minus_w():
    """The backward rule of a cross-entropy with a position without a target is written
    -w_i / (m p_ij), not -1 w_i (the loss's own gradient 1 dropped with its sign kept)."""
    g = backward(derive(parse_example(LM, "lm.toml")))
    (line,) = stage_equation(g["grad.probabilities"]).lines()
    assert "-1" not in line.plain and "-w[i] / (m * p[i, j])" in line.plain, line.plain


def test_lesson_stages_claimable_listed_and_refused_politely(tmp_path):
    """The new stages are in derive --list, claimable, and a bad [stages] entry is one
    line with exit status 2."""
    example = tmp_path / "lm.toml"
    example.write_text(LM.replace("per_position_loss = true",
                                  'per_position_loss = true\njacobian = ["probabilities[0]"]'))
    claims = tmp_path / "claims.toml"
    claims.write_text('[[claim]]\nstage = "loss.per_position"\nrows = [1]\nvalues = [[0]]\n'
                      'significant = 2\n[[claim]]\nstage = "probabilities.jacobian.row0"\n'
                      'entry = [1, 1]\nvalues = 0.2\n')
    code, out = run_cli(["check", str(claims), str(example)])
    assert code == 0 and "2 of 2 numbers correct" in out, out
    code, out = run_cli(["derive", str(example), "--list"])
    assert "probabilities.jacobian.row0" in out and "loss.per_position" in out
    for bad, message in [('jacobian = ["layer1.head1.Q"]', "not a softmax stage"),
                         ('products = ["layer1.head1.raw_scores[7]"]', "has 3 rows"),
                         ('jacobian = ["nope"]', "unknown stage"),
                         ("per_position_loss = 1", "true or false")]:
        example.write_text(LM.replace("per_position_loss = true", bad))
        code, out = run_cli(["derive", str(example)])
        assert code == 2 and message in out and "Traceback" not in out, (bad, out)


def test_fill_takes_loss_and_lesson_stages():
    """fill appends the backward pass only when a placeholder names a loss stage; the
    values are hand-derived (J_01 = -α_0 α_1 = -1/2 · 1/4, no target: 0, dL/dL = 1)."""
    g = derive(parse_example(LM.replace("per_position_loss = true",
                                        'per_position_loss = true\n'
                                        'jacobian = ["layer1.head1.weights[0]"]'), "lm.toml"))
    assert "grad.loss" not in g
    text = fill("{{ layer1.head1.weights.jacobian.row0[0, 1] | decimals(4) }} "
                "{{ loss.per_position[1, 0] }} {{ grad.loss[0, 0] }}", g, "markdown")
    assert text == "-0.1250 0.000 1.000"  # -1/2 * 1/4; no target: 0; dL/dL = 1


@pytest.mark.parametrize(("stage", "value"), [
    ("layer1.head1.weights.jacobian.row2", None),
    ("layer1.head2.raw_scores.products.row0", "0.75"),  # q_0 = (1,1), k_0 = (3/4,3/2)
    ("layer1.add_norm1.output_mean", "0.000"),  # gamma = 1, beta = 0: mean 0 exactly
    ("layer1.add_norm1.output_variance", None),
    ("loss.per_position", None)])
def test_a_lesson_stage_not_asked_for_is_added_on_demand(tmp_path, stage, value):
    """A claim or a placeholder on a lesson stage of an example without [stages] adds
    it (blocks/side_stages.py): judged, and filled with the same number."""
    notes = tmp_path / "notes.md"
    notes.write_text(f"{{{{ {stage}[0, 0] }}}}\n")
    code, out = run_cli(["fill", str(notes), "--out", str(tmp_path / "o"), "--decimals", "3"])
    assert code == 0, out
    printed = (tmp_path / "o").read_text().strip()
    claims = tmp_path / "claims.toml"
    claims.write_text(f'[[claim]]\nstage = "{stage}"\nentry = [0, 0]\n'
                      f'values = {value or printed}\n')
    code, out = run_cli(["check", str(claims)])
    assert code == 0 and "all right" in out, out


GIVEN_QKV = """
tokens = ["a", "b", "c"]
causal = true
[attention]
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 0], [0, 1], [1, -1]]
V = [[1, 2], [3, 4], [5, 6]]
[stages]
jacobian = ["weights[2]"]
"""


def test_jacobian_of_given_attention_weights():
    """An attention-by-hand lesson asks for a row's Jacobian too: row 2's scores are
    (1, 1, 0)/√2, so α = (e^a, e^a, 1)/(2e^a + 1) with a = 1/√2, and J = diag(α) − ααᵀ."""
    example = parse_example(GIVEN_QKV, "qkv.toml")
    got = derive(example).evaluate(128)["weights.jacobian.row2"]
    a = np.exp(1 / np.sqrt(2))
    alpha = np.array([a, a, 1.0]) / (2 * a + 1)
    expected = np.diag(alpha) - np.outer(alpha, alpha)
    assert np.allclose([[mid(b) for b in row] for row in got], expected, rtol=0, atol=1e-15)
