"""Which stages repeat a computation shown before: the second head, the second layer.

Two stages are the same computation when they have the same operation and print the
same general equation up to the superscripts saying where symbols sit (head 2's
``q^{(2)}`` is computed by the same rule as head 1's ``q^{(1)}``).  The notes and the
slides work the first such stage in full and show the others as their tables, with a
sentence saying where the rule was worked (``--full`` works every one).
"""

from __future__ import annotations

import re

from symformer.engine import Stage
from symformer.equations.stage import equation_lines

#: The superscript saying where a symbol sits (``q^{(2)}``, ``W_Q^{(1,2)}``: see
#: :func:`symformer.notation.where` and ``Notation.at``).
WHERE = re.compile(r"\^\{\(\d+(?:,\d+)*\)\}")


#: The primes that tell a block's second sub-layer's symbols from its first's
#: (``\\mu'``, ``y'``, ``\\gamma^{\\prime}``).
PRIMES = re.compile(r"'|\^\{\\prime\}|\\prime")


#: The accents that tell a final norm's or a decoder's symbols from a layer's or an
#: encoder's (``\hat{y}``, ``\bar{q}``, ``\overline{\mathrm{PE}}``:
#: :func:`symformer.notation.marked`).
MARKS = re.compile(r"\\(?:bar|hat|overline)\{((?:[^{}]|\{[^{}]*\})*)\}")


def equation_key(stage: Stage, primes: bool = False) -> tuple:
    """What makes two stages the same computation: their operation and their general
    equation as printed, up to the superscripts saying where symbols sit; with
    ``primes``, also up to primes and marks (the second norm and the final norm are
    computed as the first)."""
    def plain(text: str) -> str:
        text = WHERE.sub("", text)
        return MARKS.sub(r"\1", PRIMES.sub("", text)) if primes else text
    return (type(stage.op), tuple((plain(e.lhs), plain(e.rhs))
                                  for e in equation_lines(stage)))


def slot_key(stage: Stage) -> tuple:
    """Where a stage sits up to its layer and head numbers (``layer#.head#.Q``) and
    its side (a decoder's FFN is the encoder's), with its operation and width: the same
    step of another layer or head (whose equation reads that layer's own input,
    ``r'^{(1)}`` for ``x``)."""
    name = stage.name.removeprefix("grad.").removeprefix("decoder.")
    return (type(stage.op), stage.shape[1], re.sub(r"\d+", "#", name))




#: A decoder's self- or cross-attention in a stage's name: a weight's gradient in one
#: follows the rule of the same weight's in the other (``X^T dL/dQ`` reads another X).
_ATTENTION = re.compile(r"\.(?:self|cross)\.")


def attends(stage: Stage) -> bool:
    """True for a step of attention proper, by its operation's declarations: one entry
    per key (scores, weights) or the weights' sum of the values.  Its projections are
    the encoder's; a decoder's (masked, or across to the encoder) are worked even where
    the encoder's are the same rule."""
    return stage.op.columns == "keys" or stage.op.matrix_form == "product"


class Repeats:
    """Remembers the first stage of each computation: :meth:`first` gives the stage a
    later one repeats (or itself, the first time).  A stage repeats an earlier one
    with the same equation (:func:`equation_key`, up to primes by default) or at the
    same place of another layer or head (:func:`slot_key`); without ``sides``, a weight's
    gradient repeats the same weight's of the other attention sub-layer."""

    def __init__(self, primes: bool = True, sides: bool = True) -> None:
        self._first: dict[tuple, Stage] = {}
        self.primes, self.sides = primes, sides

    def _keys(self, stage: Stage) -> tuple[tuple, ...]:
        """The stage's keys; with ``sides``, an attention stage's within its side: a
        decoder's masked self-attention and its cross-attention are worked, not shown as
        the encoder's attention again (its norms and FFN are)."""
        side = stage.side if self.sides and attends(stage) else ""
        keys = [("equation", side, equation_key(stage, self.primes))]
        if stage.layer:  # a step inside a layer (a decoder's output is not the encoder's)
            keys.append(("slot", side, slot_key(stage)))
            if not self.sides and stage.op.of_weight:  # X^T dL/dQ, whatever X is
                kind, cols, name = slot_key(stage)
                keys.append(("weight", kind, cols, _ATTENTION.sub(".", name)))
        return tuple(keys)

    def first(self, stage: Stage) -> Stage:
        """The first stage seen with ``stage``'s computation (``stage`` if none)."""
        keys = self._keys(stage)
        found = next((self._first[k] for k in keys if k in self._first), stage)
        for k in keys:
            self._first.setdefault(k, found)
        return found

    def seen(self, stage: Stage) -> bool:
        """Whether a stage with ``stage``'s computation was recorded (records nothing)."""
        return any(k in self._first for k in self._keys(stage))

    def repeats(self, stage: Stage) -> bool:
        """Whether a stage with the same computation was seen before (records it)."""
        return self.first(stage) is not stage
