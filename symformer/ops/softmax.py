"""Row-wise softmax: attention weights, next-token probabilities.  exp(-inf) is 0 exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from flint import arb

from symformer.engine.arbmath import NEG_INF, ArbMatrix
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, WorkedPart
from symformer.ops.calculus import EXACT, Arithmetic, Rows
from symformer.ops.facts import FALSE, PROVED, Fact, Tally, cancels, label

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.ops.gradient import Part


def softmax(s):
    """exp(s_j) / sum_k exp(s_k) per row; subtracting the row maximum only avoids overflow."""
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_backward(alpha, g):
    """dL/ds = alpha * (dL/dalpha - sum_k alpha_k dL/dalpha_k) per row (the Jacobian's VJP)."""
    return alpha * (g - np.sum(alpha * g, axis=-1, keepdims=True))


#: The denominator of a softmax row, shown as its own worked step.
SUM = Notation(r"\Sigma", "Σ", "Sum of the exponentials")


@dataclass(frozen=True)
class Softmax(Operation):
    """Each row's exponentials over their sum; a -inf score gets weight exactly 0."""

    notation: Notation | None = None
    #: the entries of a row: "n" keys, "V" (the vocabulary, |V|), "C" classes, "E" experts
    #: (a mixture's router)
    count: str = "n"

    name = "softmax"
    reference_function = softmax
    default_notation = Notation(r"\alpha", "α", "Attention weights (softmax)")
    heat = True
    rows_sum_to_one = True
    matrix_form = "softmax"

    @property
    def trace_step(self) -> str:  # one weight per key; a vocabulary row is a vector
        return "attention" if self.count == "n" else "vector"

    @property
    def part_of_block(self) -> str:  # type: ignore[override]
        """Attention weights are a head's; probabilities (vocabulary, classes) the output's;
        a router's the mixture's, in the FFN's place."""
        return {"n": "head", "E": "ffn"}.get(self.count, "output")

    @property
    def columns(self) -> str:
        return {"n": "keys", "E": "dims"}.get(self.count, "vocab")

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        size = self.count if self.count in ("V", "C", "E") else "n"
        return IndexEquation(
            (f"alpha[i, j] = exp(s[i, j]) / sum(exp(s[i, jp]) for jp in range({size}))",),
            {"alpha": "out", "s": "in0"}, sizes={size: ("s", 1)},
            symbols={"V": ("|V|", "|V|"), "C": ("C", "C")})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        size = self.count if self.count in ("V", "C", "E") else "n"
        return IndexEquation(
            (f"ds[i, j] = alpha[i, j] * (dalpha[i, j] - sum(alpha[i, jp] * dalpha[i, jp] "
             f"for jp in range({size})))",),
            {"ds": "result", "alpha": "out", "dalpha": "grad"}, sizes={size: ("alpha", 1)},
            symbols={"V": ("|V|", "|V|"), "C": ("C", "C")})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        return sympy.Matrix([_row(row) for row in args[0].tolist()])

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        return _row(args[0].row(i), j)[0]

    def worked_parts(self, stage, row: int,
                     formulas: Sequence[sympy.Expr]) -> list[WorkedPart]:
        """The row's shared denominator Σ = exp(s_0) + ..., each exponential rounded first."""
        for entry in formulas:
            for factor in sympy.Mul.make_args(entry):
                if factor.is_Pow and factor.exp == -1 and factor.base.is_Add:
                    return [WorkedPart(SUM, factor.base, termwise=True)]
        return []

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        out = []
        for row in args[0]:
            # No max-subtraction needed: a ball's exponent range does not overflow.
            exps = [None if s is NEG_INF else s.exp() for s in row]
            total = sum((e for e in exps if e is not None), arb(0))
            out.append([arb(0) if e is None else e / total for e in exps])
        return out

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        (s0,), (ds,) = x0, dx
        out = []
        for row0, drow in zip(s0, ds):
            e0 = [arb(0) if s is NEG_INF else s.exp() for s in row0]
            de = [d.exp() if s is NEG_INF else s.exp() * d.expm1() for s, d in zip(row0, drow)]
            z0, dz = sum(e0, arb(0)), sum(de, arb(0))
            z = z0 + dz
            out.append([(d * z0 - e * dz) / (z * z0) for e, d in zip(e0, de)])
        return out

    def facts(self, stage: Stage) -> list[Fact]:
        """Every row sums to exactly 1; weights of masked scores (-inf) are exactly 0."""
        facts = [row_sums(stage)]
        masked = getattr(stage.derivation[stage.inputs[0]].op, "masked", frozenset())
        if masked:
            facts.append(masked_zero(stage, masked))
        return facts

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[np.ndarray]:
        return args

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dL/ds_j = alpha_j (dL/dalpha_j - sum_k alpha_k dL/dalpha_k); 0 at a -inf score."""
        return [self._backward_row(scores, alpha, g, num)
                for scores, alpha, g in zip(args[0], out, grad)]

    def backward_entry(self, args: Sequence[sympy.Matrix], out: sympy.Matrix,
                       grad: sympy.Matrix, wrt: int | str, i: int, j: int) -> sympy.Expr:
        return self._backward_row(list(args[0].row(i)), list(out.row(i)),
                                  list(grad.row(i)), EXACT)[j]

    @staticmethod
    def _backward_row(scores: list, alpha: list, g: list, num: Arithmetic) -> list:
        """One row of :meth:`backward`.

        A row with a single score not masked with -inf (a causal mask's first query)
        has alpha = 1 there, so its gradient alpha (g - alpha g) is exactly 0: given as
        the exact 0 (balls would only enclose it, and a proof would be needed to print
        it).  Only when the mask is seen (-inf values): over symbols the formula stays.
        """
        if sum(1 for s in scores if not num.masked(s)) == 1:
            return [num.zero() for _ in scores]
        mean = num.total(a * d for s, a, d in zip(scores, alpha, g) if not num.masked(s))
        return [num.zero() if num.masked(s) else a * (d - mean)
                for s, a, d in zip(scores, alpha, g)]

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """Every row of dL/ds sums to exactly 0 (the softmax Jacobian's rows sum to 0),
        whatever dL/dalpha; a score masked with -inf gets the gradient exactly 0."""
        g, alpha = gradient.derivation, part.consumer
        weights = dict(zip(g.symbols(alpha.name), g.local(alpha.name)))
        name, where = f"{gradient.name}.row_sums_zero{label(gradient)}", label(gradient)
        statement = (f"every row of {gradient.name}{where} sums to exactly 0 (the softmax "
                     f"Jacobian's rows sum to 0)")
        bad = [i for i in range(part.formula.rows)
               if not cancels(sympy.Add(*part.formula.row(i)).xreplace(weights))]
        facts = [Fact(name, statement, FALSE, f"row {bad[0]} does not cancel to 0") if bad
                 else Fact(name, statement, PROVED, "sum_j alpha_j (g_j - sum_k alpha_k g_k) "
                           "= 0 with alpha_j = exp(s_j) / sum_k exp(s_k), for any g")]
        masked = getattr(g[alpha.inputs[0]].op, "masked", frozenset())
        if masked:
            facts.append(masked_gradient_zero(gradient, part, masked))
        return facts

    def backward_function(self, wrt: int | str):
        return softmax_backward if wrt == 0 else None

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return out.astype(dtype), grad.astype(dtype)


def masked_gradient_zero(gradient: Stage, part: Part,
                         masked: frozenset[tuple[int, int]]) -> Fact:
    """dL/ds is exactly 0 at the masked scores: the rule alpha_j (g_j - ...) with the
    weight's local formula at a -inf score, exp(-inf) / ... = 0.  With a finite mask
    (-1e9) the weight is exp(...) > 0 and the fact is false."""
    g, alpha = gradient.derivation, part.consumer
    scores = alpha.inputs[0]
    infinite = {sym: -sympy.oo for sym, e in zip(g.symbols(scores), g.local(scores))
                if e == -sympy.oo}
    weights = {sym: e.xreplace(infinite)
               for sym, e in zip(g.symbols(alpha.name), g.local(alpha.name))}
    name = f"{gradient.name}.masked_zero{label(gradient)}"
    statement = (f"the masked scores get the gradient exactly 0 in "
                 f"{gradient.name}{label(gradient)}")
    for i, j in sorted(masked):
        value = part.formula[i, j].xreplace(weights)
        if value != 0:
            return Fact(name, statement, FALSE, f"{gradient.name}[{i},{j}] = {value} (a "
                        f"finite mask leaves the weight exp(...) > 0)")
    return Fact(name, statement, PROVED, f"{len(masked)} masked entries: alpha_j = exp(-inf) "
                f"/ ... = 0 makes alpha_j (g_j - sum_k alpha_k g_k) the constant 0")


def _row(scores: Sequence[sympy.Expr], only: int | None = None) -> list[sympy.Expr]:
    """A row's weights exp(s_j) / sum_k exp(s_k) (0 at a -inf score); only entry
    ``only`` when given."""
    exps = [None if s == -sympy.oo else sympy.exp(s) for s in scores]
    total = sympy.Add(*[e for e in exps if e is not None])
    wanted = range(len(exps)) if only is None else [only]
    return [sympy.S.Zero if exps[j] is None else exps[j] / total for j in wanted]


def _role(stage: Stage) -> str:
    """What the stage's rows are, for the report."""
    if stage.name == "probabilities" or stage.kind == "probabilities":
        return " (each target position's next-token distribution over the vocabulary)"
    if ".cross." in stage.name:
        return " (cross-attention: each target token's weights over the source tokens)"
    if ".self." in stage.name:
        return " (masked self-attention over the target tokens so far)"
    return ""


def row_sums(stage: Stage) -> Fact:
    """Every row of ``stage`` sums to exactly 1 (the local row sum simplifies to 1)."""
    where = label(stage)
    local, role = stage.local, _role(stage)
    name = f"{stage.name}.row_sums{where}"
    bad = [i for i in range(local.rows) if sympy.together(sum(local.row(i))) != 1]
    if bad:
        return Fact(name, f"every row of {stage.name}{role} sums to 1{where}", FALSE,
                    f"row {bad[0]} does not simplify to 1")
    return Fact(name, f"every row of {stage.name}{where}{role} sums to exactly 1", PROVED,
                "each local row sum exp(s_j)/sum_k exp(s_k) simplifies to 1")


def masked_zero(stage: Stage, masked: frozenset[tuple[int, int]]) -> Tally:
    """The weights at the ``masked`` entries are exactly 0.

    Their scores' local formulas are -inf; put into the softmax's local formula,
    exp(-inf) = 0 makes the weight the constant 0.  With a finite mask such as
    -1e9 the weight stays exp(...) > 0 and the fact is false.
    """
    g, scores = stage.derivation, stage.inputs[0]
    name, statement = f"{stage.name}.masked_zero", f"the masked weights of {stage.name} are 0"
    infinite = {sym: -sympy.oo for sym, e in zip(g.symbols(scores), g.local(scores))
                if e == -sympy.oo}
    for i, j in sorted(masked):
        value = stage.local[i, j].xreplace(infinite)
        if value != 0:
            return Tally(name, statement, FALSE, f"{stage.name}[{i},{j}] = {value}",
                         len(masked))
    return Tally(name, statement, PROVED, "their score is -inf and exp(-inf) = 0 makes the "
                 "local formula the constant 0", len(masked))
