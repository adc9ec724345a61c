"""Helper symbols defined beside a claimed equation (``, \\quad \\mathrm{RMS}(x) = ...``,
Adam's m̂ and v̂ on the lines above its update): expanded in the parsed tree, then the
equation judged.  The references are the verdicts of the same equations written out
inline (tests/test_equation_claims.py proves those against hand-derived stages), and
the counterexamples are computed here in float64 from the example's own weights.
"""

from __future__ import annotations

import numpy as np
import pytest
from float_reference import as_float

from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.verify import latex_math as lm
from symformer.verify.check import Checker
from symformer.verify.equation_claims import EquationClaim, Judge
from symformer.verify.equation_defs import expand, split_definitions

RMS = r"\sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2 + \epsilon}"


@pytest.fixture(scope="module")
def llama():
    example = load_example("llama_style")
    checker = Checker(example)
    return Judge(example, checker.derivation, checker.causal)


def _links(judge, stage, latex, **options):
    return judge.check(EquationClaim("t", stage, latex, examples=1, source="t",
                                     **options)).links


def test_a_definition_beside_the_equation_is_expanded(llama):
    latex = (r"\bar{x}_i = \frac{x_i}{\mathrm{RMS}(x)} g_i, \quad \mathrm{RMS}(x) = " + RMS)
    (link,) = _links(llama, "layer1.norm1", latex, where={"g": "layer1.norm1.gamma"})
    assert link.status == "holds", link.message


def test_a_wrong_definition_fails_with_the_float64_value(llama):
    """ε outside the root: the value printed is x γ / (RMS + ε), by hand in float64."""
    latex = (r"\bar{x}_i = \frac{x_i}{\mathrm{RMS}(x) + \epsilon} g_i \quad \text{where} "
             r"\quad \mathrm{RMS}(x) = \sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2}")
    (link,) = _links(llama, "layer1.norm1", latex, where={"g": "layer1.norm1.gamma"})
    assert link.status == "fails"
    (i, j), mine = _entry_and_value(link.message)
    ex = load_example("llama_style")
    x = as_float(ex.embeddings)[list(ex.token_ids)][i]  # RoPE: the input is the embedding
    gamma = as_float(ex.layers[0].gamma_1).ravel()
    expected = x[j] * gamma[j] / (np.sqrt(np.mean(x * x)) + 1e-6)  # the file's eps
    assert mine == pytest.approx(expected, rel=1e-9)


def test_definitions_on_the_lines_above(tmp_path, capsys):
    """Adam as its paper prints it: m̂ and v̂ defined first, the update using them."""
    body = (
        "[train]\nlr = 0.1\nsteps = 1\noptimizer = \"adam\"\n\n[[equation]]\n"
        "name = \"Adam\"\nstage = \"step1.layer1.W_O\"\n"
        "latex = '\\begin{align} \\hat{m} &= m/(1-\\beta_1^t) \\\\ \\hat{v} &= "
        "v/(1-\\beta_2^t) \\\\ W &= W_0 - \\eta \\frac{\\hat{m}}{\\sqrt{\\hat{v}} ROOT} "
        "\\end{align}'\n"
        "where = { W_0 = \"step0.layer1.W_O\", m = \"step1.adam_m.layer1.W_O\", "
        "v = \"step1.adam_v.layer1.W_O\" }\nexamples = 1\n")
    from symformer.example.loader import builtin_text
    path = tmp_path / "adam.toml"
    path.write_text(builtin_text() + "\n" + body.replace("ROOT", "+ \\epsilon"))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(line 3): holds" in out and "1 of 1 equation holds" in out
    path.write_text(builtin_text() + "\n" + body.replace("} ROOT}", " + \\epsilon}}"))
    assert main(["check", str(path)]) == 1
    assert "fails" in capsys.readouterr().out


def test_lines_about_the_stage_are_not_definitions():
    """An align of two lines about one stage (PE's even and odd columns) and a chain
    `a = b = c` define nothing."""
    chains = lm.parse_equations(r"\begin{align} PE_{p,2i} &= \sin(p) \\ PE_{p,2i+1} &= "
                                r"\cos(p) \end{align}")
    claimed, defs = split_definitions(chains)
    assert len(claimed) == 2 and defs == []


def test_parameters_are_replaced_by_the_arguments():
    chains = lm.parse_equations(r"y = f(a) + f(b), \quad f(z) = 2z")
    claimed, defs = split_definitions(chains)
    (chain,) = claimed
    (rhs,) = expand(chain, defs).rhs
    assert "Sym(col=" in repr(rhs) and "base='f'" not in repr(rhs)
    bases = {n.base for n in _syms(rhs)}
    assert bases == {"a", "b"}


