"""Worked lines as LaTeX (pdflatex and KaTeX read the same source).

Products of numbers always show ``\\cdot`` (``2 \\cdot 0.000``, never ``20.000``);
symbols are juxtaposed (``x_{0} (W_{Q})_{0,0}``); a negative term is a
subtraction; a long sum wraps onto a second line inside ``align*``/``aligned``.
"""

from __future__ import annotations

import re

from symformer import math_scripts as scripts
from symformer.worked.model import (
    ADD,
    APPROX,
    ATOM,
    MUL,
    POW,
    Add,
    Const,
    Div,
    Func,
    Mul,
    Neg,
    Node,
    Num,
    Pow,
    Step,
    Sym,
    Vector,
    is_numeric,
)
from symformer.worked.numbers import constant_parts, latex_decimal, scientific

#: Rough width (in characters of visible math) after which a long sum wraps.
LINE_WIDTH = 56
#: A fraction whose numerator is a sum wider than this is printed 1/den (sum), so the
#: sum may break its line (a fraction's numerator cannot).
FRACTION_WIDTH = 40
#: How far past LINE_WIDTH a line may run with its result (the width is a rough count:
#: a line of 67 counted characters fits the notes' text width, one of 69 did not).
RESULT_SLACK = 8
_COMMAND = re.compile(r"\\(left|right)|\\[A-Za-z]+|[{}^_]")
_FUNCTIONS = {"sin": r"\sin", "cos": r"\cos", "tanh": r"\tanh", "max": r"\max",
              "min": r"\min", "erf": r"\operatorname{erf}", "log": r"\log"}


#: Commands typeset as their name (``\\sin`` is three letters wide).
_NAMED = frozenset(r"\sin \cos \tanh \max \min \log \exp \text".split())


def _visible(m: re.Match) -> str:
    text = m.group()
    if m.group(1) or len(text) == 1:
        return ""
    if text == r"\sqrt":
        return "xx"  # the radical sign and its bar's overhang
    return text[1:] if text in _NAMED else "x"


def _group(latex: str, start: int) -> int:
    """The index just past the brace group opening at ``start``."""
    depth = 0
    for k in range(start, len(latex)):
        depth += {"{": 1, "}": -1}.get(latex[k], 0)
        if depth == 0:
            return k + 1
    return len(latex)


def width(latex: str) -> int:
    """A rough visible width of math: braces count as nothing, a command as one
    character, a function's name (``\\sin``) as its letters, a fraction as the wider
    of its numerator and denominator."""
    k = latex.find(r"\frac{")
    if k < 0:
        return len(_COMMAND.sub(_visible, latex).replace(" ", ""))
    num_end = _group(latex, k + 5)
    den_end = _group(latex, num_end) if latex[num_end:num_end + 1] == "{" else num_end
    fraction = max(width(latex[k + 6:num_end - 1]), width(latex[num_end + 1:den_end - 1]))
    return width(latex[:k]) + fraction + width(latex[den_end:])


def latex(node: Node, wrap: bool = False, reserve: int = 0) -> str:
    """A tree as LaTeX math; ``wrap`` lets a long top-level sum break its line, its last
    line leaving ``reserve`` characters for what follows (the result and a remark)."""
    return _print(node, wrap, reserve)[0]


