"""What ``symformer prove`` proves about a step, stated where the notes teach it.

A chapter says, next to the attention weights, that a row of α is a convex combination
(so a head's output is a weighted average of the value rows), and next to LayerNorm
that its output's variance is σ²/(σ²+ε), not 1.  These sentences come only from the
facts the step's operation proves on the example's own formulas
(``stage.op.facts(stage)``, the facts of ``symformer prove``): a fact not proved (or
shown false) is never stated, and no sentence is written for a step without one.

:func:`property_prose` gives the paragraph for one stage (None when there is nothing
proved to say); the notes put it after the stage's table.
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.latex.blocks import Math, Prose
from symformer.notation import symbol
from symformer.ops.facts import FALSE, PROVED, Fact

#: The words that open every such paragraph: where the claim comes from.
PROVED_HERE = "Proved on this example\u2019s exact formulas (as symformer prove does): "


def _facts(stage: Stage) -> dict[str, Fact]:
    """The stage's facts by their last name part (``row_sums``, ``variance``, …)."""
    out = {}
    for fact in stage.op.facts(stage):
        key = fact.name.removeprefix(f"{stage.name}.").split(" ")[0].split("(")[0]
        out[key] = fact
    return out


def property_prose(stage: Stage) -> Prose | None:
    """The paragraph stating what is proved about ``stage`` where a chapter teaches it,
    or None.  Attention weights (the operation's columns are the keys): every row sums
    to exactly 1 and is a convex combination.  Probabilities (its columns are the
    vocabulary): a distribution.  A normalisation with mean and variance facts: mean 0
    and variance σ²/(σ²+ε), and — when the "variance 1" claim is shown false — not 1."""
    facts = _facts(stage)
    own = symbol(stage).latex
    sums = facts.get("row_sums")
    if sums is not None and sums.status == PROVED:
        if stage.op.columns == "keys":
            return Prose((PROVED_HERE, "every row of ", Math(own), " sums to exactly 1, and "
                          "each entry, an exponential divided by the row\u2019s sum of "
                          "exponentials, is at least 0. Each row is therefore a convex "
                          "combination: the head\u2019s output for a token is a weighted "
                          "average of the value rows, never outside their range."))
        if stage.op.columns == "vocab":
            return Prose((PROVED_HERE, "every row of ", Math(own), " sums to exactly 1: "
                          "a probability distribution over the vocabulary."))
    mean, variance = facts.get("mean"), facts.get("variance")
    if mean is None or variance is None or {mean.status, variance.status} != {PROVED}:
        return None
    sigma = symbol(stage.derivation[stage.inputs[2]]).latex
    parts: list[str | Math] = [
        PROVED_HERE, "before the scale and the shift, every row of ", Math(own),
        " has mean exactly 0 and variance exactly ",
        Math(rf"\frac{{{sigma}}}{{{sigma} + \varepsilon}}")]
    unit = facts.get("unit_variance")
    if unit is not None and unit.status == FALSE:
        parts += [", not 1: the ", Math(r"\varepsilon"), " that keeps the division safe "
                  "also keeps the variance just below 1."]
    else:
        parts.append(".")
    return Prose(tuple(parts))