@pytest.mark.parametrize("latex, message", [
    (r"y = \omega_{2j+1}, \quad \omega_i = 2", "defined with other indices"),
    (r"y = g_j, \quad g_i = \sum_j r_{ij}", "sums over a letter of the use's index"),
    (r"y = a, \quad a = a + 1", "uses itself"),
    (r"y = f(a, b), \quad f(z) = z", "takes 1 arguments, not 2"),
])
def test_bad_definitions_are_one_line(latex, message):
    claimed, defs = split_definitions(lm.parse_equations(latex))
    with pytest.raises(InputError, match=message):
        expand(claimed[0], defs)


def _syms(node):
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Sym):
            yield n
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, lm.Node))


def _entry_and_value(message: str) -> tuple[tuple[int, int], float]:
    import re
    m = re.search(r"at \[(\d+),(\d+)\] is (-?[0-9.e-]+)", message)
    return (int(m[1]), int(m[2])), float(m[3])


@pytest.mark.parametrize("latex, status", [
    (r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \ldots, "
     r"\mathrm{head}_h) W^O", "holds"),
    (r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, "
     r"\mathrm{head}_4) W^O", "holds"),
    (r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_2, \mathrm{head}_1, "
     r"\mathrm{head}_3, \mathrm{head}_4) W^O", "fails"),
    (r"\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \ldots, "
     r"\mathrm{head}_h)", "fails"),
])
def test_the_papers_multi_head_equation(llama, latex, status):
    """Attention Is All You Need's MultiHead = Concat(head_1, ..., head_h) W^O on
    llama_style's four heads: in order it holds; heads swapped, or W^O dropped, fails."""
    (link,) = _links(llama, "layer1.attention.output", latex)
    assert link.status == status, link.message


def test_concat_by_hand(llama):
    """Concat(head_1, head_2) is 3 x 4 (two 3 x 2 heads), which W^O (8 x 4) cannot
    multiply: the shapes are named."""
    (link,) = _links(llama, "layer1.attention.output", r"A = \mathrm{Concat}(\mathrm{head}_1,"
                     r" \mathrm{head}_2) W^O", where={"A": "layer1.attention.output"})
    assert link.status == "fails" and "cannot multiply a 3x4 matrix by a 8x4 one" \
        in link.message


def test_an_ellipsis_outside_a_run_is_one_line(llama):
    with pytest.raises(InputError, match="ldots"):
        _links(llama, "layer1.attention.output",
               r"A = \mathrm{Concat}(\ldots, \mathrm{head}_2) W^O",
               where={"A": "layer1.attention.output"})


def test_the_additive_mask_of_the_scores(tmp_path):
    """softmax(QK^T/sqrt(d_k) + M) V with M bound to the causal mask holds on a decoder;
    without M it fails at the first row, whose one visible key gets weight 1 (so the
    output row is v_0 exactly)."""
    from symformer.example.loader import load_example as load

    path = tmp_path / "lm.toml"
    path.write_text(open(load_example("gpt2_style").source, encoding="utf-8").read())
    example = load(path)
    checker = Checker(example)
    judge = Judge(example, checker.derivation, checker.causal)
    attention = (r"\mathrm{Attention}(Q,K,V) = \mathrm{softmax}\left(\frac{QK^\top}"
                 r"{\sqrt{d_k}} MASK\right)V")
    (link,) = _links(judge, "layer1.head1.output", attention.replace("MASK", "+ M"),
                     where={"M": "layer1.head1.scores.mask"})
    assert link.status == "holds", link.message
    (link,) = _links(judge, "layer1.head1.output", attention.replace("MASK", ""))
    assert link.status == "fails" and "at [0,0]" in link.message


def test_a_mask_of_a_stage_without_one_is_unknown(llama):
    with pytest.raises(InputError, match="layer1.head1.weights.mask"):
        _links(llama, "layer1.head1.output", r"O = \mathrm{softmax}(S + M) V",
               where={"M": "layer1.head1.weights.mask"})


