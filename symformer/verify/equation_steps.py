"""A training equation as its author writes it: the step t, and symbols at a step.

Optimiser papers write one update for every step: ``\\theta_t = \\theta_{t-1} - \\eta
\\hat m_t / (\\sqrt{\\hat v_t} + \\epsilon)``, ``\\hat m_t = m_t / (1 - \\beta_1^t)``.  On a
training run's stage (``step2.theta``):

* ``t`` is the step (``^t`` a power of it, never a transpose);
* a subscript in t alone (``_t``, ``_{t-1}``, ``_{t+1}``) says at which step the symbol
  is read: the same symbol's stage at that step (a ``where`` binding names the one at
  the claimed step, and is moved with it);
* the left-hand side's step subscript fixes t: ``\\theta_{t+1} = ...`` claimed of
  ``step2.theta`` has t = 1;
* an equation that mentions t is general: it is judged at every step of the run
  (:func:`steps_to_judge`), the claim's stage and ``where`` moved to each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from symformer.verify import latex_math as lm

#: A general-t equation is judged at every step of the run, and at least at this many.
MIN_STEPS = 3
_STEP = re.compile(r"^(grad\.)?step([0-9]+)\.")


def shift(name: str, delta: int) -> str | None:
    """``name`` moved ``delta`` steps (``step1.adam_m.theta`` +1: ``step2.adam_m.theta``);
    a name that is not a step's unchanged; None before step 0."""
    match = _STEP.match(name)
    if match is None or not delta:
        return name
    step = int(match.group(2)) + delta
    if step < 0:
        return None
    return f"{match.group(1) or ''}step{step}.{name[match.end():]}"


def shifted_where(where: Mapping[str, str], delta: int) -> dict[str, str] | None:
    """A claim's ``where`` moved ``delta`` steps (None: a binding before step 0)."""
    out = {}
    for symbol, name in where.items():
        moved = shift(name, delta)
        if moved is None:
            return None
        out[symbol] = moved
    return out


def step_subscript(sym: lm.Sym) -> int | None:
    """``k`` when ``sym``'s subscript is ``t + k`` in t alone (``t``, ``t-1``, ``{t+1}``),
    else None."""
    if not sym.sub:
        return None
    tokens = [t for t in sym.sub if not (t.kind == "char" and t.text in "{}")]
    texts = [t.text for t in tokens]
    if texts == ["t"]:
        return 0
    if len(texts) == 3 and texts[0] == "t" and texts[1] in "+-" and tokens[2].kind == "num" \
            and texts[2].isdigit():
        return int(texts[2]) * (1 if texts[1] == "+" else -1)
    return None


def mentions_t(chains: list[lm.Chain]) -> bool:
    """Does the equation use the letter t (a symbol, a script, a power)?"""
    stack: list = [c.lhs for c in chains] + [r for c in chains for r in c.rhs]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Sym):
            if n.base == "t" or any(t.text == "t" for t in (*(n.sub or ()), *(n.sup or ()))):
                return True
        if isinstance(n, lm.Transpose) and n.written == "t":
            return True
        if isinstance(n, lm.Reduce) and "t" in n.indices:
            return True
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                for v in value:
                    if isinstance(v, lm.Node):
                        stack.append(v)
                    elif isinstance(v, tuple):
                        stack.extend(x for x in v if isinstance(x, lm.Node))
    return False


def offsets(chains: list[lm.Chain]) -> set[int]:
    """The step offsets k of every ``_{t+k}`` subscript of the equation."""
    found: set[int] = set()
    stack: list = [c.lhs for c in chains] + [r for c in chains for r in c.rhs]
    while stack:
        n = stack.pop()
        if isinstance(n, lm.Sym):
            k = step_subscript(n)
            if k is not None:
                found.add(k)
        for value in vars(n).values():
            if isinstance(value, lm.Node):
                stack.append(value)
            elif isinstance(value, tuple):
                stack.extend(v for v in value if isinstance(v, lm.Node))
    return found


def steps_to_judge(claimed: int, run_steps: int, general: bool) -> list[int]:
    """The steps a claim on step ``claimed`` is judged at: the claimed one first, then
    (a general-t equation) every other step of the run, at least :data:`MIN_STEPS`."""
    if not general:
        return [claimed]
    last = max(run_steps, MIN_STEPS, claimed)
    return [claimed] + [s for s in range(1, last + 1) if s != claimed]


def before_update(chain: lm.Chain) -> lm.Chain:
    """``\\theta \\leftarrow \\theta - \\eta g``: on the right of an update arrow the
    symbol updated is its value before the update, ``\\theta_{t-1}``."""
    lhs = chain.lhs
    if not chain.update or not isinstance(lhs, lm.Sym) or lhs.sub:
        return chain
    earlier = tuple(lm.Token(kind, text, lhs.col) for kind, text in
                    (("letter", "t"), ("char", "-"), ("num", "1")))

    def visit(n: lm.Node) -> lm.Node | None:
        if isinstance(n, lm.Sym) and not n.sub and (n.base, n.sup_text, n.primes) \
                == (lhs.base, lhs.sup_text, lhs.primes) and not lhs.grad:
            # θ and its gradient ∇_θ L on the right: both before the update
            return replace(n, sub=earlier)
        return None

    from symformer.verify.equation_defs import rebuilt
    return replace(chain, rhs=tuple(rebuilt(r, visit) for r in chain.rhs))
