"""What judging an equation costs, counted before it runs.

An equation is evaluated at every entry of its stage, on the example and its random
examples (and, when it fails, under the other conventions): the nodes it evaluates per
entry are counted from its tree, a sum's terms from its limits (``\\sum_{i=1}^{10^7}``:
ten million, counted, not run), a shared subtree (a helper definition used many times)
as often as it is used.  :func:`equation_work` turns the count into operations of the
work estimate (:mod:`symformer.blocks.cost`: about 500,000 a second), which ``check``
refuses, with the estimate, over its work limit.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from symformer.errors import InputError
from symformer.verify import latex_math as lm

#: A count past this is "more than can be done" (the arithmetic stops growing).
BIG = 10 ** 18
#: Operations of one node evaluated at one entry (a ball operation and its dispatch).
NODE = 4
#: Operations of one link on one derivation besides its nodes (its bindings, the
#: stage's balls at each precision, the comparison of every entry).
LINK = 500
#: Derivations a failing link is evaluated on besides the example (the other
#: conventions, index bases and vector layouts tried to explain it); a link that holds
#: is evaluated on the random examples instead.
EXPLAINED = 7


#: The most nodes an equation's tree may hold once its definitions are expanded (each
#: use of a shared subtree counted).
MAX_TREE = 200_000


def check_tree(node: lm.Node) -> None:
    """Refuse, in one line, a tree too large to evaluate (definitions expanding into
    millions of copies), before anything walks it."""
    found = nodes(node, lambda _: None, 1, terms=False)
    if found > MAX_TREE:
        raise InputError(f"cannot read the equation: with its definitions expanded it "
                         f"has about {found:,} nodes; at most {MAX_TREE:,} are read")


def nodes(node: lm.Node, size: Callable[[lm.Node], int | None], widest: int,
          terms: bool = True) -> int:
    """The node evaluations of ``node`` at one entry: a sum's body once per term (its
    limits read when they are numbers or sizes, else ``widest``, the longest axis);
    ``terms=False``: the tree's nodes, each sum's body once."""
    memo: dict[int, int] = {}

    def count(n: lm.Node) -> int:
        key = id(n)
        if key in memo:
            return memo[key]
        total = 1
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                total += count(value)
            elif isinstance(value, tuple):
                for v in value:
                    if isinstance(v, lm.Node):
                        total += count(v)
                    elif isinstance(v, tuple):
                        total += sum(count(x) for x in v if isinstance(x, lm.Node))
        if terms and isinstance(n, lm.Reduce):
            body = count(n.body)
            runs = 1
            for k, _ in enumerate(n.indices):
                if n.low is not None and k == len(n.indices) - 1:
                    low = limit(n.low, size)
                    high = limit(n.high, size) if n.high is not None else widest
                    span = widest if low is None or high is None else max(0, high - low + 1)
                else:
                    span = widest
                runs = min(BIG, runs * span)
            total = min(BIG, total + (runs - 1) * body)
        memo[key] = min(BIG, total)
        return memo[key]

    return count(node)


def limit(node: lm.Node, size: Callable[[lm.Node], int | None]) -> int | None:
    """A sum's limit as a whole number when it is one written with numbers and sizes
    (``10^7``, ``n-1``); :data:`BIG` past it; None when it reads anything else."""
    value = _value(node, size)
    if value is None:
        return None
    return max(-BIG, min(BIG, int(value)))


def _value(node: lm.Node, size: Callable[[lm.Node], int | None]) -> Fraction | None:
    if isinstance(node, lm.Num):
        return node.value
    if isinstance(node, lm.Sym):
        found = size(node)
        return None if found is None else Fraction(found)
    if isinstance(node, lm.Unary):
        inner = _value(node.operand, size)
        return None if inner is None else -inner
    if not isinstance(node, lm.Binary):
        return None
    a, b = _value(node.left, size), _value(node.right, size)
    if a is None or b is None:
        return None
    if node.op == "+":
        out = a + b
    elif node.op == "-":
        out = a - b
    elif node.op in ("*", "jux"):
        out = a * b
    elif node.op == "/":
        out = a / b if b else Fraction(BIG)
    elif node.op == "pow":
        if b.denominator != 1 or b < 0:
            return None
        if abs(a) > 1 and b > 64:
            return Fraction(BIG)
        out = a ** int(b)
    else:
        return None
    return max(Fraction(-BIG), min(Fraction(BIG), out))


def equation_work(count: int, entries: int, derivations: int) -> int:
    """Operations of one link: ``count`` node evaluations at each of ``entries`` entries
    on each of ``derivations`` derivations (the example, and its random examples or the
    alternatives tried when it fails).  Calibrated on the built-in example: within 2.5x
    of the CPU measured for 100-link chains, 2,000-term sums and textbook equations."""
    return min(BIG, derivations * (LINK + NODE * count * entries))
