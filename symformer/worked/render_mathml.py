"""Worked lines as MathML Core, which browsers render natively (the trace's HTML page).

Every product of numbers has a visible ``<mo>·</mo>`` (adjacent ``<mn>`` elements
render as one number: ``2`` and ``0.000`` would read ``20.000``); subtraction is
``<mo>−</mo>`` (U+2212).
"""

from __future__ import annotations

import re
from html import escape

from symformer.equations.render import TALL, mathml_fragment
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
from symformer.worked.numbers import constant_parts, scientific

MINUS = "\u2212"
TIMES = "\u00b7"
TIMES_SIGN = "\u00d7"  # of scientific notation: 2.859 × 10⁻⁸


def _mo(op: str) -> str:
    return f"<mo>{escape(op)}</mo>"


def _mn(text: str) -> str:
    if scientific(text) is not None:
        return number_mathml(text)
    if text.startswith("-"):
        return f"<mrow>{_mo(MINUS)}<mn>{text[1:]}</mn></mrow>"
    return f"<mn>{text}</mn>"


def number_mathml(text: str) -> str:
    """A printed decimal as MathML: below 10^-4 in scientific notation with its printed
    digits (``0.00000002859`` as 2.859 × 10⁻⁸, ``0.000001`` as 10⁻⁶; the LaTeX's
    :func:`~symformer.worked.numbers.latex_decimal`), else as printed."""
    small = scientific(text)
    if small is None:
        return _mn(text)
    mantissa, exponent = small
    power = f"<msup><mn>10</mn><mrow>{_mo(MINUS)}<mn>{-exponent}</mn></mrow></msup>"
    body = mantissa.lstrip("-")
    inner = power if body == "1" else f"<mn>{body}</mn>{_mo(TIMES_SIGN)}{power}"
    return f"<mrow>{_mo(MINUS) if mantissa.startswith('-') else ''}{inner}</mrow>"


def _parens(body: str) -> str:
    """``(body)``; the brackets stretch only around something taller than a line (a
    fraction, a root): Chromium sets stretchy ones apart from a line of numbers."""
    if any(tag in body for tag in TALL):
        return f"<mrow>{_mo('(')}{body}{_mo(')')}</mrow>"
    return f'<mrow><mo stretchy="false">(</mo>{body}<mo stretchy="false">)</mo></mrow>'


#: A symbol's superscript saying where it sits (``q^(1)``: head 1; see symformer.notation).
_WHERE = re.compile(r"(.+)\^(\([^()]*\))")


def _name(text: str) -> str:
    """A symbol name; ``W_Q`` becomes W with subscript Q, ``q^(1)`` q with (1) above."""
    where = _WHERE.fullmatch(text)
    if where:
        return f"<msup>{_name(where.group(1))}<mtext>{escape(where.group(2))}</mtext></msup>"
    if text in ("inf", "\u221e"):
        return "<mi>\u221e</mi>"
    base, _, sub = text.partition("_")
    if sub and base:
        return f"<msub><mi>{escape(base)}</mi><mi>{escape(sub)}</mi></msub>"
    return f"<mi>{escape(text)}</mi>"


def _symbol(node: Sym) -> str:
    """A symbol from its LaTeX, the notation every format shares (``\\sigma^2`` as σ
    with a superscript 2, ``\\partial L/\\partial h_{0}`` in italics); the text form
    only for a symbol without LaTeX."""
    if node.latex:
        return mathml_fragment(node.latex)
    base = _name(node.base or node.text)
    if not node.index:
        return base
    index = _mo(",").join(f"<mn>{i}</mn>" for i in node.index)
    where = _WHERE.fullmatch(node.base or "")
    if "_" in (node.base or ""):
        base = _parens(base)
    elif where:  # q^(1)_0: the index below the superscript
        return (f"<msubsup>{_name(where.group(1))}<mrow>{index}</mrow>"
                f"<mtext>{escape(where.group(2))}</mtext></msubsup>")
    return f"<msub>{base}<mrow>{index}</mrow></msub>"


