"""A failing equation rewritten under the conventions authors differ on, to name the one
under which it holds (``check``'s "why" notes).

Each function returns the right-hand side rewritten (None: the convention does not
apply to it): ε moved into or out of a square root, a factor √d_k added or removed,
a step power β^t read as β^{t-1} (or back); :func:`printed_constants` finds the decimal
constants printed (``0.7978846``: 7 digits), whose rounding a relative tolerance of one
unit in the last digit forgives.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from symformer.verify import latex_math as lm
from symformer.verify.equation_defs import rebuilt

_EPSILON = ("epsilon", "varepsilon")


def _is_epsilon(node: lm.Node) -> bool:
    return isinstance(node, lm.Sym) and node.base in _EPSILON and not node.sub \
        and not node.sup


def epsilon_moved(rhs: lm.Node) -> tuple[lm.Node, str] | None:
    """``\\sqrt{v + ε}`` as ``\\sqrt{v} + ε`` and back; (the rewritten side, where ε now
    is: "inside" or "outside" the root)."""
    found: list[str] = []

    def visit(n: lm.Node) -> lm.Node | None:
        if isinstance(n, lm.Call) and n.name == "sqrt" and isinstance(n.args[0], lm.Binary) \
                and n.args[0].op == "+" and _is_epsilon(n.args[0].right):
            found.append("outside")
            inner = n.args[0]
            return lm.Binary("+", replace(n, args=(inner.left,)), inner.right, col=n.col)
        if isinstance(n, lm.Binary) and n.op == "+" and _is_epsilon(n.right) \
                and isinstance(n.left, lm.Call) and n.left.name == "sqrt":
            found.append("inside")
            root = n.left
            return replace(root, args=(lm.Binary("+", root.args[0], n.right, col=n.col),))
        return None

    out = rebuilt(rhs, visit)
    return (out, found[0]) if found else None


def sqrt_dk(rhs: lm.Node, times: bool) -> lm.Node:
    """``rhs`` times √d_k (``times``) or divided by it."""
    root = lm.Call("sqrt", (lm.Sym("d", (lm.Token("letter", "k", 0),)),))
    return lm.Binary("*" if times else "/", rhs, root)


def _t_minus(shift: int) -> lm.Node:
    t = lm.Sym("t")
    return t if not shift else lm.Binary("-", t, lm.Num(Fraction(1)))


def step_powers_shifted(rhs: lm.Node) -> tuple[lm.Node, str] | None:
    """Every power of the step ``β^t`` read as ``β^{t-1}``, or (when the equation writes
    ``t-1``) every ``β^{t-1}`` as ``β^t``; (the rewritten side, what it now reads)."""
    found: list[str] = []

    def visit(n: lm.Node) -> lm.Node | None:
        if isinstance(n, lm.Transpose) and n.written == "t":
            found.append("t-1")
            return lm.Binary("pow", rebuilt(n.operand, visit), _t_minus(1), col=n.col)
        if isinstance(n, lm.Sym) and n.sup and n.sup_text in ("t", "t-1") and not n.grad:
            back = n.sup_text == "t-1"
            found.append("t" if back else "t-1")
            return lm.Binary("pow", replace(n, sup=None), _t_minus(0 if back else 1),
                             col=n.col)
        return None

    out = rebuilt(rhs, visit)
    return (out, found[0]) if found and len(set(found)) == 1 else None


def printed_constants(rhs: lm.Node) -> list[tuple[int, str]]:
    """(significant digits, text) of each decimal constant printed (at least 4 digits:
    ``0.5`` is exact as written), the most digits first."""
    found: set[tuple[int, str]] = set()
    stack = [rhs]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Num) and n.text:
            digits = len(n.text.replace(".", "").lstrip("0"))
            if digits >= 4:
                found.add((digits, n.text))
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, lm.Node))
    return sorted(found, reverse=True)
