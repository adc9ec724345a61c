"""Conventions an author's numbers follow that are not a variant of the example, named
in a wrong claim's "why" (docs/verify.md, "Explanations"):

* the max-subtracted softmax: e^{s − max s} claimed on ``S.exp`` (their sums on
  ``S.exp_sum``), s − max s claimed on the softmax's input;
* truncation: every number cut off after its last printed digit, toward zero;
* Adam's step counted from 0: 1 − β^(t−1) claimed on ``stepT.adam_correction1``/``2``,
  m_t / (1 − β₁^(t−1)) on ``stepT.adam_mhat.W`` (v̂ likewise);
* a mixture's gates under the other convention: the router's probabilities as they are
  (the Switch Transformer's) or renormalised over the kept experts (Mixtral's).

Each is decided on certified balls like the claim itself, and stops at the first
number it does not make right.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

from symformer.blocks.side_stages import add_side_stage
from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.errors import UndecidedError
from symformer.example.expression import Constant
from symformer.lazy import sympy
from symformer.ops.moe import Gates
from symformer.verify.chain import Values, ball, decide
from symformer.verify.claims import Claim

#: A softmax's exponentials or their sums (``S.exp``, ``S.exp_sum``).
_EXP = re.compile(r"(?P<stage>.+)\.(?P<key>exp|exp_sum)")
#: An Adam step's bias correction or bias-corrected moment.
_ADAM = re.compile(r"step(?P<step>[0-9]+)\.adam_(?:correction(?P<k>[12])|"
                   r"(?P<part>mhat|vhat)\..+)")
#: How every "why" of this module starts.
OTHER = "every number is right under another convention: "


def targets(claim: Claim) -> dict:
    """(i, j) of the claim's values -> (stage row, stage column, claimed, half a unit):
    what :func:`~symformer.verify.chain.decide` decides."""
    return {(i, j): (claim.row_indices[i], claim.col_indices[j], claim.number(i, j),
                     claim.half_at(i, j))
            for i in range(len(claim.values)) for j in range(len(claim.values[0]))}


def right_under(g: Derivation, claim: Claim, values: Callable[[int], Values],
                stage: str | None = None) -> bool:
    """Is every claimed number right against ``values`` (of ``stage`` of ``g``, where a
    tie is proved)?  False when undecided."""
    try:
        verdicts = decide(targets(claim), values, g, stage or claim.stage, claim.where,
                          all_or_none=True)
    except UndecidedError:
        return False
    return all(verdicts.values())


def explanations(g: Derivation, claim: Claim) -> list[str]:
    """The conventions of this module that make every number of ``claim`` right."""
    return [why for why in (max_shift(g, claim), truncation(g, claim), adam_step(g, claim),
                            gates(g, claim)) if why]


def max_shift(g: Derivation, claim: Claim) -> str | None:
    """Are a softmax's claimed exponentials (``S.exp``) or their sums (``S.exp_sum``)
    the max-subtracted ones, e^{s − max s}, as numerically stable code computes them?
    Or its claimed input (the scores, the logits) the shifted s − max s?"""
    match = _EXP.fullmatch(claim.stage)
    if match is not None and match["stage"] in g and g[match["stage"]].op.name == "softmax":
        other, what = f"{match['stage']}.shifted_{match['key']}", "e^(s - max s)"
    else:
        readers = [s.name for s in g if s.op.name == "softmax" and s.inputs
                   and s.inputs[0] == claim.stage]
        if not readers:
            return None
        other, what = f"{readers[0]}.shifted", "s - max s"
    add_side_stage(g, other)
    if not right_under(g, claim, lambda bits: g.evaluate(bits)[other], other):
        return None
    return (f"{OTHER}the max-subtracted softmax (each row's largest score subtracted "
            f"first, {what}, as numerically stable code computes it; its address is "
            f"{other})")


def adam_step(g: Derivation, claim: Claim) -> str | None:
    """Are a claimed Adam bias correction (``stepT.adam_correction1``: 1 − β₁^t) or
    bias-corrected moment (``stepT.adam_mhat.W``: m_t / (1 − β₁^t)) the ones with
    β^(t−1), the step counted from 0?"""
    match = _ADAM.fullmatch(claim.stage)
    if match is None or int(match["step"]) < 2:
        return None
    t, s = int(match["step"]), g[claim.stage]
    if match["k"]:
        steps = [x.op for x in g if x.name.startswith(f"step{t}.") and x.op.name == "adam_step"]
        if not steps:
            return None
        beta = steps[0].beta1 if match["k"] == "1" else steps[0].beta2
        earlier = 1 - sympy.Rational(beta) ** (t - 1)

        def values(bits: int) -> Values:
            return [[earlier]]
    else:
        beta = s.op.beta1 if match["part"] == "mhat" else s.op.beta2
        earlier = 1 - sympy.Rational(beta) ** (t - 1)
        moment = s.inputs[1 if match["part"] == "mhat" else 2]

        def values(bits: int) -> Values:
            with precision(bits):
                c = ball(Fraction(int(earlier.p), int(earlier.q)))
                return [[e / c for e in row] for row in g.evaluate(bits)[moment]]
    if not right_under(g, claim, values):
        return None
    return (f"{OTHER}Adam's bias correction with β^(t−1), the step counted from 0 (Adam, "
            f"PyTorch and this run use 1 − β^t at step t = {t})")


def gates(g: Derivation, claim: Claim) -> str | None:
    """Are a mixture's claimed gates the other convention: the router's probabilities
    as they are (the Switch Transformer's) where the example renormalises them over
    the kept experts (Mixtral's), or the other way round?"""
    s = g[claim.stage]
    if s.op.name != "gates":
        return None
    other = Gates(not s.op.renormalize)

    def values(bits: int) -> Values:
        found = g.evaluate(bits)
        with precision(bits):
            return other.arb([found[name] for name in s.inputs])
    if not right_under(g, claim, values):
        return None
    return OTHER + ("the kept experts' router probabilities as they are, not renormalised "
                    "(the Switch Transformer's gates; renormalize = false)"
                    if s.op.renormalize else "the kept experts' router probabilities "
                    "renormalised over them (Mixtral's gates; renormalize = true)")


def truncation(g: Derivation, claim: Claim) -> str | None:
    """Is every claimed number the exact value cut off after its last printed digit
    (truncated toward zero, as int() or astype(int) does) rather than rounded?"""
    inside, ends = {}, {}
    for i, r in enumerate(claim.row_indices):
        for j, c in enumerate(claim.col_indices):
            value = claim.number(i, j)
            if value is None or isinstance(value, Constant) or claim.half_at(i, j) == 0:
                return None
            unit = 2 * claim.half_at(i, j)
            # x in [c, c + u) for c > 0, (c - u, c] for c < 0, (-u, u) for c = 0: the
            # closed interval, then the far end excluded (c + u is cut off to c + u)
            centre = value + unit / 2 if value > 0 else value - unit / 2 if value < 0 \
                else value
            inside[i, j] = (r, c, centre, unit / 2 if value else unit)
            for k, end in enumerate([value + unit] if value > 0 else [value - unit]
                                    if value < 0 else [-unit, unit]):
                ends[i, j, k] = (r, c, end, Fraction(0))

    def values(bits: int) -> Values:
        return g.evaluate(bits)[claim.stage]
    try:
        if not all(decide(inside, values, g, claim.stage, claim.where,
                          all_or_none=True).values()):
            return None
        if any(decide(ends, values, g, claim.stage, claim.where).values()):
            return None  # an exact value at the far end: cut off, it is the next number
    except UndecidedError:
        return None
    return (f"{OTHER}truncation (each exact value cut off after its last printed digit, "
            f"toward zero, as int() or astype(int) does, not rounded)")
