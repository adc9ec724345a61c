"""Worked lines as a small intermediate representation (handcalcs-style).

A worked :class:`Step` is ``lhs = symbolic = numeric ≈ result``: one chain of
*forms*, each an expression tree of the nodes below.  The symbolic form has
:class:`Sym` leaves (the notation of the inputs), the numeric form has
:class:`Num` leaves (the printed decimals) and :class:`Const` leaves (exact
weights); a later form may show parts already evaluated as their rounded values
(``e^{1.97} ≈ 7.17``).  Every rounding a reader can recompute is an :class:`Item`:
an expression over printed literals, and the printed result.

Renderers (``render_latex``, ``render_text``, ``render_mathml``, ``to_json``)
print these trees; nothing here knows a stage kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from symformer.lazy import sympy


class Node:
    """An expression tree node."""


@dataclass(frozen=True)
class Source:
    """Where a printed number comes from: ``kind`` "stage" (``name``: the stage, ``index``:
    row and column of the entry), "parameter" (``name``: the weight as the worked line
    writes it, ``W_Q``, ``γ``, ``ε``; ``index``: its entry) or "worked" (``name``: the
    symbol of a result printed earlier in the same worked block, ``e^{s_0}``, ``Σ``)."""

    kind: str
    name: str
    index: tuple[int, ...] = ()


@dataclass(frozen=True)
class Num(Node):
    """A printed decimal (an operand's certified rounding, or an intermediate result)."""

    text: str
    value: Fraction
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Const(Node):
    """An exact rational of the formula (a weight, ε, an integer): printed exactly."""

    value: sympy.Rational
    source: Source | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Sym(Node):
    """A symbol: the notation of an input's entry (``x_{0}``) or of a named constant."""

    latex: str
    text: str
    base: str = ""  # the text without indices (MathML puts the indices in a subscript)
    index: tuple = ()


@dataclass(frozen=True)
class Add(Node):
    """A sum; a :class:`Neg` term is printed as a subtraction."""

    terms: tuple[Node, ...]


@dataclass(frozen=True)
class Neg(Node):
    """``-x``."""

    arg: Node


@dataclass(frozen=True)
class Mul(Node):
    """A product; between numbers the product sign is always printed."""

    factors: tuple[Node, ...]


@dataclass(frozen=True)
class Div(Node):
    """``num / den``."""

    num: Node
    den: Node


@dataclass(frozen=True)
class Pow(Node):
    """``base ** exp``."""

    base: Node
    exp: Node


@dataclass(frozen=True)
class Func(Node):
    """A function application: ``exp sqrt max erf tanh sin cos log`` (natural log)."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Vector(Node):
    """A row of values (a step that only shows numbers, such as a concatenation)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Item:
    """One rounding a reader can recompute: ``expression`` evaluated, rounded, is ``result``.

    ``col`` is None for a whole-row quantity (a softmax denominator).  ``exact`` is the
    entry's correctly rounded exact value (its table's number) when the printed operands
    give a different ``result``, else None.
    """

    stage: str
    row: int
    col: int | None
    symbol: Node
    expression: Node
    result: Num
    exact: Num | None = None


@dataclass(frozen=True)
class Step:
    """One worked line: ``lhs`` then (relation, form) pairs; relation ``=`` or ``≈``.

    ``note`` is a short remark printed after the chain (``masked``); ``items`` the
    recomputable roundings the chain shows, in reading order; ``exact`` the entry's
    correctly rounded exact value when the printed operands give another result
    (printed after it: ``≈ 2.788 (exact: 2.789)``).
    """

    lhs: Node
    chain: tuple[tuple[str, Node], ...]
    items: tuple[Item, ...] = ()
    note: str = ""
    exact: Num | None = None
    stage: str = ""
    row: int = 0
    col: int | None = None


@dataclass(frozen=True)
class Style:
    """How numbers are shown: certified decimals, or short closed forms (``exact``).

    ``given``: (stage name, decimals) pairs; an operand from one of these stages is
    printed at exactly those decimals (the numbers an exercise sheet gives), never
    at the decimals searched for recomputability."""

    decimals: int = 2
    exact: bool = False
    max_ops: int = 12
    given: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Worked:
    """The worked lines of one stage for one token."""

    stage: str
    row: int
    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def items(self) -> tuple[Item, ...]:
        """Every recomputable rounding, in reading order."""
        return tuple(item for step in self.steps for item in step.items)


def children(node: Node) -> tuple[Node, ...]:
    """The sub-trees of a node (none for a leaf)."""
    if isinstance(node, Neg):
        return (node.arg,)
    if isinstance(node, Add):
        return node.terms
    if isinstance(node, Mul):
        return node.factors
    if isinstance(node, Div):
        return (node.num, node.den)
    if isinstance(node, Pow):
        return (node.base, node.exp)
    if isinstance(node, Func):
        return node.args
    if isinstance(node, Vector):
        return node.items
    return ()


#: The constant pi, the one named number a worked line may contain (GELU's tanh form).
PI = Sym(r"\pi", "pi", "pi")


def is_numeric(node: Node) -> bool:
    """True when no symbol occurs in the tree (a product sign is then always shown)."""
    return (node == PI or not isinstance(node, Sym)) and all(
        is_numeric(c) for c in children(node))


#: Precedence levels the printers bracket by: a sum, a product, a power, an atom.
ADD, MUL, POW, ATOM = 1, 2, 3, 4

APPROX = "≈"
EQUALS = "="
