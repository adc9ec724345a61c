"""Whether a model has a positional table: a RoPE model (or one without positions) adds
none, so its notes print a sentence for it, no table of zeros, and name its input row
``x = e`` without "+ positional encoding" (forward, notation table and backward)."""

from __future__ import annotations

from symformer.engine import Stage

#: What the input row's title says of an added positional encoding
#: (:data:`symformer.blocks.sublayers.INPUT`).
ADDED = " (embedding + positional encoding)"


def no_positional_table(stage: Stage) -> bool:
    """True for a positional-encoding stage of a model without one (RoPE, or none):
    its table would be all zeros, so a sentence stands for it."""
    return stage.op.encodes_positions and stage.op.adds_nothing


def no_positional_input(stage: Stage) -> bool:
    """True for the input row ``x = e + PE`` of a model without a positional table
    (RoPE, or none): it equals the embeddings, as the positional section says."""
    g = stage.derivation
    return stage.op.matrix_form == "sum" and any(
        no_positional_table(g[name]) for name in stage.inputs if name in g)


def input_title(stage: Stage, title: str) -> str:
    """``title`` (of ``stage`` or of the gradient at it) without "+ positional encoding"
    where the model adds none."""
    return title.replace(ADDED, "") if no_positional_input(stage) else title
