"""The equation grammar (symformer.verify.latex_math): what it reads, into which tree,
and what it refuses -- one line naming the token and its column, quickly, for any
input (hostile ones included)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer.errors import InputError
from symformer.verify import latex_math as lm

READABLE = [
    r"q_{i,c} = \sum_{m=0}^{d-1} x_{i,m} (W_Q)_{m,c}",
    r"q^{(1)}_{ic} = x_{im}",
    r"\alpha_{ij} = \frac{e^{s_{ij}}}{\sum_{m} e^{s_{im}}}",
    r"\alpha_j = \frac{\exp(s_j)}{\sum_{m=1}^{n} \exp\left(s_m\right)}",
    r"S = QK^\top/\sqrt{d_k} = Q K^{T} / \sqrt{d_k}",
    r"y_j = \gamma_j \frac{r_j - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta_j",
    r"\tilde\sigma = \sqrt{\sigma^2 + \epsilon}",
    r"y'_j = \gamma'_j \hat{x}_j",
    r"a_{ij} = \max(0, h_{ij}) = \mathrm{ReLU}(h_{ij}) = h_{ij}\,\mathbb{1}[h_{ij} > 0]",
    r"P = \operatorname{softmax}(S) \odot \mathbf{1}\{j \le i\}",
    r"\frac{\partial L}{\partial x_{ij}} = \sum_{k} \delta_{jk} [j \le i]",
    r"\partial L/\partial x_{ij} = \tanh(x_{ij}) \cdot \log(2) \times \ln 3",
    r"dK = dS^\top Q \quad dV = A^{\top} dO \, \! \;",
    r"\begin{align} PE_{pos,2i} &= \sin\bigl(pos/10000^{2i/d}\bigr) \\ "
    r"PE_{pos,2i+1} &= \cos(pos/10000^{2i/d}) \end{align}",
    r"\mu = \frac{1}{d}\sum_{j=0}^{d-1} r_j \\ &= \frac{1}{d}\sum_j r_j.",
    r"c_{ij} = \left\{ \begin{array}{ll} o_{ij}, & \mathrm{if}\ j < d_v \\ 0, "
    r"& \mathrm{otherwise} \end{array} \right.",
    r"\frac{\partial L}{\partial \left(W_{2}\right)_{m,j}} = \sum_{i} a_{im}",
]


@pytest.mark.parametrize("latex", READABLE)
def test_the_documented_grammar_is_read(latex):
    assert lm.parse_equations(latex)


def test_trees():
    """The trees of a few lines, checked node by node."""
    (chain,) = lm.parse_equations(r"\mu = \frac{1}{d}\sum_{j=1}^{d} r_j")
    assert isinstance(chain.lhs, lm.Sym) and chain.lhs.base == "mu"
    frac, total = chain.rhs[0].left, chain.rhs[0].right
    assert frac == lm.Binary("/", lm.Num(Fraction(1)), lm.Sym("d"))
    assert isinstance(total, lm.Reduce) and total.indices == ("j",)
    assert total.low == lm.Num(Fraction(1)) and total.high == lm.Sym("d")
    (chain,) = lm.parse_equations(r"dK = dS^\top Q")
    assert chain.lhs.grad and chain.lhs.base == "K"
    assert chain.rhs[0].left.grad and chain.rhs[0].left.sup_text == r"\top"
    (chain,) = lm.parse_equations(r"\frac{\partial \mathcal{L}}{\partial x_{ij}} = 0.25")
    assert chain.lhs.grad and chain.lhs.base == "x" and chain.lhs.sub_text == "ij"
    assert chain.rhs[0] == lm.Num(Fraction(1, 4))
    chains = lm.parse_equations(r"a &= b = c \\ &= d")
    assert [len(c.rhs) for c in chains] == [2, 1] and chains[1].lhs == chains[0].lhs
    (chain,) = lm.parse_equations(r"x = e^{2} + e_{1}")
    assert chain.rhs[0].left == lm.Call("exp", (lm.Num(Fraction(2)),))
    assert chain.rhs[0].right.base == "e"  # e with a subscript is the embedding


@pytest.mark.parametrize("latex, message", [
    (r"\alpha = \foo{x}", r"cannot read \foo at column 10"),
    (r"\input{/etc/passwd}", r"cannot read \input at column 1"),
    (r"\def\x{1} x = 1", r"cannot read \def at column 1"),
    (r"q = x @ W", "cannot read '@' at column 7"),
    (r"q = (x", "expected ) at the end"),
    (r"q = x)", "cannot read ) at column 6"),
    (r"q + x", "no '='"),
    (r"\sum = 1", "without an index"),
    (r"\begin{tikzpicture} x = 1", r"cannot read \begin{tikzpicture} at column 1"),
    (r"q = \frac{\partial y}{\partial x}", "a derivative without the entries' indices"),
])
def test_unreadable_input_is_one_line_naming_the_token(latex, message):
    with pytest.raises(InputError) as error:
        lm.parse_equations(latex)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("hostile", [
    "{" * 1_000_000,
    "x = " + "(" * 5_000 + "1" + ")" * 5_000,
    "x = " + "{" * 5_000 + "1" + "}" * 5_000,
    "x = " + r"\frac{" * 2_000 + "1",
    "x = " + "-" * 5_000 + "1",
    "x = " + r"\sqrt{" * 3_000 + "1" + "}" * 3_000,
    r"\input{/etc/passwd}" * 1_000,
])
def test_hostile_input_is_refused_quickly(hostile):
    start = time.process_time()
    with pytest.raises(InputError) as error:
        lm.parse_equations(hostile)
    assert time.process_time() - start < 1.0
    assert "\n" not in str(error.value)


def test_nesting_up_to_the_limit_is_read():
    depth = 20
    assert lm.parse_equations("x = " + "(" * depth + "1" + ")" * depth)


_PIECES = st.sampled_from(["x", "q_{ij}", r"\alpha", "+", "-", "=", "(", ")", "{", "}",
                           "^", "_", r"\frac", r"\sum_{j}", r"\sqrt", "2", "0.5", r"\\",
                           "&", "[", "]", r"\le", r"\cdot", r"\left(", r"\right)", "'",
                           r"\mathbb{1}", r"\partial", "/", "dK", r"\top", ",", "|"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=25))
def test_any_token_soup_is_read_or_refused_in_one_line(pieces):
    try:
        lm.parse_equations(" ".join(pieces))
    except InputError as error:
        assert "\n" not in str(error)
