"""The draws a teaching assistant would set: fairness constraints, decided with balls.

Each check reads the certified balls of the asked stages and their inputs
(:func:`symformer.exercise.margin.asked_balls`) and returns ``None`` when the
constraint holds, else the first entry that fails it.  A ball too wide to prove a
constraint counts as a failure, so every accepted variant is proved to meet it.

* ``score``: every scaled score of an asked softmax (or asked scores) has
  ``|s| <= max_score``: a student can exponentiate it by hand (e^4 ~ 54.6);
* ``saturated``: in every row of every asked softmax with at least two unmasked keys,
  the largest weight is at most ``max_weight`` (no one-hot row);
* ``relu``: the input of every asked feed-forward activation (ReLU's h, a gated
  activation's gate g) has a positive and a negative entry, in the worked token's row
  (``relu_signs = "token"``) or anywhere in its table (``"table"``);
* ``stated``: every asked value is exactly 0 or rounds to a nonzero number: nothing the
  asked precision cannot state (a weight of 0.003 at 2 decimals);
* ``path``: every asked entry recomputed on the student's path (:mod:`.path`: earlier
  asked answers at the sheet's decimals, given tables as printed) lies farther than a
  tenth of the margin from a rounding boundary, so the answer a careful student
  reaches, and the key prints, is decided.  A tenth: the student's numbers are exact
  decimals, so what leaves the rounding open is a line that is exactly a tie
  (4.14*4.43 + 1.21*4.56 could end in 50) or a calculator's last digit; and a nonzero
  margin lets the float prefilter reject these draws before they are built.
"""

from __future__ import annotations

from fractions import Fraction

from flint import arb

from symformer.engine import Derivation
from symformer.engine.arbmath import NEG_INF, ArbMatrix, precision
from symformer.engine.rounding import ball_bounds, moderate
from symformer.exercise.cells import asked_rows, entries_of
from symformer.exercise.margin import PRECISION
from symformer.exercise.path import student_chain
from symformer.exercise.settings import Settings


def score_stages(g: Derivation, asked: list[str]) -> list[str]:
    """The scaled-score stages a student exponentiates or writes: asked ones, and the
    scores an asked softmax reads."""
    found = [n for n in asked if g[n].op.keeps_mask]
    found += [g[n].inputs[0] for n in asked if g[n].op.weighs_keys
              and g[g[n].inputs[0]].op.keeps_mask and g[n].inputs[0] not in found]
    return found


def score_failure(g: Derivation, asked: list[str], bound: Fraction | None,
                  balls: dict[str, ArbMatrix]) -> str | None:
    """The first scaled score not proved within ``[-bound, bound]``, else None."""
    if bound is None:
        return None
    for name in score_stages(g, asked):
        rows = _score_rows(g, asked, name)
        for i, row in enumerate(balls[name]):
            for j, b in enumerate(row):
                if b is NEG_INF or i not in rows:
                    continue
                if not moderate(b) or not _within(b, -bound, bound):
                    return f"{name}[{i},{j}]"
    return None


def _score_rows(g: Derivation, asked: list[str], name: str) -> set[int]:
    """The rows of score stage ``name`` a student exponentiates or writes."""
    rows = set(asked_rows(asked, name, g[name].shape)) if name in asked else set()
    for n in asked:
        if g[n].op.weighs_keys and g[n].inputs[0] == name:
            rows |= set(asked_rows(asked, n, g[n].shape))
    return rows


def _within(b: arb, low: Fraction, high: Fraction) -> bool:
    lo, hi = ball_bounds(b)
    return low <= lo and hi <= high


def saturated_failure(g: Derivation, asked: list[str], bound: Fraction,
                      balls: dict[str, ArbMatrix]) -> str | None:
    """The first asked softmax row whose largest weight is not proved <= ``bound``."""
    for name in asked:
        if not g[name].op.weighs_keys:
            continue
        scores = balls[g[name].inputs[0]]
        rows = asked_rows(asked, name, g[name].shape)
        for i, row in enumerate(balls[name]):
            if i not in rows:
                continue
            live = [b for b, s in zip(row, scores[i]) if s is not NEG_INF]
            if len(live) < 2:
                continue
            if not all(moderate(b) and ball_bounds(b)[1] <= bound for b in live):
                return f"{name} row {i}"
    return None


def relu_failure(g: Derivation, asked: list[str], where: str, token: int,
                 balls: dict[str, ArbMatrix]) -> str | None:
    """The first asked activation whose input lacks a proved positive or a proved
    negative entry (in row ``token``, or in its table: ``where``)."""
    if where == "off":
        return None
    for name in asked:
        if not g[name].op.activates:
            continue
        source = g[name].inputs[0]
        rows = [balls[source][token]] if where == "token" else balls[source]
        entries = [b for row in rows for b in row if b is not NEG_INF]
        if not (any(b > 0 for b in entries) and any(b < 0 for b in entries)):
            return f"{name} (its input {source}" + (f" row {token})" if where == "token"
                                                    else ")")
    return None


def stated_failure(g: Derivation, asked: list[str], decimals: int,
                   balls: dict[str, ArbMatrix]) -> str | None:
    """The first asked entry that is not exactly 0 yet not proved to round to a
    nonzero number (``|v| * 10**decimals > 1/2``)."""
    with precision(PRECISION):
        half = arb(1) / 2
        for name in asked:
            cells = entries_of(asked, name, g[name].shape)
            for i, row in enumerate(balls[name]):
                for j, b in enumerate(row):
                    if b is NEG_INF or (b.is_exact() and b == 0) or (i, j) not in cells:
                        continue
                    if not abs(b * 10 ** decimals) > half:
                        return f"{name}[{i},{j}]"
    return None


#: The student's path clears ``margin / PATH_SHARE`` (see the module docstring).
PATH_SHARE = 10


def path_failure(g: Derivation, asked: list[str], decimals: int, margin: Fraction,
                 balls: dict[str, ArbMatrix]) -> str | None:
    """The first asked entry whose student's-path line lies within ``margin`` units of
    the last decimal of a rounding boundary (a tie, or nearly), or whose softmax line
    over the rounded exponentials rounds otherwise (:func:`~.path.student_chain`)."""
    return student_chain(g, asked, decimals, balls, margin)[1]


#: The constraints the float prefilter also decides (it checks them in this order).
PREFILTERED = ("score", "saturated", "stated")


def fair_failure(g: Derivation, asked: list[str], decimals: int, settings: Settings,
                 token: int, balls: dict[str, ArbMatrix], which: tuple[str, ...]
                 ) -> tuple[str, str] | None:
    """The first of the fairness constraints ``which`` the draw fails and its entry
    (checked in this module's order), else None."""
    checks = (("score", lambda: score_failure(g, asked, settings.max_score, balls)),
              ("saturated", lambda: saturated_failure(g, asked, settings.max_weight, balls)),
              ("relu", lambda: relu_failure(g, asked, settings.relu_signs, token, balls)),
              ("stated", lambda: stated_failure(g, asked, decimals, balls)
               if settings.stated else None),
              ("path", lambda: path_failure(g, asked, decimals, settings.margin / PATH_SHARE,
                                            balls)))
    for reason, check in checks:
        if reason not in which:
            continue
        failed = check()
        if failed is not None:
            return reason, failed
    return None
