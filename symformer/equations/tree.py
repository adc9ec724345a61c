"""The one expression tree of an equation: the nodes both readers produce and every
printer dispatches on.

An author's LaTeX (:mod:`symformer.verify.latex_math`, the claim reader) and an
operation's declared index equation (:mod:`symformer.equations.ir`, lowered by
:func:`symformer.equations.lower.lower`) are read into these nodes; the printers
(:mod:`symformer.equations.latex`, :mod:`symformer.equations.text`,
:mod:`symformer.equations.json_form`) dispatch on the node's class, and a node a
printer does not know raises, never a guess.  The same mathematics gives the same
tree from either side: ``\\sum_{m=0}^{n-1} x_{i,m}`` and ``sum(x[i, m] for m in
range(n))`` are both a :class:`Reduce` over ``m`` from 0 to ``n - 1``.

Most nodes come from the claim reader (a symbol keeps its scripts' tokens as written,
``q_{ic}``, to be bound later); :class:`Entry` (an array's entry with its index
expressions, ``x[i, 2 * c + 1]``) and :class:`All` (conditions joined by *and*) are the
index language's, and :class:`Binary` carries its ``//`` and ``%`` too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symformer.notation_types import Notation

GREEK = frozenset("""alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota
kappa lambda mu nu xi pi rho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta
Lambda Xi Pi Sigma Phi Psi Omega ell""".split())
FONTS = frozenset({"mathrm", "text", "mathit", "mathcal", "mathsf", "textrm",
                    "operatorname", "mathbb"})

@dataclass(frozen=True)
class Token:
    """One token: kind ``num``, ``letter``, ``macro`` (text with its backslash) or
    ``char``; its 1-based column; whether a space came before it."""

    kind: str
    text: str
    col: int
    spaced: bool = False


@dataclass(frozen=True)
class Node:
    """A node of an equation's tree; ``col`` is where it starts (for messages)."""

    col: int = field(default=0, compare=False, kw_only=True)


@dataclass(frozen=True)
class Num(Node):
    """An exact number; ``text``: a decimal as printed (``0.7978846``: a constant given
    to 7 digits), else ""."""

    value: Fraction
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Sym(Node):
    """A symbol with its scripts as written: ``base`` (``q``, ``alpha``,
    ``tilde(sigma)``, ``PE``), the subscript's and superscript's tokens (unparsed: a
    subscript may be a name, ``W_Q``, or indices, ``q_{ic}``), primes, and ``grad``
    for ∂L/∂ of it."""

    base: str
    sub: tuple[Token, ...] | None = None
    sup: tuple[Token, ...] | None = None
    primes: int = 0
    grad: bool = False
    bold: bool = False   # \mathbf{q}_i: token i's whole row (a vector)

    @property
    def sub_text(self) -> str:
        """The subscript as one word (``Q``, ``ic``, ``i,c``, ``model``)."""
        return text_of(self.sub)

    @property
    def sup_text(self) -> str:
        """The superscript as one word (``(1)``, ``2``, ``\\top``)."""
        return text_of(self.sup)

    def show(self) -> str:
        """The symbol as an author would write it (for messages)."""
        out = ("\\partial L/\\partial " if self.grad else "") + shown_base(self.base)
        out += "'" * self.primes
        if self.sub:
            out += f"_{{{self.sub_text}}}"
        if self.sup:
            out += f"^{{{self.sup_text}}}"
        return out


def shown_base(base: str) -> str:
    if base.endswith(")") and "(" in base:
        accent, inner = base[:-1].split("(", 1)
        return f"\\{accent}{{{shown_base(inner)}}}"
    return f"\\{base}" if base in GREEK else base


def text_of(tokens: tuple[Token, ...] | None) -> str:
    if not tokens:
        return ""
    out = []
    for t in tokens:
        if t.kind == "macro" and t.text[1:] in FONTS | {"{", "}"}:
            continue
        if t.kind == "char" and t.text in "{}":
            continue
        out.append(t.text)
    return "".join(out)