def _print(node: Node, wrap: bool = False, reserve: int = 0) -> tuple[str, int]:
    if isinstance(node, Num):
        if scientific(node.text) is not None:  # 2.859 \times 10^{-8}: a product
            return latex_decimal(node.text), (ADD if node.text.startswith("-") else MUL)
        return node.text, (ADD if node.text.startswith("-") else ATOM)
    if isinstance(node, Const):
        numerator, denominator = constant_parts(abs(node.value))
        sign = "-" if node.value < 0 else ""
        if denominator is None:
            tex = latex_decimal(numerator)  # 0.000001 as 10^{-6}
            return sign + tex, (ADD if sign else ATOM if tex == numerator else MUL)
        return rf"{sign}\frac{{{numerator}}}{{{denominator}}}", (ADD if sign else ATOM)
    if isinstance(node, Sym):  # a derivative as a display fraction: worked lines are displayed
        return scripts.display(node.latex), ATOM
    if isinstance(node, Neg):
        if wrap and isinstance(node.arg, Mul):  # -1/(2 m^{3/2}) (a long sum that breaks)
            return "-" + _product(node.arg, wrap, reserve), ADD
        return "-" + _wrap(node.arg, MUL), ADD
    if isinstance(node, Add):
        return _sum(node, wrap, reserve=reserve), ADD
    if isinstance(node, Mul):
        return _product(node, wrap, reserve), MUL
    if isinstance(node, Div):
        numerator = latex(node.num)
        if wrap and isinstance(node.num, Add) and width(numerator) > FRACTION_WIDTH:
            # a numerator too wide for the page: 1/den (a sum that may break its line)
            denominator = latex(node.den)
            body = _sum(node.num, True, start=width(denominator) + 8,  # + lhs and =
                        reserve=reserve)
            return rf"\frac{{1}}{{{denominator}}} \Bigl({body}\Bigr)", MUL
        if r"\frac{\partial L}" in numerator:  # 1/den ∂L/∂x: no fraction over a fraction
            if isinstance(node.num, Add):
                numerator = rf"\left({numerator}\right)"
            return rf"\frac{{1}}{{{latex(node.den)}}} {numerator}", MUL
        return rf"\frac{{{numerator}}}{{{latex(node.den)}}}", ATOM
    if isinstance(node, Pow) and isinstance(node.exp, Const) and node.exp.value.q != 1:
        exponent = f"{node.exp.value.p}/{node.exp.value.q}"  # ^{3/2}, as the equation
        return f"{_wrap(node.base, ATOM)}^{{{exponent}}}", POW
    if isinstance(node, Pow):
        if isinstance(node.base, Func) and node.base.name in ("tanh", "sin", "cos"):
            call = _function(node.base)  # \tanh^{2}(x), not tanh((x)^2) read
            name = _FUNCTIONS[node.base.name]
            return f"{name}^{{{latex(node.exp)}}}{call[len(name):]}", ATOM
        if isinstance(node.base, Sym):  # (h^{(2)}_{0})^{3}, never a script on a script
            return scripts.powered(scripts.display(node.base.latex), latex(node.exp)), POW
        return f"{_wrap(node.base, ATOM)}^{{{latex(node.exp)}}}", POW
    if isinstance(node, Func):
        return _function(node), ATOM
    if isinstance(node, Vector):
        body = " & ".join(latex(i) for i in node.items)
        return rf"\begin{{bmatrix}} {body} \end{{bmatrix}}", ATOM
    raise TypeError(f"cannot print {type(node).__name__}")


def _wrap(node: Node, at_least: int) -> str:
    text, prec = _print(node)
    if isinstance(node, Sym) and at_least == ATOM and "^" in text:
        return f"{{{text}}}"  # (s^2)^2 would be a double superscript
    return rf"\left({text}\right)" if prec < at_least else text


def _terms(node: Add) -> list[tuple[str, str]]:
    """(sign, term) pairs; a negative term becomes a subtraction."""
    out = []
    for term in node.terms:
        if isinstance(term, Neg):
            out.append(("-", _wrap(term.arg, MUL)))
            continue
        text = latex(term)
        out.append(("-", text[1:]) if text.startswith("-") else ("+", text))
    return out


def _sum(node: Add, wrap: bool, start: int = 0, reserve: int = 0) -> str:
    """The sum's terms; with ``wrap`` a line breaks where it passes LINE_WIDTH (the
    first line already holds ``start`` characters, the last leaves ``reserve``)."""
    out, line = "", start
    terms = _terms(node)
    for k, (sign, term) in enumerate(terms):
        line += width(term) + 1
        if k and wrap and line + (reserve if k == len(terms) - 1 else 0) > LINE_WIDTH:
            out += r" \\ &\qquad"
            line = width(term)
        out += (f" {sign} " if k else ("-" if sign == "-" else "")) + term
    return out


