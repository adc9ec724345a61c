"""The NumPy reference's floats against the certified exact values, stage by stage.

Errors are measured on balls: each float is converted to a ball exactly (a double
is a dyadic rational), the exact value is a 200-bit ball, and their distance is
bounded from above.  The *relative* error of a stage is its largest absolute error
divided by the largest exact magnitude in the stage (so an entry whose exact
value is 0 or tiny does not make it infinite); a stage that is exactly 0 everywhere
uses the absolute error.  A gradient stage divides by the largest magnitude in it
or in the gradients it is computed from (a gradient made small by cancellation
keeps the rounding of its terms).  Masked scores must be -inf on both sides.

With a ``[loss]``, the loss and the gradients ``grad.*`` are compared too, against
a float64 backward pass of the reference's own (:mod:`symformer.reference.numpy_backward`).

``next_token`` (an encoder–decoder example with ``W_vocab``) is a 0/1 indicator, not
a number to round: the float argmax is compared with the exact one, and a
different choice is a failure (see :func:`next_token_error`).  A stage the
reference cannot compute is reported as such, never as a traceback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.blocks.backward import backward
from symformer.conventions import Convention, derive_variant
from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.engine.argmax import next_token
from symformer.example import Example
from symformer.reference import numpy_backward, numpy_ref

#: The precision the exact values are compared at: the one the next token is decided
#: at first (one evaluation serves both), then finer ones where a stage's balls are not
#: far narrower than its largest magnitude (a cancellation): :func:`exact_values`.
BITS = 128
_FINER = (256, 512)
#: A stage's balls are narrow enough when every radius is at most this share of the
#: stage's largest magnitude (float64's rounding is 2^-53 of it: 2^-27 of that).
_NARROW = 2.0 ** -80


@dataclass
class StageError:
    """Largest errors of one stage (upper bounds, as floats for display).

    ``note`` explains a stage that is not compared number by number: one the
    reference could not compute (``ok`` False, errors NaN) or ``next_token``.
    """

    stage: str
    abs_error: float
    rel_error: float
    scale: float          # the largest exact magnitude in the stage
    ok: bool
    note: str = ""


def crosscheck(example: Example, convention: Convention, causal: bool | None = None,
               dtype: type = np.float64, tol: float = 1e-12,
               max_work: int | None = None) -> list[StageError]:
    """Per-stage errors of the NumPy reference against the exact derivation.

    The reference is :func:`numpy_ref.run` on the same variant graph: each stage's
    operation runs its own NumPy function (``op.function()``).  With a
    ``[loss]`` the loss and every gradient stage (``grad.*``) are compared too, with
    :func:`numpy_backward.run`: the operations' NumPy VJPs run backwards over the
    forward graph, never reading the engine's gradient stages.  A stage the
    reference does not compute (or computes with another shape) is reported with a
    note and ``ok`` False, never raised.  ``next_token`` is compared as a choice:
    see :func:`next_token_error`.  ``max_work`` bounds the whole comparison
    (:func:`symformer.blocks.cost.crosscheck_work`; 0: no limit).
    """
    from symformer.blocks.cost import crosscheck_work
    from symformer.blocks.work import check_size

    # the whole comparison bounded by its own estimate, not the forward pass's count
    check_size(example, max_work, crosscheck_work(example), "crosscheck")
    g = derive_variant(example, convention, causal, 0)
    if example.loss is not None:
        backward(g)  # the loss and the gradient stages, compared below
    ran = numpy_ref.Run()
    floats = ran.values
    failure = ""
    try:
        numpy_ref.run(g, dtype, ran)
    except Exception as exc:  # noqa: BLE001 -- reported per stage, never a traceback
        failure = f"the NumPy reference failed: {type(exc).__name__}: {exc}"
    if example.loss is not None and not failure:
        try:
            floats.update(numpy_backward.run(g, dtype, floats))
        except Exception as exc:  # noqa: BLE001 -- reported per stage
            failure = f"the NumPy backward pass failed: {type(exc).__name__}: {exc}"
    exact, bits = exact_values(g)
    out = []
    with precision(bits):
        for stage in g:
            got = floats.get(stage.name)
            if got is None or np.shape(got) != stage.shape:
                note = (failure or "the NumPy reference does not compute this stage"
                        if got is None else
                        f"the NumPy reference gives shape {np.shape(got)}, not {stage.shape}")
                out.append(StageError(stage.name, math.nan, math.nan, math.nan, False, note))
            elif stage.op.picks_token:
                out.append(next_token_error(g, stage.name, got))
            else:
                out.append(_stage_error(stage.name, got, exact[stage.name], tol,
                                        _upstream_scale(g, stage, exact)))
    return out


def exact_values(g: Derivation) -> tuple[dict, int]:
    """Every stage's balls at :data:`BITS` bits, or at a finer precision when some
    stage's balls are wider than :data:`_NARROW` of its largest magnitude; and the
    precision used."""
    for bits in (BITS, *_FINER):
        exact = g.evaluate(bits)
        if all(_narrow(rows) for rows in exact.values()):
            break
    return exact, bits


def _narrow(rows: list) -> bool:
    """True when every ball of a stage is far narrower than the stage's largest
    magnitude (None entries, masked, do not count)."""
    balls = [x for row in rows for x in row if x is not None]
    if not all(x.is_finite() for x in balls):
        return False
    scale = max((abs(float(x.mid())) for x in balls), default=0.0)
    return all(float(x.rad()) <= _NARROW * scale for x in balls)


def _upstream_scale(g: Derivation, stage, exact: dict) -> arb:
    """The largest exact magnitude of the gradients a gradient stage is computed from
    (0 for a forward stage).

    A gradient small by cancellation (a sum of products of order 1 that nearly
    cancel) carries the float rounding of its terms; its error is measured against
    the gradients it is made from, not against its own tiny entries alone.
    """
    scale = arb(0)
    for name in stage.inputs:
        if g[name].op.is_gradient:
            for row in exact[name]:
                for x in row:
                    scale = scale.max(abs(x))
    return scale


def _stage_error(name: str, floats: np.ndarray, exact: list, tol: float,
                 upstream: arb | None = None) -> StageError:
    worst, scale = arb(0), arb(0) if upstream is None else upstream
    mismatch = False
    for row_f, row_x in zip(floats, exact):
        for f, x in zip(row_f, row_x):
            if x is None or math.isinf(f):
                mismatch |= not (x is None and f == -math.inf)
                continue
            worst = worst.max(abs(arb(float(f)) - x))
            scale = scale.max(abs(x))
    rel = worst / scale if scale > 0 else worst
    ok = not mismatch and rel <= arb(tol)  # certain: the whole ball is below tol
    abs_error = math.inf if mismatch else float(worst.upper())
    rel_error = math.inf if mismatch else float(rel.upper())
    return StageError(name, abs_error, rel_error, float(scale.upper()), ok)


def next_token_error(g: Derivation, name: str, floats: np.ndarray) -> StageError:
    """The float argmax against the exact one (decided by the engine, ties included).

    Both are 0/1 indicators over the vocabulary.  The stage is right when they are
    equal, or when the exact answer is a tie and the float picks tokens among the
    tied ones (float rounding may separate exactly equal logits; it cannot be
    blamed for choosing one).  A float choosing another token is a failure, whatever
    the tolerance: the error is 1.
    """
    vocab = g[name].cols
    exact = set(next_token(g).indices)
    chosen = {j for j, v in enumerate(floats[-1]) if v == 1}
    names = ", ".join(vocab[j] for j in sorted(chosen)) or "nothing"
    tied = ", ".join(vocab[j] for j in sorted(exact))
    if chosen == exact:
        note = f"float argmax {names}; exact {'tie ' if len(exact) > 1 else ''}{tied}"
        return StageError(name, 0.0, 0.0, 1.0, True, note)
    if len(exact) > 1 and chosen and chosen < exact:
        return StageError(name, 1.0, 1.0, 1.0, True,
                          f"exact tie between {tied}; float argmax picks {names}")
    return StageError(name, 1.0, 1.0, 1.0, False,
                      f"float argmax {names} but the exact next token is "
                      f"{'a tie between ' if len(exact) > 1 else ''}{tied}")
