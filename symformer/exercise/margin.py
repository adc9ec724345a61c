"""The constraints a variant must meet, decided with certified balls.

* **Rounding margin**: every asked value ``v`` is farther than ``margin`` units of
  the last asked decimal from every rounding boundary ``(k + 1/2) * 10**-D``,
  decided by Arb's certified comparisons on the ball of ``v * 10**D`` (true only
  when true for every point of the ball, hence for ``v`` itself).  A ball too wide
  to prove it counts as a failure (a rejection is always safe), so no acceptance
  depends on a float.
* **Spread of the softmax weights**: in every row of every asked softmax stage, the
  largest weight exceeds the smallest by at least ``min_spread`` (certified: the
  lower bound of one entry minus the upper bound of another).  Rows with fewer than
  two unmasked keys (a causal mask's first row) are exempt.

Each function returns ``None`` when the constraint holds, else a short reason
naming the first entry that fails it.
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb

from symformer.engine import Derivation
from symformer.engine.arbmath import NEG_INF, ArbMatrix, precision
from symformer.engine.rounding import ball_bounds, moderate

#: Working precision (bits) of the checks: far below any margin a teacher would use.
PRECISION = 192
_HALF = arb(1) / 2
#: Softmax stage kinds whose rows the spread criterion applies to.
SOFTMAX_KINDS = ("weights",)


def clears_margin(ball: arb, decimals: int, margin: arb) -> bool:
    """Whether every point of ``ball`` lies more than ``margin`` units of the last
    decimal from every rounding boundary ``(k + 1/2) * 10**-decimals``.

    Certified: Arb's comparisons are true only when they hold for every point of
    the balls.  With ``t = ball * 10**decimals`` and ``h`` the half-integer just below
    ``t``'s midpoint, only ``h`` and ``h + 1`` need checking: a farther boundary
    within the margin would put one of them inside the ball.
    """
    t = ball * 10 ** decimals
    h = (t.mid() - _HALF).floor() + _HALF
    return bool(abs(t - h) > margin and abs(t - h - 1) > margin)


def margin_ball(margin: Fraction) -> arb:
    """The margin as a ball (enclosing the exact rational) at the current precision."""
    return arb(margin.numerator) / margin.denominator


def asked_balls(g: Derivation, asked: list[str]) -> dict[str, ArbMatrix]:
    """The asked stages and the stages they read, in ball arithmetic at
    :data:`PRECISION` bits (the rest of the block is not evaluated: a rejected draw
    costs only what its checks need).  A row dividing by a ball containing 0 gives
    a non-finite ball here, which the checks reject."""
    needed = set(asked).union(*(g.ancestors(name) for name in asked))
    values: dict[str, ArbMatrix] = {}
    with precision(PRECISION):
        for stage in g:
            if stage.name in needed:
                values[stage.name] = stage.op.arb([values[i] for i in stage.inputs])
    return values


def margin_failure(g: Derivation, asked: list[str], decimals: int, margin: Fraction,
                   balls: dict[str, ArbMatrix] | None = None) -> str | None:
    """``None`` when every asked value clears the margin, else the first failing entry.

    ``balls``: :func:`asked_balls` when already computed."""
    balls = asked_balls(g, asked) if balls is None else balls
    with precision(PRECISION):
        wide = margin_ball(margin)
        for name in asked:
            for i, row in enumerate(balls[name]):
                for j, ball in enumerate(row):
                    if ball is NEG_INF:
                        continue  # a masked score: -inf, printed as such
                    if not ball.is_finite() or not clears_margin(ball, decimals, wide):
                        return f"{name}[{i},{j}]"
    return None


def spread_failure(g: Derivation, asked: list[str], min_spread: Fraction,
                   balls: dict[str, ArbMatrix] | None = None) -> str | None:
    """``None`` when every asked softmax row is spread enough, else the first flat row."""
    balls = asked_balls(g, asked) if balls is None else balls
    for name in asked:
        if g[name].kind not in SOFTMAX_KINDS:
            continue
        scores = balls[g[name].inputs[0]]
        for i, row in enumerate(balls[name]):
            live = [ball_bounds(b) for b, s in zip(row, scores[i])
                    if s is not NEG_INF and moderate(b)]
            if len(live) < 2:
                continue
            if max(lo for lo, _ in live) - min(hi for _, hi in live) < min_spread:
                return f"{name} row {i}"
    return None
