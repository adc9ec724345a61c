"""The NumPy reference's floats against the certified exact values, stage by stage.

Errors are measured on balls: each float is converted to a ball exactly (a double
is a dyadic rational), the exact value is a 200-bit ball, and their distance is
bounded from above.  The *relative* error of a stage is its largest absolute error
divided by the largest exact magnitude in the stage (so an entry whose exact
value is 0 or tiny does not make it infinite); a stage that is exactly 0 everywhere
uses the absolute error.  Masked scores must be -inf on both sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from flint import arb

from symformer.example import Example
from symformer.reference import numpy_ref
from symformer.verify.chain import precision
from symformer.verify.conventions import Convention, derive_variant

BITS = 200


@dataclass
class StageError:
    """Largest errors of one stage (upper bounds, as floats for display)."""

    stage: str
    abs_error: float
    rel_error: float
    scale: float          # the largest exact magnitude in the stage
    ok: bool


def crosscheck(example: Example, convention: Convention, causal: bool | None = None,
               dtype: type = np.float64, tol: float = 1e-12,
               max_work: int | None = None) -> list[StageError]:
    """Per-stage errors of :func:`numpy_ref.forward` against the exact derivation."""
    g = derive_variant(example, convention, causal, max_work)
    floats = numpy_ref.forward(example, causal=g.causal, dtype=dtype, mask=convention.mask,
                               layer_norm=convention.layer_norm, norm=convention.norm)
    exact = g.evaluate(BITS)
    out = []
    with precision(BITS):
        for stage in g:
            worst, scale = arb(0), arb(0)
            mismatch = False
            for row_f, row_x in zip(floats[stage.name], exact[stage.name]):
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
            out.append(StageError(stage.name, abs_error, rel_error, float(scale.upper()), ok))
    return out
