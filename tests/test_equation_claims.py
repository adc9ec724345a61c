"""Equations as claims (symformer.verify.equation_claims): an author's LaTeX equation
checked at every entry of its stage, on the example and on random examples.

Correct textbook equations hold; published wrong ones fail with a true counterexample
-- both numbers of the message are recomputed here in float64 NumPy from the
textbook formulas (tests/float_reference.py, float_backward.py, and a small forward
and backward pass written out below), never by the engine; random mutations of
correct equations (and of the project's own displayed equations) all fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from float_backward import float_backward
from float_reference import as_float, float_forward
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import load_example
from symformer.blocks.cost import check_work
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import builtin_text
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge, equations_from_document

DATA = Path(__file__).parent / "data" / "equations"
SQUARE = DATA / "square.toml"


def _judge(example) -> Judge:
    checker = Checker(example)
    return Judge(example, checker.derivation, checker.causal)


@pytest.fixture(scope="module")
def builtin():
    return _judge(load_example())


@pytest.fixture(scope="module")
def square():
    return _judge(load_example(SQUARE))


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "lm.toml"
    path.write_text(Path(load_example("gpt2_style").source).read_text()
                    + '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n')
    return _judge(load_example(path))


def verdict(judge: Judge, stage: str, latex: str, examples: int = 2, **options):
    """The links of one claimed equation."""
    return judge.check(EquationClaim("test", stage, latex, examples=examples,
                                     source="test", **options)).links


# -- correct equations hold -----------------------------------------------------------
TEXTBOOK = [
    ("layer1.head1.weights", r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_{m=0}^{n-1} e^{s_{im}}}", {}),
    ("layer1.head1.weights", r"\alpha_j = \frac{\exp(s_j)}{\sum_{m=1}^{n} \exp(s_m)}", {}),
    ("layer1.head1.weights", r"A = \operatorname{softmax}(S)", {"A": "layer1.head1.weights"}),
    ("layer1.head1.scores", r"s_{ij} = \frac{1}{\sqrt{d_k}} \sum_{c} q_{ic} k_{jc}", {}),
    ("layer1.head1.scores", r"S = QK^\top/\sqrt{d_k}", {}),
    ("layer1.head1.scores", r"s_{ij} = \frac{\mathbf{q}_i \cdot \mathbf{k}_j}{\sqrt{d_k}}", {}),
    ("layer1.head1.Q", r"Q = XW_Q", {}),
    ("layer1.head1.Q", r"q = x W_Q", {}),
    ("layer1.head1.Q", r"q_{ic} = \sum_m x_{im} W^{Q}_{mc}", {}),
    ("layer1.head2.Q", r"q_{ic} = \sum_{m=1}^{d} x_{im} (W_Q)_{mc}", {}),
    ("layer1.add_norm1.mean", r"\mu = \frac{1}{d}\sum_j r_j", {}),
    ("layer1.add_norm1.variance", r"\sigma^2 = \frac{1}{d}\sum_{j=0}^{d-1} (r_j - \mu)^2", {}),
    ("layer1.add_norm1", r"y_j = \gamma_j \frac{r_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}"
                         r" + \beta_j", {}),
    ("layer1.ffn.activation", r"a_{ij} = \max(0, h_{ij}) = h_{ij}\,\mathbb{1}[h_{ij} > 0]", {}),
    ("layer1.ffn.hidden", r"H = Y W_1 + b_1", {}),
    ("layer1.ffn.output", r"f_{ij} = \sum_{m} a_{im} (W_2)_{mj} + (b_2)_j", {}),
    ("grad.layer1.head1.V", r"dV = A^\top dO", {"A": "layer1.head1.weights"}),
    ("grad.layer1.head1.K", r"dK = dS^\top Q/\sqrt{d_k}", {}),
    ("grad.layer1.head1.scores", r"\frac{\partial L}{\partial s_{ij}} = \alpha_{ij}\left("
     r"\frac{\partial L}{\partial \alpha_{ij}} - \sum_m \alpha_{im}"
     r"\frac{\partial L}{\partial \alpha_{im}}\right)", {}),
    ("positional_encoding", r"\begin{align} PE_{pos,2i} &= \sin(pos/10000^{2i/d}) \\ "
     r"PE_{pos,2i+1} &= \cos(pos/10000^{2i/d}) \end{align}", {}),
    ("loss", r"L = \frac{1}{nd}\sum_{i}\sum_{j} (z_{ij} - T_{ij})^2", {}),
    ("layer1.head1.output", r"O = \mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right) V",
     {}),
    ("layer1.ffn.output", r"f = \max(0, y W_1 + b_1) W_2 + b_2", {}),
    ("grad.layer1.b_1", r"\frac{\partial L}{\partial b_1} = \sum_i \frac{\partial L}"
     r"{\partial h_i}", {}),
    ("grad.layer1.ffn.hidden", r"\frac{\partial L}{\partial h_{ij}} = \frac{\partial L}"
     r"{\partial a_{ij}} \mathbb{1}_{h_{ij} > 0}", {}),
    ("layer1.head1.output", r"\text{Attention}(Q, K, V) = \text{softmax}\left("
     r"\frac{QK^T}{\sqrt{d_k}}\right)V", {}),
    ("layer1.ffn.output", r"\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2",
     {"x": "layer1.add_norm1"}),
    ("layer1.head1.weights", r"\mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}",
     {"x": "layer1.head1.scores"}),
    ("grad.layer1.head1.scores", r"\frac{\partial L}{\partial s_{ij}} = \sum_k \frac{"
     r"\partial L}{\partial \alpha_{ik}} \alpha_{ik} (\delta_{kj} - \alpha_{ij})", {}),
    # a function's argument is what the stage reads (no where needed)
    ("layer1.ffn.output", r"\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2", {}),
    ("layer1.head1.weights", r"\mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}", {}),
    # an indicator over a matrix, entry by entry
    ("grad.layer1.W_1", r"\frac{\partial L}{\partial W_1} = Y^\top \left(\frac{\partial L}"
     r"{\partial A} \odot \mathbb{1}[H > 0]\right)", {}),
]


@pytest.mark.parametrize("stage, latex, where", TEXTBOOK)
def test_textbook_equations_hold(builtin, stage, latex, where):
    for link in verdict(builtin, stage, latex, where=where):
        assert link.status == "holds", link.message
        assert "of this example and of 2 random examples (certified to 50 digits)" \
            in link.message


def test_column_vectors_as_the_claim_states(square):
    (link,) = verdict(square, "layer1.head1.Q", r"\mathbf{q} = W_Q^\top \mathbf{x}",
                      vectors="column")
    assert link.status == "holds"
    (link,) = verdict(square, "layer1.head1.Q", r"\mathbf{q} = W_Q^\top \mathbf{x}")
    assert link.status == "fails" and link.notes == [
        'it holds with column vectors (vectors = "column")']


def test_the_cross_entropy_with_target_ids(language_model):
    t = {"t": "loss.target"}
    (link,) = verdict(language_model, "loss", r"L = -\frac{1}{n}\sum_{i=1}^{n} \log p_{i,t_i}",
                      where=t)
    assert link.status == "holds"
    (link,) = verdict(language_model, "loss", r"L = -\sum_{i} \log p_{i,t_i}", where=t)
    assert link.status == "fails" and "it is 3 times the stage" in link.notes[-1]


def test_the_softmax_cross_entropy_gradient(language_model):
    y = {"y": "loss.target"}
    (link,) = verdict(language_model, "grad.logits",
                      r"\frac{\partial L}{\partial \ell_{ij}} = \frac{1}{n}(p_{ij} - y_{ij})",
                      where=y)
    assert link.status == "holds"
    (link,) = verdict(language_model, "grad.logits",
                      r"\frac{\partial L}{\partial \ell_{ij}} = p_{ij} - y_{ij}", where=y)
    assert link.status == "fails" and "it is 3 times the stage at every entry" in link.notes[0]


# -- wrong published equations fail, with a true counterexample -------------------------
def _numbers(message: str) -> tuple[tuple[int, int], float, float]:
    m = re.search(r"at \[(\d+),(\d+)\] is (\S+), the stage is (\S+)$", message)
    assert m, message
    return (int(m[1]), int(m[2])), float(m[3]), float(m[4])


def square_reference() -> dict[str, np.ndarray]:
    """tests/data/equations/square.toml by hand: one head, RMSNorm, mse."""
    ex = load_example(SQUARE)
    (layer,) = ex.layers
    (head,) = layer.heads
    x = as_float(ex.embeddings)
    Wq, Wk, Wv = (as_float(w) for w in (head.W_Q, head.W_K, head.W_V))
    gamma, T = as_float(layer.gamma_1), as_float(ex.loss.target)
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    s = q @ k.T / np.sqrt(3)
    a = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    r = x + a @ v
    rms = np.sqrt((r ** 2).mean(axis=1, keepdims=True) + 0.01)
    z = gamma * r / rms
    g = 2 * (z - T) / z.size
    dr = (gamma * g - r * (gamma * g * r).sum(axis=1, keepdims=True) / (3 * rms ** 2)) / rms
    da = dr @ v.T
    ds = a * (da - (da * a).sum(axis=1, keepdims=True))
    return {"q": q, "r": r, "rms": rms, "g": g, "gamma": gamma, "dr": dr, "ds": ds,
            "dk": ds.T @ q / np.sqrt(3)}


def test_flashattention2_dk_fails_with_a_true_counterexample(square):
    """FlashAttention-2 (Dao, 2023) prints dK = Q dS^T; it is dS^T Q (here with the
    scale, 1/sqrt(d_k))."""
    (link,) = verdict(square, "grad.layer1.head1.K", r"dK = Q\, dS^\top/\sqrt{d_k}")
    assert link.status == "fails"
    (i, j), mine, stage = _numbers(link.message)
    ref = square_reference()
    wrong = ref["q"] @ ref["ds"].T / np.sqrt(3)
    assert mine == pytest.approx(wrong[i, j], rel=1e-9)
    assert stage == pytest.approx(ref["dk"][i, j], rel=1e-9)
    (link,) = verdict(square, "grad.layer1.head1.K", r"dK = dS^\top Q/\sqrt{d_k}")
    assert link.status == "holds"


RMS_GRADIENT = (r"\frac{\partial L}{\partial r_j} = \frac{1}{\mathrm{rms}}\left(\gamma_j g_j"
                r" - \frac{r_j}{d\,\mathrm{rms}^2}\sum_k \gamma_{K} g_k r_k\right)")


def test_rmsnorm_gradient_with_the_weight_on_the_wrong_index_fails(square):
    where = {"g": "grad.layer1.add_norm1"}
    (link,) = verdict(square, "grad.layer1.add_norm1.sum", RMS_GRADIENT.replace("K", "k"),
                      where=where)
    assert link.status == "holds", link.message
    (link,) = verdict(square, "grad.layer1.add_norm1.sum", RMS_GRADIENT.replace("K", "j"),
                      where=where)
    assert link.status == "fails"
    (i, j), mine, stage = _numbers(link.message)
    ref = square_reference()
    r, rms, g, gamma = ref["r"], ref["rms"], ref["g"], ref["gamma"]
    wrong = (gamma * g - r * gamma * (g * r).sum(axis=1, keepdims=True) / (3 * rms ** 2)) / rms
    assert mine == pytest.approx(wrong[i, j], rel=1e-9)
    assert stage == pytest.approx(ref["dr"][i, j], rel=1e-9)


def test_rmsnorm_wrong_index_passes_at_gamma_one_but_not_on_random_examples(tmp_path):
    """With gamma = 1 (the published autograd check's setting) the wrong index agrees
    at every entry of the example; the random examples (gains redrawn) refute it."""
    path = tmp_path / "ones.toml"
    path.write_text(SQUARE.read_text().replace('gamma_1 = ["3/2", "1/2", 1]',
                                               "gamma_1 = [1, 1, 1]"))
    judge = _judge(load_example(path))
    (link,) = verdict(judge, "grad.layer1.add_norm1.sum", RMS_GRADIENT.replace("K", "j"),
                      where={"g": "grad.layer1.add_norm1"})
    assert link.status == "example only"
    assert "agrees at all 9 entries of this example but not on random example 1" \
        in link.message


LN_BACKWARD = (r"\frac{\partial L}{\partial r'_j} = \frac{1}{\tilde\sigma'}\left(\gamma'_j g_j"
               r" MEAN - \frac{r'_j - \mu'}{\tilde\sigma'}\frac{1}{d}\sum_k \gamma'_k g_k"
               r"\frac{r'_k - \mu'}{\tilde\sigma'}\right)")  # the second norm's: primed


def test_layernorm_backward_missing_the_sum_of_g_fails(tmp_path):
    """The built-in example with a target whose first row does not sum to 0 (with the
    shipped one, sum_k g_k = 0 in every row and the missing term cannot show there)."""
    path = tmp_path / "target.toml"
    path.write_text(builtin_text().replace("[1, -1, 1, -1],  # I\n", "[1, 0, 1, -1],  # I\n", 1))
    example = load_example(path)
    builtin = _judge(example)
    where = {"g": "grad.layer1.add_norm2"}
    correct = LN_BACKWARD.replace("MEAN", r"- \frac{1}{d}\sum_k \gamma'_k g_k")
    (link,) = verdict(builtin, "grad.layer1.add_norm2.sum", correct, where=where)
    assert link.status == "holds", link.message
    (link,) = verdict(builtin, "grad.layer1.add_norm2.sum", LN_BACKWARD.replace("MEAN", ""),
                      where=where)
    assert link.status == "fails"
    (i, j), mine, stage = _numbers(link.message)
    out, grads = float_forward(example), float_backward(example)
    layer = example.layers[0]
    c = out["layer1.add_norm2.sum"] - out["layer1.add_norm2.mean"]
    D = np.sqrt(out["layer1.add_norm2.variance"] + float(layer.eps))
    G = as_float(layer.gamma_2) * grads["grad.layer1.add_norm2"]
    wrong = G / D - c * (G * c).sum(axis=1, keepdims=True) / (4 * D ** 3)
    assert mine == pytest.approx(wrong[i, j], rel=1e-8)
    assert stage == pytest.approx(grads["grad.layer1.add_norm2.sum"][i, j], rel=1e-8)


def test_sinusoidal_encoding_with_the_cosine_exponent_wrong_fails(builtin):
    chain = (r"\begin{align} PE_{pos,2i} &= \sin(pos/10000^{2i/d}) \\ "
             r"PE_{pos,2i+1} &= \cos(pos/10000^{(2i+1)/d}) \end{align}")
    first, second = verdict(builtin, "positional_encoding", chain)
    assert first.status == "holds" and second.status == "fails"
    (i, j), mine, stage = _numbers(second.message)
    assert j % 2 == 1
    assert mine == pytest.approx(np.cos(i / 10000 ** (j / 4)), rel=1e-9)
    assert stage == pytest.approx(float_forward(load_example())["positional_encoding"][i, j],
                                  rel=1e-9)


def test_another_convention_and_another_index_base_are_named(builtin):
    (link,) = verdict(builtin, "layer1.add_norm1.variance",
                      r"\sigma^2 = \frac{1}{d-1}\sum_j (r_j - \mu)^2")
    assert link.status == "fails"
    assert "it holds under another convention: unbiased LayerNorm" in link.notes
    (link,) = verdict(builtin, "layer1.add_norm1.mean",
                      r"\mu = \frac{1}{d}\sum_{j=1}^{d} r_{j-1}")
    assert link.status == "fails" and "outside its 4x4 stage" in link.message
    assert "it holds with its indices counted from 0" in link.notes


def test_holds_only_on_this_example(tmp_path):
    """W_Q = W_K makes the scores symmetric: s_ij written with q_j and k_i agrees at
    every entry, and a random example (other weights) shows it is wrong."""
    text = SQUARE.read_text()
    wq = re.search(r"W_Q = (.*)", text)[1]
    path = tmp_path / "symmetric.toml"
    path.write_text(re.sub(r"W_K = .*", f"W_K = {wq}", text))
    judge = _judge(load_example(path))
    (link,) = verdict(judge, "layer1.head1.scores",
                      r"s_{ij} = \frac{1}{\sqrt{d_k}}\sum_c q_{jc} k_{ic}")
    assert link.status == "example only" and "random example 1" in link.message
    assert _numbers(link.message)


@pytest.mark.parametrize("stage, latex, message", [
    # b_2 dropped: the builtin's FFN is b_2 exactly (every hidden unit is clipped)
    ("layer1.ffn.output", r"\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2",
     "your FFN at [0,0] is 0, the stage is 0.1"),
    # ReLU's derivative dropped: nonzero where every unit is clipped
    ("grad.layer1.W_1", r"\frac{\partial L}{\partial W_1} = Y^\top \frac{\partial L}"
     r"{\partial A}", "the stage is 0"),
])
def test_function_arguments_and_matrix_indicators_fail_when_wrong(builtin, stage, latex,
                                                                   message):
    (link,) = verdict(builtin, stage, latex)
    assert link.status == "fails" and message in link.message
    # the failing value is named by the equation's own left-hand side, W_1 kept
    assert link.message.startswith("your FFN at" if "FFN" in latex else "your dW_{1} at")


# -- mutations of correct equations all fail -----------------------------------------
def _mutants() -> list[tuple[str, str, dict, str]]:
    """(stage, mutated latex, where, what was changed) for every equation of TEXTBOOK
    and every place a mutation applies: a transpose dropped, a 1/n-like factor dropped,
    two indices of one symbol swapped."""
    out = []
    for stage, latex, where in TEXTBOOK:
        if "positional" in stage:
            continue
        for pattern, replacement, what in (
                (r"\^\\top", "", "a dropped transpose"),
                (r"/\\sqrt\{d_k\}|\\frac\{1\}\{\\sqrt\{d_k\}\}", "", "a dropped 1/sqrt(d_k)"),
                (r"\\frac\{1\}\{n?d\}", "", "a dropped 1/n"),
                (r"_\{([a-z])([a-z])\}", r"_{\2\1}", "swapped indices")):
            rhs_start = latex.index("=")
            for m in re.finditer(pattern, latex[rhs_start:]):
                a, b = rhs_start + m.start(), rhs_start + m.end()
                mutated = latex[:a] + m.expand(replacement) + latex[b:]
                if m.group(0) != m.expand(replacement):
                    out.append((stage, mutated, where, what))
    return out


MUTANTS = _mutants()


def test_there_are_mutants_of_every_kind():
    kinds = {what for *_, what in MUTANTS}
    assert kinds == {"a dropped transpose", "a dropped 1/sqrt(d_k)", "a dropped 1/n",
                     "swapped indices"}


@settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(MUTANTS))
def test_mutated_equations_fail(builtin, mutant):
    stage, latex, where, what = mutant
    links = verdict(builtin, stage, latex, examples=1, where=where)
    assert any(k.status in ("fails", "example only") for k in links), (what, latex)


def test_the_projects_own_displayed_equations_hold_and_their_mutations_fail(square):
    """The equations the notes print (symformer.equations), read back by the grammar:
    they hold; each with two indices of a symbol swapped does not."""
    from symformer.equations.stage import stage_equation
    g = square.derivation(False, None, "grad.loss")
    held = mutated = 0
    for name in ("layer1.head1.Q", "layer1.head1.scores", "layer1.head1.weights",
                 "layer1.head1.output", "grad.layer1.head1.scores", "grad.layer1.head1.K",
                 "grad.layer1.head1.W_V", "layer1.add_norm1",
                 "grad.layer1.add_norm1.mean_square"):
        found = stage_equation(g[name])
        latex = r" \\ ".join(line.latex for line in found.lines())
        links = verdict(square, name, latex, examples=1)
        assert all(k.status == "holds" for k in links), (name, latex, links[0].message)
        held += 1
        m = re.search(r"([a-z])_\{i,j\}", latex[latex.index("="):])
        if m and name not in ("layer1.head1.output",):
            start = latex.index("=") + m.start()
            swapped = latex[:start] + latex[start:].replace("_{i,j}", "_{j,i}", 1)
            assert any(k.status != "holds" for k in verdict(square, name, swapped,
                                                            examples=1)), swapped
            mutated += 1
    assert held == 9 and mutated >= 4


# -- reading: claims files, notes, bad input --------------------------------------------
def test_unknown_symbols_and_ambiguity_are_one_line(builtin):
    with pytest.raises(InputError, match=r"cannot read w_\{ij\} at column 10: not a symbol"):
        verdict(builtin, "layer1.head1.scores", r"s_{ij} = w_{ij}")
    with pytest.raises(InputError, match="could be layer1.head1.scores or layer1.head2"):
        verdict(builtin, "layer1.attention.concat", r"c_{ij} = s_{ij}")
    (link,) = verdict(builtin, "layer1.attention.concat", r"c_{ij} = s^{(2)}_{ij}")
    assert link.status == "fails"


def test_check_cli_with_equations(tmp_path, capsys):
    claims = tmp_path / "claims.toml"
    claims.write_text(
        "[[equation]]\nname = 'softmax'\nstage = 'layer1.head1.weights'\n"
        "latex = '\\alpha_{ij} = \\frac{e^{s_{ij}}}{\\sum_{m} e^{s_{im}}}'\nexamples = 1\n\n"
        "[[equation]]\nname = 'FlashAttention-2'\nstage = 'grad.layer1.head1.K'\n"
        "latex = 'dK = Q\\, dS^\\top'\nexamples = 1\n\n"
        "[[claim]]\nstage = 'layer1.head1.weights'\nentry = [1, 2]\nvalues = 0.262\n")
    assert main(["check", str(claims)]) == 1
    out = capsys.readouterr().out
    assert "1 of 1 numbers correct" in out
    assert "equation softmax -> layer1.head1.weights (line 1): holds: agrees at all 16 " \
           "entries of this example and of 1 random example (certified to 50 digits)" in out
    assert "equation FlashAttention-2 -> grad.layer1.head1.K (line 1): fails: dK: cannot " \
           "multiply a 4x2 matrix by a 4x4 one" in out
    assert "1 of 2 equations hold" in out
    assert main(["check", str(claims), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [e["ok"] for e in document["equations"]] == [True, False]
    assert document["ok"] is False


@pytest.mark.parametrize("latex", [r"\alpha = \foo{x}", r"\input{/etc/passwd}"])
def test_check_cli_unreadable_equation_is_one_line_exit_2(tmp_path, capsys, latex):
    claims = tmp_path / "bad.toml"
    claims.write_text(f"[[equation]]\nstage = 'layer1.head1.weights'\nlatex = '{latex}'\n")
    assert main(["check", str(claims)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.toml, equation 1" in err and "cannot read \\" in err


NOTES = r"""\documentclass{article}
\begin{document}
The weight on key 2 is 0.262. % symformer: layer1.head1.weights[1,2]
% symformer: equation layer1.add_norm1.mean
\begin{align}
\mu &= \frac{1}{d}\sum_{j=0}^{d-1} r_j \\
    &= \frac{1}{d-1}\sum_{j} r_j
\end{align}
% symformer: equation layer1.head1.weights where A=layer1.head1.weights
\[ A = \operatorname{softmax}(S) \]
\end{document}
"""


def test_notes_check_numbers_and_equations_together(tmp_path, capsys):
    notes = tmp_path / "notes.tex"
    notes.write_text(NOTES)
    claims = equations_from_document(NOTES, "notes.tex")
    assert [(c.stage, c.line, len(c.chains)) for c in claims] == [
        ("layer1.add_norm1.mean", 5, 2), ("layer1.head1.weights", 10, 1)]
    assert main(["check", str(notes)]) == 1
    out = capsys.readouterr().out
    assert "1 of 1 numbers correct" in out
    assert "equation line 5 -> layer1.add_norm1.mean (line 1): holds" in out
    assert "equation line 5 -> layer1.add_norm1.mean (line 2): fails: your \\mu at " \
           "[0,0] is" in out
    assert "equation line 10 -> layer1.head1.weights (line 1): holds" in out


def test_markdown_notes_and_bad_tags(tmp_path, capsys):
    md = tmp_path / "notes.md"
    md.write_text("<!-- symformer: equation layer1.head1.scores -->\n\n"
                  "$$ S = \\frac{QK^\\top}{\\sqrt{d_k}} $$\n")
    assert main(["check", str(md)]) == 0
    assert "1 of 1 equation holds" in capsys.readouterr().out
    md.write_text("<!-- symformer: equation layer1.head1.scores -->\nno block here\n")
    assert main(["check", str(md)]) == 2
    assert "line 1: the tag must stand on the line before an equation" \
        in capsys.readouterr().err


def test_the_work_estimate_counts_equations():
    ex = load_example()
    more = check_work(ex, equations=2, random_examples=4)
    assert more > check_work(ex, equations=2) > check_work(ex) + 250_000


def test_docs_examples_run(tmp_path, capsys):
    """The claims file of docs/verify.md's "Equations" section, with the verdict each
    table's comment states."""
    text = (Path(__file__).parent.parent / "docs" / "verify.md").read_text()
    section = text[text.index("## Equations"):]
    block = re.search(r"```toml\n(.*?)```", section, re.S)[1]
    expected = re.findall(r"# expect: (holds|fails|example only)", block)
    path = tmp_path / "docs.toml"
    path.write_text(block)
    assert main(["check", str(path), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [e["links"][0]["status"] for e in document["equations"]] == expected
    assert len(expected) >= 4 and builtin_text()


ADAM = """\
[train]
lr = 0.1
steps = 1
optimizer = "adam"

[[equation]]
name = "Adam"
stage = "step1.layer1.W_O"
latex = 'W = W_0 - \\eta \\frac{m/(1-\\beta_1^t)}{\\sqrt{v/(1-\\beta_2^t)} SQRT}'
where = { W_0 = "step0.layer1.W_O", m = "step1.adam_m.layer1.W_O", v = "step1.adam_v.layer1.W_O" }
examples = 1
"""


def test_adam_with_eps_inside_the_root_fails(tmp_path, capsys):
    """PyTorch's Adam adds ε to the root of v̂ (docs/backward.md); a step written with ε
    inside the root is refuted (the difference is about ε/√v̂ relative)."""
    path = tmp_path / "adam.toml"
    path.write_text(ADAM.replace("SQRT", "+ \\epsilon"))
    assert main(["check", str(path)]) == 0
    assert "holds: agrees at all 16 entries of this example and of 1 random example" \
        in capsys.readouterr().out
    path.write_text(ADAM.replace("} SQRT}", " + \\epsilon}}"))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    (i, j), mine, stage = _numbers(out.splitlines()[0])
    ex = load_example()
    grads = float_backward(ex)
    assert "fails" in out.splitlines()[0]
    g = grads["grad.layer1.W_O"][i, j]
    w = float(ex.layers[0].W_O[i, j])
    m_hat, v_hat = g, g * g  # one step: the bias corrections undo (1 - beta)
    assert mine == pytest.approx(w - 0.1 * m_hat / np.sqrt(v_hat + 1e-8), rel=1e-12)
    assert stage == pytest.approx(w - 0.1 * m_hat / (np.sqrt(v_hat) + 1e-8), rel=1e-12)


def test_an_example_file_with_equations_about_itself(tmp_path, capsys):
    path = tmp_path / "self.toml"
    path.write_text(SQUARE.read_text() + "\n[[equation]]\nstage = 'layer1.head1.scores'\n"
                    "latex = 'S = QK^\\top/\\sqrt{d_k}'\nexamples = 1\n")
    assert main(["check", str(path)]) == 0
    assert "agrees at all 9 entries of this example and of 1 random example" \
        in capsys.readouterr().out


def test_causal_scores(language_model):
    """The language model masks: a case distinction with -inf holds; the unmasked
    formula fails at the first masked entry."""
    cases = (r"s_{ij} = \begin{cases} \frac{u_{ij}}{\sqrt{d_k}} & j \le i \\ -\infty & "
             r"\text{otherwise} \end{cases}")
    where = {"s": "layer1.head1.scores", "u": "layer1.head1.raw_scores"}
    (link,) = verdict(language_model, "layer1.head1.scores", cases, where=where)
    assert link.status == "holds", link.message
    (link,) = verdict(language_model, "layer1.head1.scores", r"s_{ij} = \frac{u_{ij}}"
                      r"{\sqrt{d_k}}", where=where)
    assert link.status == "fails" and "at [0,1] is" in link.message
    assert link.message.endswith("the stage is -inf (masked)")


@pytest.mark.parametrize("stage, latex, status", [
    ("layer1.ffn.gate_activation", r"\phi_{ij} = g_{ij}\,\sigma(g_{ij})", "holds"),
    ("layer1.ffn.gate_activation", r"\phi_{ij} = \mathrm{SiLU}(g_{ij})", "holds"),
    ("layer1.ffn.activation", r"a = \mathrm{SiLU}(g) \odot h", "holds"),
    ("layer1.ffn.activation", r"a = \mathrm{SiLU}(h) \odot g", "fails"),
    # SwiGLU as its paper writes it: the product binds tighter than the Hadamard one
    ("layer1.ffn.output", r"F = (\mathrm{SiLU}(Y W_{gate}) \odot Y W_1) W_2", "holds"),
])
def test_gated_feed_forward(stage, latex, status):
    judge = _judge(load_example("llama_style"))
    (link,) = verdict(judge, stage, latex, examples=1, where={"Y": "layer1.norm2"})
    assert link.status == status, link.message


@pytest.mark.parametrize("stage, latex, status", [
    # a function's own name on the left, its argument what the stage reads (g, the gate)
    ("layer1.ffn.gate_activation", r"\mathrm{SiLU}(x) = x\,\sigma(x) = \frac{x}{1+e^{-x}}",
     "holds"),
    ("layer1.ffn.gate_activation", r"\mathrm{SiLU}(x) = \frac{x}{1+e^{x}}", "fails"),
    # a subscript that is a word names the function; x is the FFN's input (the norm)
    ("layer1.ffn.output", r"\mathrm{FFN}_{\mathrm{SwiGLU}}(x) = (\mathrm{SiLU}(x W_{gate})"
     r" \odot x W_1) W_2", "holds"),
    ("layer1.ffn.output", r"\mathrm{FFN}_{\mathrm{SwiGLU}}(x) = (\mathrm{SiLU}(x W_1)"
     r" \odot x W_{gate}) W_2", "fails"),
])
def test_functions_on_the_left_read_the_stage_input(stage, latex, status):
    judge = _judge(load_example("llama_style"))
    for link in verdict(judge, stage, latex, examples=1):
        assert link.status == status, link.message


_SOUP = st.sampled_from([
    "q_{ij}", "q_{i}", "Q", "K^\\top", "s_{ij}", "\\alpha_j", "+", "-", "(", ")", "\\frac{1}{2}",
    "\\sum_{j}", "\\sum_{m=0}^{n-1}", "\\sqrt{d_k}", "0.5", "\\cdot", "\\odot", "[j \\le i]",
    "\\delta_{jk}", "\\delta_{ijk}", "\\mathbf{q}_{i,j}", "\\mathbf{q}_i", "(W_Q)_{mc}",
    "e^{s_{ij}}", "\\log", "\\max_j", "dS", "\\mu", "\\sigma^2", "/", "\\operatorname{softmax}(S)",
    "\\frac{\\partial L}{\\partial s_{ij}}", "n", "i", "^2", "_{ij}", "\\mathbb{1}[h_{ij} > 0]",
    "\\sigma(q)", "(Q, K)", "|V|"])


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from([("layer1.head1.scores", "s_{ij}"), ("layer1.head1.Q", "Q"),
                        ("layer1.head1.weights", "\\alpha_j"), ("grad.layer1.head1.K", "dK"),
                        ("loss", "L")]), st.lists(_SOUP, min_size=1, max_size=6))
def test_any_right_hand_side_gets_a_verdict_or_one_line(builtin, lhs, pieces):
    """Whatever is written on the right, the checker gives a verdict or refuses in one
    line: never a traceback."""
    stage, symbol = lhs
    try:
        links = verdict(builtin, stage, f"{symbol} = {' '.join(pieces)}", examples=1)
    except InputError as error:
        assert "\n" not in str(error)
    else:
        assert all(k.status in ("holds", "fails", "example only", "undecided") for k in links)


def test_an_unbound_index_is_named(builtin):
    with pytest.raises(InputError, match=r"cannot read j at column 21: it is not an index "
                                         r"of the left-hand side, not bound by a sum"):
        verdict(builtin, "layer1.add_norm1.mean", r"\mu = \frac{1}{d} r_j j")