def _product(node: Mul, wrap: bool, reserve: int = 0) -> str:
    out = ""
    for k, factor in enumerate(node.factors):
        if isinstance(factor, Add):
            body = _sum(factor, wrap and k == len(node.factors) - 1, reserve=reserve)
            text = rf"\Bigl({body}\Bigr)" if r"\\" in body else rf"\left({body}\right)"
        else:
            text = _wrap(factor, MUL) if not isinstance(factor, Div) else latex(factor)
        if k:
            before = node.factors[k - 1]
            numbers = is_numeric(factor) or is_numeric(before)
            leading_fraction = k == 1 and isinstance(before, Div) and isinstance(factor, Add)
            # a factor printed starting with a number or a number's fraction (a nested
            # product 1/4 (x - y)) is never juxtaposed: x \frac{1}{4} reads as one symbol
            starts_numeric = text[:1].isdigit() or (text.startswith(r"\frac")
                                                    and is_numeric(_first(factor)))
            out += " " if leading_fraction or not (numbers or starts_numeric) else r" \cdot "
        out += text
    return out


def _first(node: Node) -> Node:
    """The factor a product prints first (the node itself when it is no product)."""
    return _first(node.factors[0]) if isinstance(node, Mul) and node.factors else node


def _function(node: Func) -> str:
    args = node.args
    if node.name == "exp":
        return f"e^{{{latex(args[0])}}}"
    if node.name == "sqrt":
        return rf"\sqrt{{{latex(args[0])}}}"
    name = _FUNCTIONS[node.name]
    inner = ", ".join(latex(a) for a in args)
    atom = len(args) == 1 and (isinstance(args[0], Sym) or (
        isinstance(args[0], Const) and args[0].value.is_Integer and args[0].value >= 0))
    if atom and (node.name in ("sin", "cos") or (node.name == "tanh" and isinstance(args[0], Sym))):
        return f"{name} {inner}"  # \sin 1, as a textbook writes it
    return rf"{name}\left({inner}\right)"


def relation(rel: str) -> str:
    """``=`` or ``\\approx``."""
    return r"\approx" if rel == APPROX else "="


def remark(step: Step) -> str:
    """What follows a step's result: the table's value when the printed operands give
    another (``\\ (\\text{exact: } 2.789)``), and its note (``masked``)."""
    out = "" if step.exact is None else \
        rf"\ (\text{{exact: }} {{{latex_decimal(step.exact.text)}}})"
    return out + (rf" \quad (\text{{{step.note}}})" if step.note else "")


def chain(step: Step) -> tuple[tuple[str, str], ...]:
    """A step's chain as (relation, LaTeX) pairs; its remarks follow the last one."""
    tail = width(remark(step)) + (width(latex(step.chain[-1][1])) + 3 if step.chain else 0)
    out = [(relation(rel), latex(form, wrap=True, reserve=tail if k == len(step.chain) - 2
                                 else 0)) for k, (rel, form) in enumerate(step.chain)]
    if out and (step.note or step.exact is not None):
        rel, text = out[-1]
        out[-1] = (rel, text + remark(step))
    if len(out) > 1:  # a result that would run past the margin goes on a line of its own
        rel, text = out[-2]
        last_line = text.rsplit(r"\\", 1)[-1]
        if width(last_line) + width(out[-1][1]) + 3 > LINE_WIDTH + RESULT_SLACK:
            out[-2] = (rel, text + r" \\ &\qquad")
    return tuple(out)


def step_latex(step: Step) -> str:
    """``lhs = ... ≈ result`` on one line (no alignment, no wrapping)."""
    parts, previous = [latex(step.lhs)], None
    for rel, form in step.chain:
        text = latex(form)
        if text != previous:
            parts.append(f"{relation(rel)} {text}")
        previous = text
    return " ".join(parts) + remark(step)
