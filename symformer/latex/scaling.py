"""Why the scores are divided by √d_k, with the example's own numbers.

Textbooks argue: if the entries of q and k are independent with variance 1, a dot
product q·k of d_k terms has variance d_k, so softmax of unscaled scores saturates as
d_k grows; dividing by √d_k brings the variance back to 1.  The notes make the same
point with the numbers of the example at hand: the variance of the first head's n·m
dot products ``u_ij = q_i · k_j`` (every query against every key, before the mask),
and of the scaled scores ``u_ij / √d_k``, which is exactly the first divided by d_k.

Both are computed here in ball arithmetic from the stage's exact entries and printed
as certified roundings (nothing is printed when a rounding is undecided).  The
paragraph says what it is computed from: which entries, and that it is the population
variance (dividing by their number).
"""

from __future__ import annotations

from symformer.engine import Stage
from symformer.engine.rounding import round_ball
from symformer.latex.blocks import Math, Prose

#: Bits of the ball arithmetic (the dot products' balls are far narrower).
PRECISION = 256


def _variance_ball(stage: Stage):
    """The population variance of the stage's entries, as a ball."""
    entries = [x for row in stage.balls(PRECISION) for x in row]
    n = len(entries)
    mean = sum(entries[1:], entries[0]) / n
    return sum(((x - mean) ** 2 for x in entries[1:]), (entries[0] - mean) ** 2) / n


def scale_prose(stage: Stage, decimals: int) -> list[Prose]:
    """The √d_k paragraph, said once, after the first layer's attention sub-layer
    (``stage``: its multi-head output, or the first head's weights when the layer has
    none), with the first head's numbers; ``[]`` for any other stage, for scores not
    divided by √d_k, or when a rounding is undecided."""
    if stage.layer != 1 or stage.name.startswith("grad.") or stage.name != _place(stage) \
            or stage.side != next(iter(stage.derivation)).side:  # once: the first side
        return []
    weights = _first_weights(stage)
    if weights is None or not weights.inputs:
        return []
    stage = weights.derivation[weights.inputs[0]]
    op = stage.op
    if op.matrix_form != "scores" or op.scale is not None or not stage.inputs:
        return []
    raw = stage.derivation[stage.inputs[0]]
    if raw.op.matrix_form != "dot_products":
        return []
    d_k = _d_k(stage)
    if d_k is None or d_k < 1:
        return []
    ball = _variance_ball(raw)
    raw_var, scaled_var = round_ball(ball, decimals=decimals), \
        round_ball(ball / d_k, decimals=decimals)
    if raw_var is None or scaled_var is None:
        return []
    rows, cols = raw.shape
    n = rows * cols
    return [Prose((
        "Why head 1\u2019s scores are divided by ", Math(r"\sqrt{d_k}"), f": its {n} dot "
        "products (every query "
        "against every key, from their exact values) have variance ",
        Math(rf"\approx {raw_var.fixed()}"), " (mean squared deviation from their mean), "
        "the scores, divided by ", Math(rf"\sqrt{{{d_k}}}"), ", ",
        Math(rf"\approx {scaled_var.fixed()}"), f" (divided by {d_k}). Unscaled, it grows "
        "with ", Math("d_k"), " and the softmax saturates.",))]


def _first_weights(stage: Stage) -> Stage | None:
    """The attention weights of the first head of ``stage``'s side, in layer 1."""
    return next((s for s in stage.derivation if s.side == stage.side and s.layer == 1
                 and s.head == 1 and s.op.matrix_form == "softmax"
                 and s.op.columns == "keys" and not s.name.startswith("grad.")), None)


def _place(stage: Stage) -> str | None:
    """Where the paragraph goes: layer 1's multi-head output on ``stage``'s side, else
    its first head's weights."""
    g = stage.derivation
    output = next((s for s in g if s.side == stage.side and s.layer == 1
                   and s.op.sublayer_of == "attention" and not s.name.startswith("grad.")),
                  None)
    if output is not None:
        return output.name
    weights = _first_weights(stage)
    return weights.name if weights is not None else None


def _d_k(stage: Stage) -> int | None:
    """The head's d_k: the width of the queries the dot products read."""
    raw = stage.derivation[stage.inputs[0]]
    q = stage.derivation[raw.inputs[0]]
    return q.shape[1] if q.shape else None
