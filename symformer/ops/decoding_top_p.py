"""Top-p (nucleus sampling, Holtzman et al. 2020): the margin of each token is the
mass of the tokens before it in the order most probable first (ties: the earlier in
the vocabulary first, a stable sort),

    m_j = sum of p_i over the tokens with p_i > p_j, or p_i = p_j and i < j,

and token j is in the nucleus exactly when m_j < p: the smallest set of most probable
tokens whose mass reaches p, the token that crosses p included (Hugging Face's
``TopPLogitsWarper``: it removes a token when the ascending cumulative sum up to it is
<= 1 - p; of tied tokens at the boundary it keeps the later instead).
``nucleus_mass`` is the kept tokens' mass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation


def mass_above(p):
    """For each column j: the sum of the p_i before it (p_i > p_j, or p_i = p_j, i < j)."""
    row = p[0]
    index = np.arange(row.size)
    return np.array([[np.sum(row[(row > x) | ((row == x) & (index < j))])
                      for j, x in enumerate(row)]])


def nucleus_mass(p, k):
    """The mass of the kept tokens, sum_j k_j p_j (1 x 1)."""
    return np.sum(p * k, axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class MassAbove(Operation):
    """m_j = sum over ``above[j]`` (the tokens decided to come before j) of p_i."""

    above: tuple[tuple[int, ...], ...]
    notation: Notation | None = None

    name = "mass_above"
    columns = "vocab"
    reference_function = mass_above
    default_notation = Notation(r"m", "m", "Mass of the tokens before (most probable first)")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: sums over decided sets; shown as its table."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        p = args[0]
        return sympy.Matrix([[sympy.Add(*(p[0, i] for i in s)) for s in self.above]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        p = args[0][0]
        return [[sum((p[i] for i in s), arb(0)) for s in self.above]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype),)


@dataclass(frozen=True, eq=False)
class NucleusMass(Operation):
    """The kept tokens' mass, sum_j kept_j p_j, reading (probabilities, kept)."""

    notation: Notation | None = None

    name = "nucleus_mass"
    reference_function = nucleus_mass
    default_notation = Notation(r"P_{\mathrm{nucleus}}", "P_nucleus", "Nucleus mass")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> None:
        """None: one sum; shown as its value."""
        return None

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        p, k = args
        return sympy.Matrix([[sympy.Add(*(p[0, j] * k[0, j] for j in range(p.cols)))]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum((x * y for x, y in zip(args[0][0], args[1][0])), arb(0))]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return (args[0].astype(dtype), args[1].astype(dtype))
