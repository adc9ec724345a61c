"""The constraints a variant must meet, decided with certified balls.

* **Rounding margin**: every asked value ``v`` is farther than ``margin`` units of
  the last asked decimal from every rounding boundary ``(k + 1/2) * 10**-D``,
  decided by Arb's certified comparisons on the ball of ``v * 10**D`` (true only
  when true for every point of the ball, hence for ``v`` itself).  A ball too wide
  to prove it counts as a failure (a rejection is always safe), so no acceptance
  depends on a float.
* **The given numbers lead to the same answers**: an asked stage that reads tables
  the sheet gives (not asked; printed at ``decimals`` places on one token's path,
  ``decimals + 2`` when every entry is asked), recomputed from
  those printed numbers, also clears the margin and rounds to the same answer, so a
  student working from the sheet gets the key's value and the key's worked lines can
  substitute exactly the numbers given.
* **Spread of the softmax weights**: in every row of every asked softmax stage, the
  largest weight exceeds the smallest by at least ``min_spread`` (certified: the
  lower bound of one entry minus the upper bound of another).  Rows with fewer than
  two unmasked keys (a causal mask's first row) are exempt.

Only the asked entries count (one token's path: :mod:`symformer.exercise.cells`).
Each function returns ``None`` when the constraint holds, else a short reason
naming the first entry that fails it.
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb

from symformer.engine import Derivation
from symformer.engine.arbmath import NEG_INF, ArbMatrix, precision
from symformer.engine.rounding import ball_bounds, moderate
from symformer.exercise.cells import asked_rows, entries_of
from symformer.exercise.settings import given_places
from symformer.verify.chain import apply, ball, round_values
from symformer.words import plural

#: Working precision (bits) of the checks: far below any margin a teacher would use.
PRECISION = 192
_HALF = arb(1) / 2


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
            cells = entries_of(asked, name, g[name].shape)
            for i, row in enumerate(balls[name]):
                for j, ball in enumerate(row):
                    if ball is NEG_INF or (i, j) not in cells:
                        continue  # a masked score: -inf, printed as such
                    if not ball.is_finite() or not clears_margin(ball, decimals, wide):
                        return f"{name}[{i},{j}]"
    return None


def spread_failure(g: Derivation, asked: list[str], min_spread: Fraction,
                   balls: dict[str, ArbMatrix] | None = None) -> str | None:
    """``None`` when every asked softmax row is spread enough, else the first flat row."""
    balls = asked_balls(g, asked) if balls is None else balls
    for name in asked:
        if not g[name].op.weighs_keys:
            continue
        scores = balls[g[name].inputs[0]]
        rows = asked_rows(asked, name, g[name].shape)
        for i, row in enumerate(balls[name]):
            if i not in rows:
                continue
            live = [ball_bounds(b) for b, s in zip(row, scores[i])
                    if s is not NEG_INF and moderate(b)]
            if len(live) < 2:
                continue
            if max(lo for lo, _ in live) - min(hi for _, hi in live) < min_spread:
                return f"{name} row {i}"
    return None


def _cell(value: arb, decimals: int) -> int:
    """The rounding of a ball that clears the margin (it lies inside one cell)."""
    return int(((value * 10 ** decimals).mid() + _HALF).floor().unique_fmpz())


def _printed(values: ArbMatrix, places: int) -> list | None:
    """A given table as the sheet prints it: each entry's certified rounding to
    ``places`` decimals (an exact rational; masked scores stay -inf), None if undecided."""
    rounded = round_values([[None if b is NEG_INF else b for b in row] for row in values],
                           places)
    if rounded is None:
        return None
    return [[NEG_INF if b is NEG_INF else r for b, r in zip(row, out)]
            for row, out in zip(values, rounded)]


def given_failure(g: Derivation, asked: list[str], decimals: int, margin: Fraction,
                  balls: dict[str, ArbMatrix] | None = None) -> str | None:
    """``None`` when every asked stage that reads given tables, recomputed from them as
    printed (:func:`~symformer.exercise.settings.given_places`), clears the margin and
    rounds as its exact value; else the first entry that does not."""
    balls = asked_balls(g, asked) if balls is None else balls
    places = given_places(asked, decimals)
    for name in asked:
        given = [i for i in g[name].inputs if i not in asked]
        if not given:
            continue
        with precision(PRECISION):
            inputs = [_printed(balls[i], places) if i in given else balls[i]
                      for i in g[name].inputs]
            if any(v is None for v in inputs):
                return f"{given[0]} (its rounding to {plural(places, 'decimal')} is undecided)"
            values = apply(g[name].op, inputs)
            wide = margin_ball(margin)
            cells = entries_of(asked, name, g[name].shape)
            for i, row in enumerate(values):
                for j, entry in enumerate(row):
                    exact = balls[name][i][j]
                    if entry is None or exact is NEG_INF or (i, j) not in cells:
                        continue
                    value = entry if isinstance(entry, arb) else \
                        ball(Fraction(int(entry.p), int(entry.q)))
                    if not (value.is_finite() and clears_margin(value, decimals, wide)
                            and _cell(value, decimals) == _cell(exact, decimals)):
                        return f"{name}[{i},{j}]"
    return None
