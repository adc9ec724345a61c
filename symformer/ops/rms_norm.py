"""RMSNorm (Zhang & Sennrich 2019; Llama): y = gamma x / sqrt(mean(x^2) + eps).

Two steps: each row's mean square ms = (1/d) sum_j x_j^2 (a stage of its own), then
the normalisation; no mean is subtracted and there is no beta.  gamma is an exact
constant, or (``from_stages``, a training step's: :mod:`symformer.blocks.train`) a
1 x d stage read after x and ms: the step is then the RMSNorm with gamma = 1 (its
formula, balls and backward rule written once) followed by ``gamma_j n_j``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_vector, rational_ball, relu_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix, undefined_error
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.facts import FALSE, PROVED, Fact
from symformer.ops.std_dev import StdDev
from symformer.worked.model import Add, Const, Div, Mul, Neg, Pow

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.worked.model import Node

#: The root mean square sqrt(ms + eps), a stage of its own (walkthroughs print it).
RMS = Notation(r"\mathrm{rms}", "rms", "Root mean square")
#: The mean square of a row, one symbol in every format (its input may be x, r or y).
MEAN_SQUARE = Notation(r"\langle x^2 \rangle", "⟨x²⟩", "Mean square")


def mean_square(x, d):
    """ms = (1/d) sum_j x_j^2 per token: (n, 1)."""
    return np.sum(x ** 2, axis=-1, keepdims=True) / d


def rms_norm(x, ms, gamma, eps):
    """gamma x / sqrt(ms + eps), per token."""
    return gamma * x / np.sqrt(ms + eps)


def mean_square_backward(g, x, d):
    """dL/dx_j = dL/dms * 2 x_j / d."""
    return g * 2 * x / d


def rms_norm_backward_x(g, gamma, ms, eps):
    """dL/dx_j = gamma_j g_j / sqrt(ms + eps) (ms is a stage of its own)."""
    return gamma * g / np.sqrt(ms + eps)


def rms_norm_backward_ms(g, x, gamma, ms, eps):
    """dL/dms = -sum_j gamma_j g_j x_j / (2 (ms + eps)^(3/2))."""
    return -np.sum(gamma * g * x, axis=-1, keepdims=True) / (2 * (ms + eps) ** 1.5)


def rms_norm_backward_gamma(g, x, ms, eps):
    """dL/dgamma_j = sum_i g_ij x_ij / sqrt(ms_i + eps)."""
    return np.sum(g * x / np.sqrt(ms + eps), axis=0, keepdims=True)


def rms_backward_arguments(wrt: int | str, x, ms, gamma, eps, g) -> tuple:
    """The NumPy backward rules' arguments for input 0, 1 (x, ms) or gamma."""
    return {0: (g, gamma, ms, eps), 1: (g, x, gamma, ms, eps), "gamma": (g, x, ms, eps)}[wrt]


@dataclass(frozen=True)
class RowMeanSquare(Operation):
    """Each row's mean square (1/d) sum_j x_j^2, as a column."""

    notation: Notation | None = None

    name = "mean_square"
    norm_statistic = True
    reference_function = mean_square
    default_notation = MEAN_SQUARE
    rational = True
    nonnegative = True

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation:
        return IndexEquation(("ms[i] = 1 / d * sum(x[i, j] ** 2 for j in range(d))",),
                             {"ms": "out", "x": "in0"}, sizes={"d": ("x", 1)})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation:
        return IndexEquation(("dx[i, j] = 2 * dms[i] * x[i, j] / d",),
                             {"dx": "result", "dms": "grad", "x": "in0"}, sizes={"d": ("x", 1)})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        return sympy.Matrix(X.rows, 1, lambda i, _: self.sympy_entry(args, i, 0))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr:
        X = args[0]
        return sympy.Add(*[x ** 2 for x in X.row(i)]) / X.cols

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum((relu_ball(x * x) for x in row), arb(0)) / len(row)] for row in args[0]]

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix:
        return [[sum((d * (2 * x + d) for x, d in zip(r0, dr)), arb(0)) / len(r0)]
                for r0, dr in zip(x0[0], dx[0])]

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        return args[0], args[0].shape[-1]

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """dms/dx_j = 2 x_j / d."""
        return [[g * 2 * x / len(row) for x in row] for row, (g,) in zip(args[0], grad)]

    def backward_function(self, wrt: int | str):
        return mean_square_backward

    def backward_arguments(self, wrt, args, out, grad, dtype):
        return grad.astype(dtype), args[0].astype(dtype), args[0].shape[-1]


