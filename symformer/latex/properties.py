"""What ``symformer prove`` proves about a step, stated where the notes teach it.

A chapter says, next to the attention weights, that a row of α is a convex combination
(so a head's output is a weighted average of the value rows), and next to LayerNorm
that its output's variance is σ²/(σ²+ε), not 1.  These sentences come only from the
facts the step's operation proves on the example's own formulas
(``stage.op.facts(stage)``, the facts of ``symformer prove``): a fact not proved (or
shown false) is never stated, and no sentence is written for a step without one.

:func:`property_prose` gives the paragraph for one stage (None when there is nothing
proved to say); the notes put it after the stage's table.  Under the causal mask, the
weights of the first layer add prove's ``last_token_unchanged`` when it is proved.
"""

from __future__ import annotations

import weakref

from symformer.engine import Stage
from symformer.latex.blocks import Math, Prose
from symformer.notation import symbol
from symformer.ops.facts import FALSE, PROVED, Fact

#: The words that open every such paragraph: where the claim comes from.
PROVED_HERE = "Proved exactly (symformer prove): "


def _facts(stage: Stage) -> dict[str, Fact]:
    """The stage's facts by their last name part (``row_sums``, ``variance``, …)."""
    out = {}
    for fact in stage.op.facts(stage):
        key = fact.name.removeprefix(f"{stage.name}.").split(" ")[0].split("(")[0]
        out[key] = fact
    return out


def _last_token(stage: Stage) -> tuple[str, ...]:
    """Under the causal mask, in the first layer: prove's ``last_token_unchanged`` (the
    last token's row is the same with and without the mask), as a sentence when it is
    proved on the two derivations' local formulas; else nothing."""
    g = stage.derivation
    if not g.causal or stage.layer != 1 or stage.side != "encoder":
        return ()
    fact = _unchanged(g)
    if fact.status != PROVED:
        return ()
    where = ("its output" if fact.statement.startswith("the last token's output") else
             "its row to the end of the first layer")
    return (" The last token\u2019s query sees every key with or without the causal "
            f"mask, so {where} is the same either way.",)


#: prove's last_token_unchanged per causal derivation (one proof per document).
_UNCHANGED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _unchanged(masked) -> Fact:
    """:func:`symformer.verify.prove.last_token_unchanged` of a causal derivation, with
    its unmasked twin derived from the same example."""
    if masked not in _UNCHANGED:
        from symformer.blocks import derive
        from symformer.verify.prove import last_token_unchanged

        plain = derive(masked.example, causal=False)
        _UNCHANGED[masked] = last_token_unchanged(plain, masked)
    return _UNCHANGED[masked]


def property_prose(stage: Stage, again: bool = False) -> Prose | None:
    """The paragraph stating what is proved about ``stage`` where a chapter teaches it,
    or None (``again``: the stage is shown a second time, under the causal mask, and
    only what the mask adds is said).  Attention weights (the operation's columns are
    the keys): every row sums to exactly 1 and is a convex combination, and under the
    causal mask, in the first layer, the last token's row is unchanged.  A softmax over
    the vocabulary gets none: being a distribution is its definition.  A normalisation
    with mean and variance facts: mean 0 and variance σ²/(σ²+ε), and — when the
    "variance 1" claim is shown false — not 1."""
    facts = _facts(stage)
    own = symbol(stage).latex
    sums = facts.get("row_sums")
    if sums is not None and sums.status == PROVED:
        if stage.op.columns == "keys" and again:  # the rest was said unmasked
            last = _last_token(stage)
            return Prose((PROVED_HERE, last[0][1].lower() + last[0][2:])) if last else None
        if stage.op.columns == "keys":  # causal by design: no unmasked twin to compare
            return Prose((PROVED_HERE, "every row of ", Math(own), " sums to exactly 1 with "
                          "no negative entry, so a token\u2019s head output is a weighted "
                          "average (a convex combination) of the value rows."))
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
