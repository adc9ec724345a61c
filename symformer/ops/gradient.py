"""Gradient stages: d loss / d S as a sum of the consumers' vector-Jacobian products.

A stage S read by the stages C_1, ..., C_m (its *consumers*) has the gradient

    dL/dS = sum_k VJP_{C_k}(inputs of C_k, C_k, dL/dC_k)

where each VJP is the consumer's own backward rule (``Operation.backward``, written
beside its forward definition).  A :class:`Gradient` stage reads, for every term,
the consumer's inputs, the consumer itself and the consumer's gradient stage, so its
local formula is short (a chain-rule line) and the backward graph is as large as
autograd's.  The same rule evaluated on balls gives the certified value, on floats
the reference.  A weight's gradient is a :class:`Gradient` with one term whose
``wrt`` names the parameter (``"W_Q"``, ``"gamma"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix
from symformer.engine.exact import expression_matrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, WorkedPart
from symformer.ops.calculus import BALLS, EXACT, FLOATS, Arithmetic, Rows, rows
from symformer.ops.facts import Fact

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.worked.model import Node

#: A sum shared by every entry of a gradient's row, shown as its own worked step.
SHARED = Notation(r"\Sigma", "Σ", "Sum shared by the row's entries")


def gradient_sum(*contributions):
    """dL/dS = the sum of the consumers' vector-Jacobian products."""
    return sum(contributions)


def seed():
    """dL/dL = 1."""
    return np.ones((1, 1))


@dataclass(frozen=True, eq=False)
class Term:
    """One consumer's contribution: its operation, what it is differentiated by (an
    input's position or a parameter's name) and how many inputs it reads."""

    op: Operation
    wrt: int | str
    arity: int


@dataclass(frozen=True, eq=False)
class Part:
    """One consumer's contribution to a gradient stage: the ``consumer`` stage, what its
    rule differentiates by (``wrt``), the consumer's gradient stage (``upstream``) and
    the rule's local formula over the stage symbols."""

    consumer: Stage
    wrt: int | str
    upstream: str
    formula: sympy.Matrix


