"""The exact argmax of a row of logits: the next token, decided without a float.

Balls that separate the largest logit from the others decide it; logits that no
precision separates are proved equal exactly (two exact balls of one value, such as
the logits of a zero row; their local formulas, then their closed forms) and
reported as a tie.  Float noise never picks a winner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flint import arb

from symformer.engine.rounding import ball_bounds
from symformer.engine.zero import is_zero
from symformer.errors import ClosedFormTooLarge, InputError, UndecidedError

if TYPE_CHECKING:
    from symformer.engine.graph import Derivation

#: Doublings of the precision (from 128 bits) before an argmax is declared undecidable.
_MAX_DOUBLINGS = 6
#: Size limit of the closed forms compared when proving two logits equal.
_TIE_MAX_OPS = 800
#: Stages unfolded (local formulas substituted) when proving two logits equal.
_TIE_UNFOLD = 12


class TieProver:
    """Proves logits of one row exactly equal (results cached per pair).

    The cheap proof works on formulas alone and never evaluates anything, so the
    ``next_token`` stage can use it while the graph is being evaluated; the closed
    forms (which may decide ReLU branches by evaluating) are tried only by
    :meth:`winners`, after every precision failed to separate the logits.
    """

    def __init__(self, g: Derivation, logits: str) -> None:
        self.g, self.logits = g, logits
        self._by_formula: dict[tuple[int, int, int], bool] = {}
        self._by_closed_form: dict[tuple[int, int, int], bool] = {}

    def rebound(self, g: Derivation, rename) -> TieProver:
        """The same prover over ``g``, whose logits stage is ``rename(logits)``."""
        return type(self)(g, rename(self.logits))

    def equal(self, row: int, a: int, b: int, closed_forms: bool = False) -> bool:
        """True only when logits[row, a] = logits[row, b] is proved exactly."""
        key = (row, min(a, b), max(a, b))
        if key not in self._by_formula:
            self._by_formula[key] = self._prove_by_formula(row, a, b)
        if self._by_formula[key] or not closed_forms:
            return self._by_formula[key]
        if key not in self._by_closed_form:
            self._by_closed_form[key] = self._prove_by_closed_form(row, a, b)
        return self._by_closed_form[key]

    def _prove_by_formula(self, row: int, a: int, b: int) -> bool:
        # Zero as a formula over earlier stages' symbols: equal whatever their values.
        local = self.g.local(self.logits)
        return self.g.prove_zero(local[row, a] - local[row, b], max_ops=_TIE_MAX_OPS,
                                 max_unfold=_TIE_UNFOLD, decide_relu=False)

    def _prove_by_closed_form(self, row: int, a: int, b: int) -> bool:
        try:
            return is_zero(self.g.closed_form(self.logits, row, a, _TIE_MAX_OPS)
                           - self.g.closed_form(self.logits, row, b, _TIE_MAX_OPS))
        except ClosedFormTooLarge:
            return False

    def argmax(self, balls: Sequence[arb], row: int,
               closed_forms: bool = False) -> frozenset[int] | None:
        """The argmax set decided from one row of balls, or None if undecided here."""
        live = [j for j, x in enumerate(balls) if x is not None]  # None: -inf, a banned token
        if not all(balls[j].is_finite() for j in live):
            return None  # an overflow or 0/0 upstream: more precision, or an UndecidedError
        bounds = {j: ball_bounds(balls[j]) for j in live}
        best_low = max(low for low, _ in bounds.values())
        candidates = sorted(j for j, (_, high) in bounds.items() if high >= best_low)
        first = balls[candidates[0]]
        # arb's == holds only for two exact balls (radius 0) of one value: a proof
        if all(balls[j] == first or self.equal(row, candidates[0], j, closed_forms)
               for j in candidates[1:]):
            return frozenset(candidates)
        return None

    def winners(self, row: int) -> frozenset[int]:
        """The exact argmax set of one row (several entries: a tie)."""
        prec = 128
        for doubling in range(_MAX_DOUBLINGS):
            last = doubling == _MAX_DOUBLINGS - 1
            found = self.argmax(self.g.evaluate(prec)[self.logits][row], row,
                                closed_forms=last)
            if found is not None:
                return found
            prec *= 2
        raise UndecidedError(
            f"cannot decide the largest entry of {self.logits}[{row}]: some logits agree "
            f"to {prec // 2} bits but could not be proved equal"
        )


@dataclass(frozen=True)
class NextToken:
    """The exact argmax of the last position: one token, or the tokens tied for it."""

    tokens: tuple[str, ...]
    indices: tuple[int, ...]

    @property
    def is_tie(self) -> bool:
        """True when several tokens have exactly the same largest logit."""
        return len(self.tokens) > 1

    @property
    def token(self) -> str | None:
        """The winning token (None for a tie)."""
        return None if self.is_tie else self.tokens[0]

    def __str__(self) -> str:
        if self.is_tie:
            return "tie between " + ", ".join(map(repr, self.tokens))
        return self.tokens[0]


def next_token(g: Derivation) -> NextToken:
    """The next token of a derivation with a ``next_token`` stage, decided exactly."""
    head = g.example.lm_head
    if "next_token" not in g and head is not None and head.masked:
        raise InputError(f"{g.example.source}: no next token: its [lm_head] is a masked-LM "
                         f"head (masked = true), which predicts each position's own token")
    if "next_token" not in g:
        raise InputError(
            f"{g.example.source}: no next token: the example needs a [decoder] table "
            f"with W_vocab or an [lm_head] table (see symformer/examples/encoder_decoder.toml)"
        )
    stage = g["next_token"]
    logits = stage.inputs[0]
    winners = sorted(stage.op.prover.winners(g[logits].shape[0] - 1))
    return NextToken(tuple(stage.cols[j] for j in winners), tuple(winners))
