"""The backward pass in plain NumPy floats: every operation's own NumPy VJP, run.

Engine-independent: :func:`run` reads only the *forward* graph's structure (each
stage's inputs and operation) and the forward floats of :mod:`numpy_ref`; it
never reads the gradient stages the engine appends (their values or their local
formulas).  It walks the forward stages the loss depends on in reverse and calls,
for every input and parameter, the operation's ``backward_reference`` (the NumPy
function written from the textbook matrix formula, e.g. ``softmax_backward``),
summing the contributions into each input's gradient:

    dL/dS = sum over the consumers C of S of VJP_C(inputs of C, C, dL/dC).

The results carry the engine's names (``grad.S``, ``grad.layer1.W_1``, ...) so that
``crosscheck`` can compare them stage by stage.
"""

from __future__ import annotations

import numpy as np

from symformer.engine import Derivation
from symformer.errors import NotSupportedError
from symformer.reference import numpy_ref


def run(g: Derivation, dtype: type = np.float64, forward: dict[str, np.ndarray] | None = None,
        loss: str = "loss") -> dict[str, np.ndarray]:
    """dL/dS for every stage S the ``loss`` stage depends on and dL/dP for their weights.

    ``forward``: forward floats already computed, by stage name (the others are
    run here, each by its operation's forward reference).  Returns ``{"grad.loss": 1,
    "grad.S": ..., "grad.<block>.W": ...}``.  An operation without a NumPy backward reference raises
    :class:`NotSupportedError` naming the stage.
    """
    from symformer.blocks.backward import parameter_names, tied_table_stages

    forward = dict(forward or {})
    for stage in numpy_ref.forward_stages(g):  # the forward floats not given
        if stage.name not in forward:
            forward[stage.name] = numpy_ref.run_stage(
                stage, [forward[i] for i in stage.inputs], dtype)
    needed = g.ancestors(loss) | {loss}
    names = parameter_names(g, needed)
    grads: dict[str, np.ndarray] = {loss: np.ones((1, 1), dtype=dtype)}
    weights: dict[str, np.ndarray] = {}
    for stage in reversed([s for s in numpy_ref.forward_stages(g) if s.name in needed]):
        grad = grads[stage.name]
        args, out = [forward[i] for i in stage.inputs], forward[stage.name]
        wrts = [*range(len(stage.inputs)), *stage.op.parameters()]
        for wrt in wrts:
            part = stage.op.backward_reference(wrt, args, out, grad, dtype)
            if part is None:
                raise NotSupportedError(f"{stage.name}: the operation {stage.op.name!r} has no "
                                        f"NumPy backward reference for {wrt!r}")
            if isinstance(wrt, str):
                weights[names[(stage.name, wrt)]] = part
            else:
                source = stage.inputs[wrt]
                grads[source] = grads[source] + part if source in grads else part
    for part in tied_table_stages(g, names):  # a tied table: the total of both uses
        weights[part.name] = part.op.reference([weights[i] for i in part.inputs], dtype)
    return {**{f"grad.{name}": value for name, value in grads.items()}, **weights}
