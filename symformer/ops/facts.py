"""What ``prove`` states: a :class:`Fact` and its status.

Operations state the facts about one of their stages (``Operation.facts(stage)``:
a softmax's rows sum to 1, a LayerNorm's rows have mean 0, ...); facts about a
whole composition (the decoder never looks ahead) are stated by
:mod:`symformer.verify.prove`, which also gathers the operations' facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

#: The statuses of a fact: proved symbolically, certified by ball arithmetic,
#: shown false (with a counterexample), or vacuous (nothing to prove).
PROVED, CERTIFIED, FALSE, VACUOUS = "proved", "certified", "false", "vacuous"


@dataclass
class Fact:
    """One identity and its status; ``detail`` says how (or the counterexample)."""

    name: str
    statement: str
    status: str
    detail: str

    @property
    def holds(self) -> bool:
        """True unless the fact was shown false."""
        return self.status != FALSE


@dataclass
class Tally(Fact):
    """A fact about ``count`` entries of one stage, which ``prove`` adds up over stages
    into one fact (the masked weights of every head are exactly 0)."""

    count: int = 0


def cancels(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is exactly 0 by cancellation: the numerator over a common
    denominator expands to 0 (stage symbols stay free: an identity for any values)."""
    return sympy.expand(sympy.together(expr).as_numer_denom()[0]) == 0


def label(stage: Stage) -> str:
    """`` (causal)`` for a stage of the causally masked derivation, `` (unmasked)`` for
    an encoder stage of the unmasked derivation of a causal example (``prove`` derives
    both), else ``""``: a fact about the example as given is not labelled."""
    g = stage.derivation
    if g.causal:
        return " (causal)"
    return " (unmasked)" if g.example.causal and stage.side == "encoder" else ""
