"""The encoder and decoder in plain NumPy floats: every operation's own function, run.

There is no second implementation here.  Each operation (:mod:`symformer.ops`)
owns a small NumPy function (``op.function()``); :func:`run` walks the derivation
graph in order and calls, for every stage,
``stage.op.reference([out[i] for i in stage.inputs], dtype)``, which runs that
function.  The printed general equations are the operations' declared index
equations (:mod:`symformer.equations`), proved equal to their exact formulas; this
module is the float64 path, and :class:`Run` records which function ran for each stage.

Other conventions (mask, LayerNorm variant including whole-matrix, pre/post norm)
are other graphs: :func:`forward` derives the variant graph
(:func:`symformer.conventions.derive_variant`, which builds no formula)
and runs it the same way.  The example's exact numbers become floats inside the
operations (``symformer.ops.base.matrix``) and only there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from symformer.engine import Derivation


@dataclass
class Run:
    """The floats of every stage computed so far, and the function that computed each.

    If a stage fails, ``values`` keeps every stage computed before it (so a caller
    such as ``crosscheck`` can report the rest as not computed).
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)


def forward_stages(g: Derivation) -> list[Any]:
    """The stages of the forward pass (the loss included), in order."""
    return [s for s in g if not s.op.is_gradient]  # the backward pass's: not run here


def run_stage(stage: Any, inputs: list[np.ndarray], dtype: type) -> np.ndarray:
    """One stage's floats: its operation's reference on its inputs' floats."""
    return stage.op.reference(inputs, dtype)


def run(g: Derivation, dtype: type = np.float64, into: Run | None = None) -> Run:
    """Every forward stage of ``g`` in floats, in order, recorded in ``into`` as it is
    computed (the loss included; gradient stages are the backward pass's:
    :mod:`symformer.reference.numpy_backward`)."""
    result = into if into is not None else Run()
    for stage in forward_stages(g):
        inputs = [result.values[name] for name in stage.inputs]
        function = stage.op.function()
        result.values[stage.name] = run_stage(stage, inputs, dtype)
        result.functions[stage.name] = function
    return result


def variant(example: Any, causal: bool | None = None, mask: str | float | None = None,
            layer_norm: str | None = None, norm: str | None = None,
            max_work: int | None = None) -> Derivation:
    """The graph of the example under the given conventions (``None``: the example's)."""
    from symformer.conventions import Convention, derive_variant

    convention = Convention(None if mask is None else str(mask), layer_norm, norm)
    return derive_variant(example, convention, causal, max_work)


def forward(example: Any, causal: bool | None = None, dtype: type = np.float64,
            mask: str | float | None = None, layer_norm: str | None = None,
            norm: str | None = None) -> dict[str, np.ndarray]:
    """Every stage of the example in floats, under the engine's stage names.

    ``causal``, ``mask``, ``layer_norm`` and ``norm`` default to the example's own
    settings (``None``); give them to compute another convention.  ``mask`` is
    ``"-inf"`` or a negative number (text or float, e.g. ``"-1e9"``); ``layer_norm``
    one of :data:`~symformer.example.schema.LAYER_NORMS`; ``norm`` ``"post"`` or
    ``"pre"``.  The decoder, if
    the example has one, follows the same conventions (its self-attention is
    always causal; ``causal`` concerns the encoder).
    """
    return run(variant(example, causal, mask, layer_norm, norm), dtype).values
