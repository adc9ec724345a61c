"""Where a stage sits, in the words of the notes' headings and captions.

:func:`symformer.placement.part_of` names a block's parts after its stage names
(``Add & Norm 1``); in a pre-norm block that part is only the residual sum (the norm
is a sub-layer of its own, before attention or the FFN), so the notes call it
``Residual 1``: nothing is added and normalised there.
"""

from __future__ import annotations

import re

from symformer.engine import Stage
from symformer.placement import part_of

_ADD_NORM = re.compile(r"Add & Norm (\d+)")


def pre_norm(stage: Stage) -> bool:
    """Whether the stage's block normalises before its sub-layers (its norm stages are
    ``layerN.normK``, not ``layerN.add_normK.*``)."""
    g = stage.derivation
    layer = stage.name.split(".")[0] if stage.name.startswith("layer") else None
    if layer is None:
        grad = stage.name.removeprefix("grad.")
        layer = grad.split(".")[0] if grad.startswith("layer") else None
    return layer is not None and f"{layer}.norm1" in g


def where(stage: Stage) -> tuple[str, ...]:
    """:func:`~symformer.placement.part_of`, a pre-norm block's residual called so."""
    parts = part_of(stage)
    if not pre_norm(stage):
        return parts
    return tuple(_ADD_NORM.sub(r"Residual \1", p) for p in parts)
