"""Backward quantities at significant figures, not fixed decimals.

Gradients span magnitudes: at 5 decimals ``0.01588`` keeps 4 significant digits and
``0.0001591`` only 3, and a worked line that multiplies such operands drifts off its
table (``-0.06088`` for a table's ``-0.06086``).  Numerical-methods texts print such
quantities at significant figures; so do the notes' Backward part and the HTML trace:

* :class:`SignificantValues` prints every entry at significant digits (certified
  roundings), whatever precision a worked line asks for: a block's table (its lines'
  results) at :data:`DEFAULT_DIGITS`, the operands its lines read at one number of
  significant digits;
* :func:`choose_digits` picks that number for a block: the fewest, from
  :data:`DEFAULT_DIGITS` up, with which every line of the block lands on its table
  (a caller's test), at most :data:`MOST_DIGITS`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from symformer.engine import Stage
from symformer.engine.rounding import decimal_fraction, leading_exponent
from symformer.worked.build import Values
from symformer.worked.numbers import integer_values

#: The fewest significant digits a backward block prints.
DEFAULT_DIGITS = 4
#: The most :func:`choose_digits` tries (issue 39: a worked line past 6 significant
#: digits is no longer read; where 6 do not land, the line prints the table's value as
#: its ``(exact: …)`` remark, which says why).
MOST_DIGITS = 6


#: Per derivation, each stage's table at each number of significant digits (the
#: notes' Backward part tries several digits per block, every export of a derivation
#: prints the same tables).
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class SignificantValues(Values):
    """Certified entries at ``digits`` significant digits (an exact 0 as ``0``, a stage
    of exact integers as integers); the ``decimals`` a caller passes are ignored.

    ``table_stage``, when given, is the stage whose table a block prints: its entries
    (the worked lines' results) keep :data:`DEFAULT_DIGITS`, while the operands read
    from every other stage get ``digits``."""

    def __init__(self, digits: int = DEFAULT_DIGITS, table_stage: str | None = None) -> None:
        super().__init__()
        self.digits, self.table_stage = digits, table_stage
        self._significant: dict[str, list[list[str]]] = {}

    def digits_of(self, stage: Stage) -> int:
        """The significant digits ``stage``'s entries print at."""
        return DEFAULT_DIGITS if stage.name == self.table_stage else self.digits

    def table(self, stage: Stage) -> list[list[str]]:
        """Every entry of ``stage`` as :meth:`text` prints it."""
        if stage.name not in self._significant:
            digits = self.digits_of(stage)
            known = _TABLES.setdefault(stage.derivation, {})
            if (stage.name, digits) not in known:  # stages never change: once per digits
                known[stage.name, digits] = integer_values(stage, 0) or \
                    self._rounded(stage, digits)
            self._significant[stage.name] = known[stage.name, digits]
        return self._significant[stage.name]

    def text(self, stage: Stage, i: int, j: int, decimals: int) -> str:
        """Entry (i, j) at :attr:`digits` significant digits."""
        return self.table(stage)[i][j]

    def _rounded(self, stage: Stage, digits: int) -> list[list[str]]:
        """Each entry rounded at the decimals that show ``digits`` significant digits
        of it (read from a first rounding at :data:`PROBE` decimals).  An entry that
        is 0 at those decimals prints as ``0`` when it is proved exactly 0 (its ball is
        the point 0, or the engine's exact proof), else rounded to ``digits`` decimals
        (``0.0000``, certified: a value
        this small is zero to every digit a worked line can carry)."""
        probe = stage.values(decimals=PROBE)
        balls = None
        by_decimals: dict[int, list[list[str]]] = {PROBE: probe}
        out = []
        for i, row in enumerate(probe):
            line = []
            for j, text in enumerate(row):
                if text == "-inf":
                    line.append(text)
                    continue
                value = decimal_fraction(text)
                if value == 0:
                    balls = balls or stage.balls(128)
                    if _proved_zero(stage, balls[i][j], i, j):
                        line.append("0")
                        continue
                    places = digits  # below 10^-12: its first digits say nothing
                    if places not in by_decimals:
                        by_decimals[places] = stage.values(decimals=places)
                    line.append(by_decimals[places][i][j])
                    continue
                places = max(0, digits - 1 - leading_exponent(abs(value)))
                for shown in (places, places - 1):  # 0.999996 at 5 digits: 1.0000
                    if shown not in by_decimals:
                        by_decimals[shown] = stage.values(decimals=shown)
                    text = by_decimals[shown][i][j]
                    if shown == 0 or _count(text) <= digits:
                        break
                line.append(text)
            out.append(line)
        return out


#: The decimals of the first rounding that finds each entry's magnitude.
PROBE = 12


#: The budget of the proof that an entry printing as 0 is exactly 0 (a LayerNorm
#: mean's gradient takes a few unfoldings; a longer proof is not tried: the entry then
#: prints as its rounding, 0.0000).
ZERO_PROOF_OPS, ZERO_PROOF_UNFOLD = 400, 8


def _proved_zero(stage: Stage, ball, i: int, j: int) -> bool:
    """Whether entry (i, j), whose ball is ``ball``, is exactly 0: the ball is the point
    0, or :meth:`~symformer.engine.Derivation.prove_zero` proves its local formula 0
    (the gradient at a LayerNorm's mean: a sum that cancels)."""
    if ball.mid() == 0 and ball.rad() == 0:
        return True
    g = stage.derivation
    return g.prove_zero(g.certification.resolved_local(stage.name, i, j),
                        max_ops=ZERO_PROOF_OPS, max_unfold=ZERO_PROOF_UNFOLD)


def _count(text: str) -> int:
    """The significant digits a printed decimal shows."""
    return len(text.lstrip("-").replace(".", "").lstrip("0"))


def choose_digits(lands: Callable[[int], bool], start: int = DEFAULT_DIGITS,
                  most: int = MOST_DIGITS) -> int:
    """The fewest significant digits from ``start`` up to ``most`` for which
    ``lands(digits)`` holds (every worked line of a block gives its table's value);
    ``most`` when none does."""
    for digits in range(start, most + 1):
        if lands(digits):
            return digits
    return most