def mathml(node: Node) -> str:
    """A tree as MathML (without the ``<math>`` element)."""
    return _print(node)[0]


def _print(node: Node) -> tuple[str, int]:
    if isinstance(node, Num):
        small = scientific(node.text) is not None  # 2.859 × 10⁻⁸: a product
        return _mn(node.text), (ADD if node.text.startswith("-") else MUL if small else ATOM)
    if isinstance(node, Const):
        numerator, denominator = constant_parts(abs(node.value))
        body = _mn(numerator) if denominator is None else \
            f"<mfrac>{_mn(numerator)}{_mn(denominator)}</mfrac>"
        if node.value < 0:
            return f"<mrow>{_mo(MINUS)}{body}</mrow>", ADD
        return body, MUL if scientific(numerator) is not None else ATOM
    if isinstance(node, Sym):
        return _symbol(node), ATOM
    if isinstance(node, Neg):
        return f"<mrow>{_mo(MINUS)}{_wrap(node.arg, MUL)}</mrow>", ADD
    if isinstance(node, Add):
        out = ""
        for k, term in enumerate(node.terms):
            if isinstance(term, Neg):
                sign, body = MINUS, _wrap(term.arg, MUL)
            elif isinstance(term, Num) and term.text.startswith("-"):
                sign, body = MINUS, _mn(term.text[1:])
            else:
                sign, body = "+", _print(term)[0]
            out += (_mo(sign) if k or sign == MINUS else "") + body
        return f"<mrow>{out}</mrow>", ADD
    if isinstance(node, Mul):
        out = ""
        for k, factor in enumerate(node.factors):
            if k:
                numbers = is_numeric(factor) or is_numeric(node.factors[k - 1])
                out += _mo(TIMES) if numbers else "<mo>\u2062</mo>"
            out += _wrap(factor, MUL) if not isinstance(factor, Div) else mathml(factor)
        return f"<mrow>{out}</mrow>", MUL
    if isinstance(node, Div):
        return f"<mfrac><mrow>{mathml(node.num)}</mrow><mrow>{mathml(node.den)}</mrow></mfrac>", \
            ATOM
    if isinstance(node, Pow):
        return f"<msup>{_wrap(node.base, ATOM)}<mrow>{mathml(node.exp)}</mrow></msup>", POW
    if isinstance(node, Func):
        return _function(node), ATOM
    if isinstance(node, Vector):
        body = _mo(",").join(mathml(i) for i in node.items)
        return f"<mrow>{_mo('[')}{body}{_mo(']')}</mrow>", ATOM
    raise TypeError(f"cannot print {type(node).__name__}")


def _wrap(node: Node, at_least: int) -> str:
    text, prec = _print(node)
    return _parens(text) if prec < at_least else text


def _function(node: Func) -> str:
    if node.name == "exp":
        return f"<msup><mi>e</mi><mrow>{mathml(node.args[0])}</mrow></msup>"
    if node.name == "sqrt":
        return f"<msqrt>{mathml(node.args[0])}</msqrt>"
    args = _mo(",").join(mathml(a) for a in node.args)
    return f"<mrow><mi>{node.name}</mi><mo>\u2061</mo>{_parens(args)}</mrow>"


