"""One expression tree (issue "Check an equation as its author wrote it", What to build 2):
an operation's index equation, lowered (:func:`symformer.equations.lower.lower`), and an
author's LaTeX, read by ``check``'s parser, give the same nodes for the same
mathematics; the printers dispatch on the node's class and refuse a node, an operator
or a function they have no form for rather than print a guess.

The expected trees are written out by hand here (not produced by either reader).
"""

from __future__ import annotations

import ast
from fractions import Fraction

import pytest

from symformer.equations import tree as t
from symformer.equations.latex import LatexPrinter
from symformer.equations.lower import lower
from symformer.equations.render import speller
from symformer.equations.text import TextPrinter
from symformer.verify import latex_math as lm


def _num(n: int) -> t.Num:
    return t.Num(Fraction(n))


def _h() -> t.Sym:
    return t.Sym("h")


#: (index language, LaTeX as an author writes it, the tree both must give).
SAME = [
    ("exp(-h) / (1 + exp(-h))", r"\frac{\exp(-h)}{1 + \exp(-h)}",
     t.Binary("/", t.Call("exp", (t.Unary(_h()),)),
              t.Binary("+", _num(1), t.Call("exp", (t.Unary(_h()),))))),
    ("sum(exp(s) for m in range(n))", r"\sum_{m=0}^{n-1} \exp(s)",
     t.Reduce("sum", ("m",), _num(0), t.Binary("-", t.Sym("n"), _num(1)),
              t.Call("exp", (t.Sym("s"),)))),
    ("sqrt(v + 1) ** 2", r"\sqrt{v + 1}^{2}",
     t.Binary("pow", t.Call("sqrt", (t.Binary("+", t.Sym("v"), _num(1)),)), _num(2))),
    ("max(0, h)", r"\max(0, h)", t.Call("max", (_num(0), _h()))),
    ("(1 if j <= i else 0)", r"\mathbb{1}[j \le i]",
     t.Indicator(t.Compare(("<=",), (t.Sym("j"), t.Sym("i"))))),
]


@pytest.mark.parametrize("index, latex, expected", SAME)
def test_both_readers_give_the_same_tree(index, latex, expected):
    assert lower(ast.parse(index, mode="eval").body) == expected
    (chain,) = lm.parse_equations(f"y = {latex}")
    assert chain.rhs == (expected,)


def test_the_claim_reader_s_nodes_are_the_tree_s():
    assert lm.Sym is t.Sym and lm.Binary is t.Binary and lm.Reduce is t.Reduce


@pytest.mark.parametrize("printer", [LatexPrinter, TextPrinter])
@pytest.mark.parametrize("node, what", [
    (t.Ones(), "Ones node"),
    (t.Matrix(((_num(1),),)), "Matrix node"),
    (t.Binary("jux", _h(), _h()), "operator 'jux'"),
    (t.Binary("otimes", _h(), _h()), "operator 'otimes'"),
    (t.Sym("q", sub=(t.Token("letter", "i", 1),)), "written symbol q_{i}"),
    (t.Call("softplus", (_h(),)), "softplus"),
    (t.Reduce("min", ("m",), _num(0), t.Binary("-", t.Sym("n"), _num(1)), _h()), "'min'"),
])
def test_a_printer_refuses_what_it_has_no_form_for(printer, node, what):
    with pytest.raises(ValueError, match=what):
        printer(speller({})).visit(node)


def test_the_printers_print_the_author_s_tree_as_the_operation_s():
    """The same tree prints the same, whichever reader gave it."""
    for index, latex, _ in SAME:
        (chain,) = lm.parse_equations(f"y = {latex}")
        lowered = lower(ast.parse(index, mode="eval").body)
        for printer in (LatexPrinter, TextPrinter):
            assert printer(speller({})).visit(chain.rhs[0]) == \
                printer(speller({})).visit(lowered)
    assert TextPrinter(speller({})).visit(SAME[4][2]) == "𝟙[j ≤ i]"
    bracketed = r"\exp \mathopen{}\left( -h \mathclose{}\right)"
    assert LatexPrinter(speller({})).visit(SAME[0][2]) == \
        rf"\frac{{{bracketed}}}{{1 + {bracketed}}}"
