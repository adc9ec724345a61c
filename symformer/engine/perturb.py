"""What a finite mask (``mask = -1e9``) changes, evaluated without cancellation.

With a finite mask M a masked weight is about exp(M) > 0 instead of 0, so an entry
differs from its value under the exact mask (-inf) by something like exp(-1e9): no
working precision can see it, and a tie of the exactly masked value stays a tie.
This module evaluates, in ball arithmetic, the *difference* d = x - x0 of every entry
from its exactly masked value x0 by rules that never subtract two close numbers
(d(a b) = da b0 + a0 db + da db, d(exp s) = exp(s0) expm1(ds), ...), so d is
enclosed to full relative precision however small it is.  When x0 is proved equal to
a rounding boundary, the certified sign of d decides the rounding.

A masked score has x0 = -inf; its "difference" is its full finite value.
"""

from __future__ import annotations

from collections.abc import Sequence

from symformer.engine.arbmath import ArbMatrix


def differences(stages, base: dict[str, ArbMatrix]) -> dict[str, ArbMatrix] | None:
    """d = x - x0 of every stage (at the current precision), or None for an unknown op.

    ``stages``: the finitely masked derivation's stages in order; ``base``: every
    stage of the exactly masked twin evaluated at the current precision.  Each
    operation's own rule (``Operation.difference``) says how its difference is
    enclosed.
    """
    d: dict[str, ArbMatrix] = {}
    for stage in stages:
        difference = stage.op.difference([base[i] for i in stage.inputs],
                                         [d[i] for i in stage.inputs])
        if difference is None:
            return None
        d[stage.name] = difference
    return d


def finitely_masked(stages: Sequence) -> bool:
    """Whether some score is masked by a finite value (the derivation has a twin)."""
    return any(s.op.finite_mask for s in stages)
