"""PyTorch in float32, float64 or bfloat16 against the exact derivation, stage by stage.

The example runs as the PyTorch module :func:`~symformer.frameworks.torch_out.to_torch`
writes (PyTorch's own kernels: matmul, softmax, GELU, ...), its weights rounded to the
dtype, and every stage it returns is compared with the certified values: the worst
error of the stage, relative to the largest exact magnitude in it, in units of the
dtype's machine epsilon (float32 2^-23, bfloat16 2^-7, float64 2^-52), and the decimal
digits it keeps.  The stage that keeps the fewest digits is the one that loses most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from symformer.example.schema import Example
from symformer.frameworks import require_torch

DTYPES = ("float32", "float64", "bfloat16")


@dataclass(frozen=True)
class StageError:
    """One stage's worst error: absolute, relative, in units of epsilon, digits kept."""

    stage: str
    abs_error: float
    rel_error: float
    ulps: float
    digits: float


def torch_crosscheck(example: Example, dtype: str = "float32",
                     derivation: Any = None) -> list[StageError]:
    """Every stage PyTorch computes for ``example`` in ``dtype``, against the exact values
    (``derivation``: the example's, if already derived)."""
    torch = require_torch()
    from symformer.blocks import derive
    from symformer.frameworks.torch_out import model_class

    stages = model_class(example)(dtype=getattr(torch, dtype))()
    g = derivation if derivation is not None else derive(example)
    eps = float(torch.finfo(getattr(torch, dtype)).eps)
    out = []
    for name, value in stages.items():
        balls = g[name].balls(128)
        exact = np.array([[np.nan if b is None else float(b.mid()) for b in row]
                          for row in balls])
        got = value.detach().double().numpy().reshape(exact.shape)
        known = ~np.isnan(exact)
        err = float(np.abs(exact[known] - got[known]).max()) if known.any() else 0.0
        scale = float(np.abs(exact[known]).max()) if known.any() else 0.0
        rel = err / scale if scale else err
        digits = math.inf if rel == 0 else -math.log10(rel)
        out.append(StageError(name, err, rel, rel / eps, digits))
    return out


def worst_stage(rows: list[StageError]) -> StageError:
    """The stage that keeps the fewest digits."""
    return max(rows, key=lambda r: r.rel_error)