def pieces(node: Node) -> list[str]:
    """``node`` as MathML cut where a line may break: before each ``+``/``−`` of a sum
    that is not inside a fraction, power or function (``¼·(a`` | ``+ b`` | ``+ c)``).

    Each piece is shown in a ``<math>`` element of its own, so a long worked line
    wraps at the page's width as text does (MathML Core breaks no line).
    """
    if isinstance(node, Add):
        out: list[str] = []
        for k, term in enumerate(node.terms):
            if isinstance(term, Neg):
                sign, body = MINUS, [_wrap(term.arg, MUL)]
            elif isinstance(term, Num) and term.text.startswith("-"):
                sign, body = MINUS, [_mn(term.text[1:])]
            else:
                sign, body = "+", pieces(term)
            first = (_mo(sign) if k or sign == MINUS else "") + body[0]
            out += [first, *body[1:]]
        return out
    if isinstance(node, Mul):
        out = [""]
        for k, factor in enumerate(node.factors):
            cut = _factor_pieces(factor)
            if k:
                numbers = is_numeric(factor) or is_numeric(node.factors[k - 1])
                cut[0] = (_mo(TIMES) if numbers else "<mo>\u2062</mo>") + cut[0]
            out[-1] += cut[0]
            out += cut[1:]
        return out
    if isinstance(node, Div) and isinstance(node.num, Add) and len(node.num.terms) > 2:
        # a long numerator over a denominator, as TeX sets a long inline fraction: (a +
        # b + c)/d, so that the sum can wrap
        cut = _bracketed(node.num)
        cut[-1] += _mo("/") + _wrap(node.den, ATOM)
        return cut
    return [mathml(node)]


#: A bracketed expression with a tall term and at most this many visible characters
#: stays whole (its brackets then stretch around the term, ``(1 + tanh(√(2/π)·…))``);
#: any other may wrap.
SHORT = 45
_TAG = re.compile(r"<[^>]*>")


def _bracketed(node: Node) -> list[str]:
    """``(node)`` cut as :func:`pieces` cuts it; brackets split over two pieces do not
    stretch (each piece would stretch its half to a different height)."""
    cut = pieces(node)
    whole = mathml(node)
    if len(cut) == 1 or any(tag in whole for tag in TALL) and len(_TAG.sub("", whole)) <= SHORT:
        return [_parens(whole)]
    if cut[0].startswith("<mo>−</mo>"):  # a sign after the bracket: no spaces round it
        cut[0] = '<mo form="prefix">−</mo>' + cut[0][len("<mo>−</mo>"):]
    cut[0] = '<mo stretchy="false">(</mo>' + cut[0]
    cut[-1] += '<mo stretchy="false">)</mo>'
    return cut


def _factor_pieces(factor: Node) -> list[str]:
    """A factor of a product as :func:`_print` writes it (bracketed when it binds less
    than a product), cut as :func:`pieces` cuts it."""
    if isinstance(factor, Div):
        return pieces(factor)
    return _bracketed(factor) if _print(factor)[1] < MUL else pieces(factor)


def step_pieces(step: Step) -> list[str]:
    """A worked line as MathML pieces (see :func:`pieces`): ``lhs = a`` | ``+ b`` |
    ``= 1.2`` | ``≈ 0.3``; each relation starts a piece."""
    out, previous = [], None
    for k, (rel, form) in enumerate(step.chain):
        body = mathml(form)
        if body == previous:
            continue
        previous = body
        cut = pieces(form)
        cut[0] = (mathml(step.lhs) if k == 0 else "") + _mo(
            "\u2248" if rel == APPROX else "=") + cut[0]
        out += cut
    if not out:
        out = [mathml(step.lhs)]
    return [out[0], *map(_binary, out[1:])] + _remarks(step)


def _binary(piece: str) -> str:
    """A piece that starts with + or − continues a sum: its sign is binary (spaced as
    in the unbroken line), not the unary sign its first place would make it."""
    for sign in ("+", MINUS):
        if piece.startswith(f"<mo>{sign}</mo>"):
            return f'<mo form="infix" lspace="0em">{sign}</mo>' + piece[len(sign) + 9:]
    return piece


def _remarks(step: Step) -> list[str]:
    out = []
    if step.exact is not None:
        out.append(f"<mspace width=\"0.5em\"/><mtext>(exact:\u00a0</mtext>"
                   f"{mathml(step.exact)}<mtext>)</mtext>")
    if step.note:
        out.append(f"<mspace width=\"1em\"/><mtext>({escape(step.note)})</mtext>")
    return out