@dataclass(frozen=True, eq=False)
class Gradient(Operation):
    """The sum of the :class:`Term` s' backward rules.

    Inputs, term after term: the consumer's ``arity`` inputs, the consumer's own
    stage and the consumer's gradient stage.
    """

    terms: tuple[Term, ...]
    notation: Notation | None = None
    _denominators: dict[int, list[tuple[int, int, int]]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    name = "gradient"
    sums_paths = True
    reference_function = gradient_sum
    default_notation = Notation(r"\partial L", "∂L", "Gradient")

    @property
    def of_weight(self) -> bool:  # differentiated by a parameter, not an input stage
        return any(isinstance(term.wrt, str) for term in self.terms)

    @property
    def of_stage(self) -> bool:  # differentiated by an input stage
        return not self.of_weight

    def _sum(self, args: Sequence, num: Arithmetic) -> Rows:
        total: Rows | None = None
        k = 0
        for term in self.terms:
            # lists of rows (balls) are passed as they are: rules only read them
            inputs = [a if type(a) is list else rows(a) for a in args[k:k + term.arity]]
            out, grad = (a if type(a) is list else rows(a)
                         for a in args[k + term.arity:k + term.arity + 2])
            k += term.arity + 2
            part = term.op.backward(inputs, out, grad, term.wrt, num)
            total = part if total is None else [
                [a + b for a, b in zip(ra, rb)] for ra, rb in zip(total, part)]
        return total

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return expression_matrix(self._sum(args, EXACT))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr | None:
        """Entry (i, j) from the terms' single-entry rules (``Operation.backward_entry``),
        added in :meth:`_sum`'s order; None when a term's rule has none."""
        total, k = None, 0
        for term in self.terms:
            out, grad = args[k + term.arity], args[k + term.arity + 1]
            part = term.op.backward_entry(args[k:k + term.arity], out, grad, term.wrt, i, j)
            if part is None:
                return None
            k += term.arity + 2
            total = part if total is None else total + part
        return total

    def _divisors(self, row: int) -> list[tuple[Term, list[tuple[int, int, int]]]]:
        """Each term with the entries its rule divides by at ``row`` (as this stage's inputs)."""
        found, k = [], 0
        for term in self.terms:
            entries = [(k + i, r, c) for i, r, c in term.op.backward_denominators(term.wrt, row)]
            if entries:
                found.append((term, entries))
            k += term.arity + 2
        return found

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        """What the terms' rules divide by and may be 0 (``Operation.backward_denominators``)."""
        found = self._denominators.get(row)
        if found is None:  # asked for every row at every evaluation: kept
            found = self._denominators[row] = [
                entry for _, entries in self._divisors(row) for entry in entries]
        return found

    def undefined(self, stage, row: int) -> Exception:
        divisors = self._divisors(row)
        if divisors:
            return divisors[0][0].op.backward_undefined(stage, row)
        return super().undefined(stage, row)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return self._sum(args, BALLS)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        # each term's rule in floats; gradient_sum adds them up
        return [np.array(self._sum(args, FLOATS), dtype=dtype)]

    def resolve(self, entry: sympy.Expr, sign: Callable[[], int]) -> sympy.Expr:
        """ReLU's step Heaviside(h, 0) decided by the certified sign of h (0 at h = 0).

        Decided when the gradient has one term whose step reads the entry's own
        input entry (an element-wise rule, as ReLU's: the step is a factor of the
        entry, g * Heaviside(h, 0)); otherwise left exact.
        """
        if len(self.terms) != 1:
            return entry
        steps = {f for f in sympy.Mul.make_args(entry) if isinstance(f, sympy.Heaviside)}
        if len(steps) != 1:
            return entry
        return entry.xreplace({steps.pop(): sympy.S.One if sign() > 0 else sympy.S.Zero})

    def worked_tree(self, formula: sympy.Expr, convert: Callable[[sympy.Expr], Node]
                    ) -> Node | None:
        """A gradient with one term: its rule's own textbook tree (GELU's derivative
        with its named inner and the paper's constant), when the rule gives one."""
        if len(self.terms) != 1:
            return None
        return self.terms[0].op.backward_worked_tree(formula, convert)

    def worked_parts(self, stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """A sum shared by every entry of the row (a softmax's sum_k alpha_k dL/dalpha_k),
        worked out once as its own step: dL/ds_j = alpha_j (dL/dalpha_j - Σ); a single
        rule's own parts (``Operation.backward_worked_parts``) first."""
        if len(self.terms) == 1:
            own = self.terms[0].op.backward_worked_parts(stage, row, formulas)
            if own:
                return own
        if len(formulas) < 2:
            return []
        sums = [[set(e.args) for e in sympy.preorder_traversal(f) if e.is_Add]
                for f in formulas]
        shared = set.intersection(*(set().union(*s) for s in sums))
        shared = {t for t in shared if t.free_symbols}
        # the shared terms must sit in one sum of every entry (not spread over several)
        if len(shared) < 2 or not all(any(shared <= s for s in f) for f in sums):
            return []
        total = sympy.Add(*shared)
        if all(t.could_extract_minus_sign() for t in shared):
            total = -total
        return [WorkedPart(SHARED, total)]

    def parts(self, stage: Stage) -> list[Part]:
        """Each term's contribution to ``stage``'s local formula, in term order."""
        g, names, found, k = stage.derivation, stage.inputs, [], 0
        for term in self.terms:
            inputs = [rows(g.symbols(n)) for n in names[k:k + term.arity]]
            consumer, upstream = names[k + term.arity], names[k + term.arity + 1]
            k += term.arity + 2
            formula = term.op.backward(inputs, rows(g.symbols(consumer)),
                                       rows(g.symbols(upstream)), term.wrt, EXACT)
            found.append(Part(g[consumer], term.wrt, upstream, sympy.Matrix(formula)))
        return found

    def facts(self, stage: Stage) -> list[Fact]:
        """What the consumers' rules state about this gradient (``Operation.backward_facts``)."""
        return [fact for part in self.parts(stage)
                for fact in part.consumer.op.backward_facts(stage, part)]

    def exactly_masked(self) -> Gradient:
        return replace(self, terms=tuple(replace(t, op=t.op.exactly_masked())
                                         for t in self.terms))


@dataclass(frozen=True)
class Seed(Operation):
    """dL/dL = 1: where the backward pass starts (a 1 x 1 stage with no inputs)."""

    notation: Notation | None = None

    name = "gradient_seed"
    reference_function = seed
    constant = 1
    of_stage = True  # of the loss itself
    default_notation = Notation(r"\partial L / \partial L", "∂L/∂L", "Gradient of the loss")
    rational = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("dL = 1",), {"dL": "out"})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([[1]])

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[arb(1)]]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return ()