@dataclass(frozen=True)
class RMSNormalize(Operation):
    """gamma * x / sqrt(ms + eps) from (x, ms), with exact gamma and eps.

    ``from_stages``: gamma is input 2 (a 1 x d stage) after x and ms; the field
    ``gamma`` is then the value it started from, not read (see
    :meth:`Operation.staged`).
    """

    eps: sympy.Rational
    gamma: sympy.Matrix
    notation: Notation | None = None
    from_stages: bool = False

    name = "rms_normalize"
    matrix_form = "rms_norm"
    reference_function = rms_norm
    default_notation = Notation("y", "y", "RMSNorm")
    norm_keys, norm_rank = ("rms",), 1
    norm_label = "RMSNorm"
    norm_remark = "each row divided by its root mean square, then scaled"
    norm_shifts = False
    torch_norms = {"rms": (
        'ms = stats[f"{name}.mean_square"] = (x * x).mean(-1, keepdim=True)\n'
        'rms = stats[f"{name}.std"] = torch.sqrt(ms + eps)\n'
        "return x / rms * gamma\n")}
    hf_modules = {"LlamaRMSNorm": "rms", "MistralRMSNorm": "rms", "Qwen2RMSNorm": "rms"}
    module_weights = {"gamma": "weight"}

    @classmethod
    def add_norm(cls, g: Any, name: str, x: str, key: str, eps: Any, gamma: Any,
                 beta: Any, layer: int) -> str:
        """``NAME.mean_square``, ``NAME.std`` (the RMS sqrt(ms + eps)) and ``NAME``."""
        rows = g[x].rows
        ms = g.add(f"{name}.mean_square", "mean_square", RowMeanSquare(), (x,), rows,
                   ("mean_square",), layer=layer)
        g.add(f"{name}.std", "std", StdDev(eps, RMS), (ms,), rows, ("rms",), layer=layer)
        return g.add(name, "rms_norm", cls(eps, gamma), (x, ms), rows, g[x].cols,
                     layer=layer)

    def _plain(self, d: int) -> RMSNormalize:
        """The same RMSNorm with gamma = 1 on rows of width ``d``, constant (what an
        RMSNorm reading gamma from a stage scales)."""
        return RMSNormalize(self.eps, sympy.ones(1, d))

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation(("y[i, j] = gamma[j] * x[i, j] / sqrt(ms[i] + eps)",),
                             {"y": "out", "x": "in0", "ms": "in1", "gamma": "param:gamma"},
                             scalars={"eps": self.eps})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        if self.from_stages:
            return None
        if wrt == 0:
            line = "dx[i, j] = gamma[j] * dy[i, j] / sqrt(ms[i] + eps)"
        elif wrt == 1:
            line = ("dx[i] = -sum(gamma[j] * dy[i, j] * x[i, j] for j in range(d)) "
                    "/ (2 * (ms[i] + eps) ** (3 / 2))")
        else:
            line = "dx[j] = sum(dy[i, j] * x[i, j] / sqrt(ms[i] + eps) for i in range(n))"
        return IndexEquation((line,), {"dx": "result", "dy": "grad", "x": "in0", "ms": "in1",
                                       "gamma": "param:gamma"},
                             sizes={"d": ("x", 1), "n": ("x", 0)}, scalars={"eps": self.eps})

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        X = args[0]
        if self.from_stages:
            gamma = args[2]
            n = self._plain(X.cols).sympy(args[:2])
            return sympy.Matrix(X.rows, X.cols, lambda i, j: gamma[0, j] * n[i, j])
        return sympy.Matrix(X.rows, X.cols, lambda i, j: self.sympy_entry(args, i, j))

    def backward_worked_tree(self, formula: sympy.Expr,
                             convert: Callable[[sympy.Expr], Node]) -> Node | None:
        """dL/d⟨x²⟩ = -1/(2 (⟨x²⟩ + ε)^{3/2}) Σ_j γ_j dL/dy_j x_j, as the displayed rule
        writes it (γ kept when it is 1, the power 3/2 not SymPy's (2m + 2ε) √(m + ε)).
        The formula's symbols are told apart by their stages: the upstream gradient's,
        the d inputs', the one mean square; the rule recomputed over them must give the
        formula exactly."""
        if convert.parameter is None or self.from_stages:
            return None
        by_stage: dict[str, list[sympy.Symbol]] = {}
        for s in formula.free_symbols:
            by_stage.setdefault(s.name.split("[")[0], []).append(s)
        grads = [v for k, v in by_stage.items() if k.startswith("grad.")]
        rest = [v for k, v in by_stage.items() if not k.startswith("grad.")]
        d = len(self.gamma)
        if len(grads) != 1 or len(rest) != 2 or sorted(map(len, rest)) != [1, d] \
                or len(grads[0]) != d:
            return None
        column = lambda s: int(s.name.split(",")[-1].rstrip("]"))  # noqa: E731
        (m,), xs = sorted(rest, key=len)
        xs, gs = sorted(xs, key=column), sorted(grads[0], key=column)
        from symformer.ops.calculus import EXACT
        if self.backward([[xs], [[m]]], [[]], [gs], 1, EXACT)[0][0] != formula:
            return None
        two = Const(sympy.Integer(2))
        root = Pow(Add((convert(m), Const(self.eps))), Const(sympy.Rational(3, 2)))
        total = Add(tuple(Mul((convert.parameter("gamma", (j,)), convert(g), convert(x)))
                          for j, (g, x) in enumerate(zip(gs, xs))))
        return Neg(Mul((Div(Const(sympy.S.One), Mul((two, root))), total)))

    def sympy_entry(self, args: Sequence[sympy.Matrix], i: int, j: int) -> sympy.Expr | None:
        if self.from_stages:
            return None
        X, ms = args
        return self.gamma[j] * X[i, j] / sympy.sqrt(ms[i, 0] + self.eps)

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.from_stages:
            (gamma,) = args[2]
            n = self._plain(len(args[0][0])).arb(args[:2])
            return [[g * x for x, g in zip(row, gamma)] for row in n]
        X, ms = args
        eps = rational_ball(self.eps)
        gamma = constant_vector(self.gamma)
        return [[g * x / (m + eps).sqrt() for x, g in zip(row, gamma)]
                for row, (m,) in zip(X, ms)]

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        return [(1, row, 0)] if self.eps == 0 else []

    def facts(self, stage: Stage) -> list[Fact]:
        """Each row, gamma removed, has mean square exactly ms / (ms + eps) -- not 1.

        Proved on the local formula: (1/d) sum_j (x_j / sqrt(ms + eps))^2 with
        ms = (1/d) sum_j x_j^2 substituted.  None when some gamma is 0, or when gamma is
        a stage.
        """
        if self.from_stages or any(g == 0 for g in self.gamma):
            return []
        derivation, name = stage.derivation, stage.name
        ms_name = stage.inputs[1]
        ms_subs = dict(zip(derivation.symbols(ms_name), derivation.local(ms_name)))
        local, ms = stage.local, derivation.symbols(ms_name)
        d = local.cols
        holds = True
        for i in range(local.rows):
            square = sum((local[i, j] / self.gamma[j]) ** 2 for j in range(d)) / d
            target = ms[i, 0] / (ms[i, 0] + self.eps)
            difference = sympy.together((square - target).xreplace(ms_subs))
            holds = holds and sympy.expand(difference.as_numer_denom()[0]) == 0
        return [Fact(f"{name}.mean_square", f"every row of {name} (after removing gamma) has "
                     "mean square exactly ms/(ms+eps)", PROVED if holds else FALSE,
                     "(1/d) sum_j x_j^2 / (ms + eps) with ms = (1/d) sum_j x_j^2" if holds
                     else "the local mean square does not simplify")]

    def undefined(self, stage, row: int) -> Exception:
        return undefined_error(stage, row, "eps = 0 and the row is all zeros, so RMSNorm "
                               "divides 0 by 0 (give eps > 0)")

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]
                   ) -> ArbMatrix | None:
        if self.from_stages:
            return None
        (x, ms), (d, dms) = x0, dx
        eps = rational_ball(self.eps)
        gamma = constant_vector(self.gamma)
        out = []
        for row, (m,), drow, (dm,) in zip(x, ms, d, dms):
            den0, den = (m + eps).sqrt(), (m + dm + eps).sqrt()
            dden = dm / (den + den0)
            out.append([g * (dv / den - v * dden / (den * den0))
                        for v, dv, g in zip(row, drow, gamma)])
        return out

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.from_stages:
            x, ms, gamma = (np.asarray(a, dtype=dtype) for a in args)
            return x, ms, gamma, dtype(float(self.eps))
        x, ms = args
        return x, ms, matrix(self.gamma, dtype), dtype(float(self.eps))

    def parameters(self) -> dict[str, sympy.Matrix]:
        """gamma (none when it is a stage)."""
        return {} if self.from_stages else {"gamma": self.gamma}

    def staged(self) -> Operation | None:
        """The same RMSNorm reading gamma from a stage (``train``'s trained gamma)."""
        return None if self.from_stages else replace(
            self, from_stages=True, notation=self.notation or TRAINED)

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """y_j = gamma_j x_j / R with R = sqrt(ms + eps), ms a stage of its own:
        dL/dx_j = gamma_j g_j / R;  dL/dms = -sum_j gamma_j g_j x_j / (2 R^3);
        dL/dgamma_j = sum_i g_ij x_ij / R_i.

        From a stage (gamma input 2): dL/dn_j = gamma_j g_j through the rule of the
        RMSNorm with gamma = 1, whose own gamma gradient (with g) is input 2's."""
        if self.from_stages:
            plain = self._plain(len(args[0][0]))
            if wrt == 2:
                return plain.backward(args[:2], out, grad, "gamma", num)
            (gamma,) = args[2]
            scaled = [[g * c for g, c in zip(row, gamma)] for row in grad]
            return plain.backward(args[:2], out, scaled, wrt, num)
        X, ms = args
        eps = num.const(self.eps)
        gamma = [num.const(v) for v in self.gamma]
        result, scaled = [], []
        for row, (m,), g in zip(X, ms, grad):
            R = num.sqrt(m + eps)
            scaled.append([x / R for x in row])
            if wrt == 0:
                result.append([c * d / R for c, d in zip(gamma, g)])
            elif wrt == 1:
                result.append([-num.total(c * d * x for c, d, x in zip(gamma, g, row))
                               / (2 * R * R * R)])
        if wrt == "gamma":
            return [[num.total(d * c for d, c in zip(ds, cs))
                     for ds, cs in zip(zip(*grad), zip(*scaled))]]
        return result

    def _wrt(self, wrt: int | str) -> int | str:
        """``wrt`` as the constant form names it (gamma from a stage is input 2)."""
        return "gamma" if self.from_stages and wrt == 2 else wrt

    def backward_function(self, wrt: int | str):
        return {0: rms_norm_backward_x, 1: rms_norm_backward_ms,
                "gamma": rms_norm_backward_gamma}[self._wrt(wrt)]

    def backward_arguments(self, wrt, args, out, grad, dtype):
        if self.from_stages:
            x, ms, gamma, eps = self.arguments(args, dtype)
        else:
            x, ms, gamma, eps = self.arguments([a.astype(dtype) for a in args], dtype)
        return rms_backward_arguments(self._wrt(wrt), x, ms, gamma, eps, grad.astype(dtype))


#: An RMSNorm's notation reading a trained gamma, when its role gives it none.
TRAINED = Notation("y", "y", "RMSNorm (trained scale)")
