"""What every operation owns, in one place: the :class:`Operation` protocol.

An operation is one kind of step of a Transformer (a projection, a softmax, a
LayerNorm's mean, ...).  Its module holds everything about it, side by side:

* ``sympy(args)`` -- the exact local formula of every entry, over SymPy matrices
  (normally the symbols that *name* the input stages' entries, so a formula stays
  short however deep the stage sits; given rational matrices, it recomputes the
  stage exactly from them, as ``check`` does with an author's printed numbers);
* ``arb(args)`` -- the same operation in ball arithmetic (certified digits);
* ``reference(args, dtype)`` -- the float reference: it calls the module's NumPy
  function, which ``crosscheck`` runs and latexify-py renders as the general
  equation (``reference_function``);
* ``notation`` -- the symbol of the token's vector at this step and the step's
  title, used by every format;
* ``facts(stage)`` -- the identities ``prove`` states about the step, if any.

Worked lines and trace steps are built from the local formula by
:mod:`symformer.worked`, so an operation does not write its formula a second
time.  Weights are exact constants baked into the operation (part of the
formula, as in ``q = x1/4 + x2/4``), never stages of their own; an operation may
*name* them (``named_constants``: ``q_0 = x_0 (W_Q)_{0,0} + ...``) and may name a
part of its formula shared by a row (``worked_parts``: a softmax's denominator).

Every concrete subclass is registered in :data:`OPERATIONS` by defining it; a
test checks that each provides all of the above.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import sympy

from symformer.engine.arbmath import ArbMatrix

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

#: Every concrete operation class, by its ``name`` (filled as classes are defined).
OPERATIONS: dict[str, type[Operation]] = {}


@dataclass(frozen=True)
class Notation:
    """How the token's vector at a step is written: one symbol, in every format.

    ``latex`` is the symbol in LaTeX (``\\alpha``), ``text`` in a terminal (``α``);
    indices are appended by :meth:`entry` (0-based, as positions and JSON rows
    are: ``α_2``).  ``title`` names the step for a reader ("Attention weights").
    """

    latex: str
    text: str
    title: str

    def entry(self, *index: int | str, fmt: str = "latex") -> str:
        """The symbol with its subscript: ``\\alpha_{2}`` (latex) or ``α_2`` (text)."""
        if not index:
            return self.latex if fmt == "latex" else self.text
        sub = ",".join(str(i) for i in index)
        if fmt == "latex":
            base = f"{{{self.latex}}}" if "^" in self.latex else self.latex
            return f"{base}_{{{sub}}}"
        return f"{self.text}_{sub}" if len(index) == 1 else f"{self.text}_({sub})"


def matrix(value: sympy.Matrix | None, dtype: type) -> np.ndarray | None:
    """An exact SymPy matrix (rationals, sin(1), ...) as a float array (None stays None).

    The example's exact numbers become floats here and only here.
    """
    if value is None:
        return None
    return np.array([[float(v) for v in value.row(i)] for i in range(value.rows)],
                    dtype=dtype)


class Operation(ABC):
    """One kind of step: exact formula, balls, float reference, notation and facts."""

    #: The registry key (a short lower-case name, unique per class).
    name: ClassVar[str]
    #: The NumPy function the float reference runs and latexify renders.
    reference_function: ClassVar[Callable[..., Any]]
    #: The default notation; a composition may give a stage another role's notation
    #: (a projection makes queries ``q`` or keys ``k``) through the ``notation`` field.
    default_notation: ClassVar[Notation]
    #: True when rational inputs give rational outputs (exact recomputation from an
    #: author's printed numbers is then possible without balls).
    rational: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.name in OPERATIONS:
                raise TypeError(f"two operations named {cls.name!r}")
            OPERATIONS[cls.name] = cls

    @property
    def symbol(self) -> Notation:
        """The notation of this step (the role's, else the operation's default)."""
        return getattr(self, "notation", None) or self.default_notation

    def function(self) -> Callable[..., Any]:
        """The NumPy function this instance runs (and latexify renders)."""
        return type(self).reference_function

    @abstractmethod
    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        """The exact local formula of every entry, over the given input matrices."""

    @abstractmethod
    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        """The same operation in ball arithmetic at the current ``flint.ctx.prec``."""

    @abstractmethod
    def reference(self, args: Sequence[np.ndarray], dtype: type = np.float64) -> np.ndarray:
        """The float reference on float inputs (calls :attr:`reference_function`)."""

    def resolve(self, entry: sympy.Expr, sign: Callable[[], int]) -> sympy.Expr:
        """An entry's local formula with data-dependent branches decided.

        ``sign()`` is the certified sign of the entry's input.  Only piecewise
        operations (ReLU) override this; the formula is returned unchanged otherwise.
        """
        return entry

    def facts(self, stage: Stage) -> list[Any]:
        """The identities ``prove`` states about ``stage`` (none by default)."""
        return []

    def named_constants(self) -> dict[str, Notation]:
        """The constant fields worked lines write by name before substituting them.

        Field name -> notation of the matrix (its entries get 0-based indices); the
        worked line's formula is then :meth:`sympy` on a copy of the operation whose
        named fields hold symbols.  None by default: constants print as numbers.
        """
        return {}

    def worked_parts(self, stage: Stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """Parts of a row's local formulas that worked lines show as steps of their own.

        ``formulas`` are the row's entries (masked operands already removed).  None by
        default; a softmax names its denominator.
        """
        return []


@dataclass(frozen=True)
class WorkedPart:
    """A part of a row's formulas shown as its own worked step (a softmax's Σ).

    ``expr`` is a sub-expression of the row's local formulas; with ``termwise`` each
    of its terms is evaluated (and rounded) first, and the entries then read those
    rounded terms.
    """

    notation: Notation
    expr: sympy.Expr
    termwise: bool = False


def named(name: str, title: str = "") -> Notation:
    """The notation of a named matrix such as ``W_Q``, ``W_vocab`` or ``b_1``."""
    base, _, sub = name.partition("_")
    if not sub:
        return Notation(base, base, title)
    sub_latex = rf"\text{{{sub}}}" if len(sub) > 1 else sub
    return Notation(f"{base}_{{{sub_latex}}}", name, title)