@dataclass(frozen=True)
class Unary(Node):
    """``-x``."""

    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    """``a op b``: op one of ``+ - * jux / odot pow``; ``*`` (written) and ``jux``
    (juxtaposed) are a product of scalars or a matrix product."""

    op: str
    left: Node
    right: Node
    #: written in parentheses: ``\\sigma(xW)`` applies σ to the whole product
    grouped: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Transpose(Node):
    """``X^\\top``; ``written``: the superscript as written (``t`` is a power of the
    step on a training run's stage, where t is the step)."""

    operand: Node
    written: str = field(default="", compare=False)


@dataclass(frozen=True)
class Call(Node):
    """``f(args)``: exp, log, sqrt, tanh, sin, cos, erf, relu, sigmoid, silu, gelu (the
    exact one, with erf), softmax (row-wise), max."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Reduce(Node):
    """``\\sum`` (or ``\\max``) over ``indices``, from ``low`` to ``high`` inclusive (None:
    the whole axis the index reads)."""

    op: str
    indices: tuple[str, ...]
    low: Node | None
    high: Node | None
    body: Node


@dataclass(frozen=True)
class Compare(Node):
    """A chain of comparisons ``a <= b < c`` (ops: ``< <= > >= == !=``)."""

    ops: tuple[str, ...]
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Indicator(Node):
    """``1[condition]``: 1 where it holds, else 0."""

    condition: Node


@dataclass(frozen=True)
class Arguments(Node):
    """``(Q, K, V)``: what a named function of the left-hand side is written over
    (``\\mathrm{Attention}(Q, K, V) = ...``); nowhere else."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Cases(Node):
    """A case distinction: the first row whose condition holds (None: otherwise)."""

    rows: tuple[tuple[Node, Node | None], ...]


@dataclass(frozen=True)
class Matrix(Node):
    """A matrix written out, ``\\begin{bmatrix} .. \\end{bmatrix}`` or a row ``[a, b]``:
    its entries' expressions, row by row."""

    rows: tuple[tuple[Node, ...], ...]


@dataclass(frozen=True)
class Ones(Node):
    """A vector of ones, ``\\mathbf{1}`` (``\\mathbb{1}``, ``\\mathbf 1_n``): a column of
    ``size`` entries (None: as many as the matrix it multiplies needs)."""

    size: Node | None = None


@dataclass(frozen=True)
class Subscripted(Node):
    """``(expr)_{ij}``: an entry of a matrix-valued expression."""

    operand: Node
    sub: tuple[Token, ...]


@dataclass(frozen=True)
class Entry(Node):
    """An array's entry as the index language writes it, ``x[i, 2 * c + 1]``: the
    array's name and each index as an expression (none: the 1 x 1 array itself, ``L``)."""

    name: str
    indices: tuple[Node, ...] = ()


@dataclass(frozen=True)
class All(Node):
    """Conditions that must all hold, ``j <= i and i < n``."""

    conditions: tuple[Node, ...]


class NotPrintable(ValueError):
    """A node or operator a printer has no form for."""


class Printer:
    """A printer of the tree: one method per node class, named as the class in lower
    case (``num``, ``binary``, ``entry``); a node of any other class raises
    :class:`NotPrintable` naming it, never a guess.  ``form``: what it prints, for
    that message."""

    form = "printed"

    def __init__(self, spelling: Callable[[str], Notation]) -> None:
        #: how an identifier is spelled (a name -> its Notation)
        self._spelling = spelling

    def visit(self, node: Node) -> str:
        """The printed form of ``node``."""
        method = getattr(self, type(node).__name__.lower(), None) \
            if isinstance(node, Node) else None
        if method is None:
            raise NotPrintable(f"no {self.form} form for a {type(node).__name__} node")
        return method(node)