def test_an_unreadable_equation_does_not_stop_the_others(tmp_path, capsys):
    """Of three equations, the readable one is judged; each other gets the verdict
    "cannot be read" and one line on stderr naming it; the exit status is 2."""
    claims = tmp_path / "mixed.toml"
    claims.write_text(
        "[[equation]]\nname = 'good'\nstage = 'layer1.head1.scores'\n"
        "latex = 'S = QK^\\top/\\sqrt{d_k}'\nexamples = 1\n\n"
        "[[equation]]\nname = 'macro'\nstage = 'layer1.head1.weights'\n"
        "latex = 'A = \\foo{S}'\n\n"
        "[[equation]]\nname = 'symbol'\nstage = 'layer1.head1.weights'\n"
        "latex = 'A = \\operatorname{argsort}(S)'\n")
    assert main(["check", str(claims)]) == 2
    captured = capsys.readouterr()
    assert "equation good -> layer1.head1.scores (line 1): holds" in captured.out
    assert "equation macro -> layer1.head1.weights (line 1): cannot be read: cannot read " \
           "\\foo at column 5" in captured.out
    assert "1 of 3 equations hold" in captured.out
    err = captured.err.splitlines()
    assert len(err) == 2
    assert err[0].endswith("mixed.toml, equation 2 (macro): cannot read \\foo at column 5")
    assert "mixed.toml, equation 3 (symbol): cannot read argsort at column" in err[1]


FA2 = {"P": "layer1.head1.weights", "dP": "grad.layer1.head1.weights",
       "dO": "grad.layer1.head1.output", "O": "layer1.head1.output"}


@pytest.mark.parametrize("latex, status", [
    # FlashAttention-2's backward (Algorithm 2): dS = P ∘ (dP − D), D = rowsum(dO ∘ O)
    (r"dS = P \circ (dP - D), \quad D = \mathrm{rowsum}(dO \circ O)", "holds"),
    (r"dS_{ij} = P_{ij}(dP_{ij} - D_i), \quad D_i = \sum_c dO_{ic} O_{ic}", "holds"),
    # D without the weights: rowsum(dP) is not the softmax's correction Σ_k P_ik dP_ik
    (r"dS = P \circ (dP - D), \quad D = \mathrm{rowsum}(dP)", "fails"),
])
def test_flashattention2_softmax_backward(latex, status):
    example = load_example()
    checker = Checker(example)
    judge = Judge(example, checker.derivation, checker.causal)
    (link,) = _links(judge, "grad.layer1.head1.scores", latex, where=FA2)
    assert link.status == status, link.message


def test_a_use_renames_the_definitions_index_letters():
    """llm.c's g_i used as g_j: the body's i read as j (in subscripts and indices)."""
    chains = lm.parse_equations(r"y_j = g_j, \quad g_i = r_i + [i \le 1]")
    claimed, defs = split_definitions(chains)
    (rhs,) = expand(claimed[0], defs).rhs
    assert rhs.left.sub_text == "j"
    assert rhs.right.condition.operands[0] == lm.Sym("j")


def test_an_indexed_parameter_is_an_entry_of_the_argument():
    """M(z) = 1/d sum_k z_k used as M(x + m): z_k is (x + m)_k, x_k for a symbol x."""
    chains = lm.parse_equations(r"\mu = M(x + m) + M(r), \quad M(z) = \sum_k z_k")
    claimed, defs = split_definitions(chains)
    (rhs,) = expand(claimed[0], defs).rhs
    first, second = rhs.left.body, rhs.right.body
    assert isinstance(first, lm.Subscripted) and first.sub[0].text == "k"
    assert first.operand.op == "+"
    assert second.base == "r" and second.sub_text == "k"


def test_a_helper_with_an_indexed_parameter_holds_and_its_mutation_fails(tmp_path):
    """The mean as a helper over an expression: holds; with 1/(d-1) it fails, at the
    value recomputed in float64 from the example's inputs."""
    example = load_example()
    checker = Checker(example)
    judge = Judge(example, checker.derivation, checker.causal)
    good = r"\mu = \mathrm{M}(r), \quad \mathrm{M}(z) = \frac{1}{d}\sum_k z_k"
    (link,) = _links(judge, "layer1.add_norm1.mean", good)
    assert link.status == "holds", link.message
    bad = good.replace(r"\frac{1}{d}", r"\frac{1}{d-1}")
    (link,) = _links(judge, "layer1.add_norm1.mean", bad)
    assert link.status == "fails"
    (i, _), mine = _entry_and_value(link.message)
    from float_reference import float_forward
    r = float_forward(example)["layer1.add_norm1.sum"]
    assert mine == pytest.approx(r[i].sum() / (r.shape[1] - 1), rel=1e-9)
