"""LayerNorm's last step from (x, mu, sigma^2): gamma (x - mu) / denominator + beta.

``unbiased=False``: denominator sqrt(sigma^2 + eps), the biased variance, eps inside
the root (PyTorch, the post).  ``unbiased=True``: denominator sqrt(s^2) + eps with the
unbiased variance s^2, eps outside the root (the Annotated Transformer).

gamma and beta are exact constants, or (``from_stages``, a training step's:
:mod:`symformer.blocks.train`) 1 x d stages read after x, mu and sigma^2: the step is
then the LayerNorm with gamma = 1 and beta = 0 (the normalised row n, its formula,
balls and backward rule written once) followed by ``gamma_j n_j + beta_j``.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from flint import arb

from symformer.engine.arbmath import ArbMatrix, constant_vector, rational_ball
from symformer.equations.ir import IndexEquation
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.ops.base import Operation, matrix, undefined_error
from symformer.ops.calculus import Arithmetic, Rows
from symformer.ops.facts import CERTIFIED, FALSE, PROVED, Fact, cancels, label
from symformer.ops.mean import RowMean
from symformer.ops.projection import bias_backward
from symformer.ops.std_dev import StdDev, root
from symformer.ops.variance import RowVariance
from symformer.ops.whole_matrix import WholeMean, WholeVariance

if TYPE_CHECKING:
    from symformer.engine.graph import Stage
    from symformer.ops.gradient import Part


def layer_norm(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / sqrt(sigma^2 + eps) + beta, per token (PyTorch, the post)."""
    return gamma * ((x - mu) / np.sqrt(sigma2 + eps)) + beta


def layer_norm_unbiased(x, mu, sigma2, gamma, beta, eps):
    """gamma (x - mu) / (sqrt(s^2) + eps) + beta, s^2 unbiased (the Annotated Transformer)."""
    return gamma * ((x - mu) / (np.sqrt(sigma2) + eps)) + beta


# The backward rules, mu and sigma^2 being stages of their own (so dL/dx_j has only the
# direct term); written out for each convention, so that the equations show the root.
def layer_norm_backward_x(g, gamma, sigma2, eps):
    """dL/dx_j = gamma_j g_j / sqrt(sigma^2 + eps)."""
    return gamma * g / np.sqrt(sigma2 + eps)


def layer_norm_backward_mu(g, gamma, sigma2, eps):
    """dL/dmu = -sum_j gamma_j g_j / sqrt(sigma^2 + eps)."""
    return -np.sum(gamma * g, axis=-1, keepdims=True) / np.sqrt(sigma2 + eps)


def layer_norm_backward_sigma2(g, x, mu, gamma, sigma2, eps):
    """dL/dsigma^2 = -sum_j gamma_j g_j (x_j - mu) / (2 (sigma^2 + eps)^(3/2))."""
    return -np.sum(gamma * g * (x - mu), axis=-1, keepdims=True) / (2 * (sigma2 + eps) ** 1.5)


def layer_norm_backward_gamma(g, x, mu, sigma2, eps):
    """dL/dgamma_j = sum_i g_ij (x_ij - mu_i) / sqrt(sigma_i^2 + eps)."""
    return np.sum(g * (x - mu) / np.sqrt(sigma2 + eps), axis=0, keepdims=True)


def unbiased_norm_backward_x(g, gamma, sigma2, eps):
    """dL/dx_j = gamma_j g_j / (sqrt(s^2) + eps)."""
    return gamma * g / (np.sqrt(sigma2) + eps)


def unbiased_norm_backward_mu(g, gamma, sigma2, eps):
    """dL/dmu = -sum_j gamma_j g_j / (sqrt(s^2) + eps)."""
    return -np.sum(gamma * g, axis=-1, keepdims=True) / (np.sqrt(sigma2) + eps)


def unbiased_norm_backward_sigma2(g, x, mu, gamma, sigma2, eps):
    """dL/ds^2 = -sum_j gamma_j g_j (x_j - mu) / ((sqrt(s^2) + eps)^2 2 sqrt(s^2))."""
    return -np.sum(gamma * g * (x - mu), axis=-1, keepdims=True) / (
        (np.sqrt(sigma2) + eps) ** 2 * 2 * np.sqrt(sigma2))


def unbiased_norm_backward_gamma(g, x, mu, sigma2, eps):
    """dL/dgamma_j = sum_i g_ij (x_ij - mu_i) / (sqrt(s_i^2) + eps)."""
    return np.sum(g * (x - mu) / (np.sqrt(sigma2) + eps), axis=0, keepdims=True)


#: The NumPy backward rules of each convention, by what they differentiate.
BACKWARD_RULES = {
    False: {0: layer_norm_backward_x, 1: layer_norm_backward_mu,
            2: layer_norm_backward_sigma2, "gamma": layer_norm_backward_gamma,
            "beta": bias_backward},
    True: {0: unbiased_norm_backward_x, 1: unbiased_norm_backward_mu,
           2: unbiased_norm_backward_sigma2, "gamma": unbiased_norm_backward_gamma,
           "beta": bias_backward},
}


def backward_arguments(wrt: int | str, x, mu, sigma2, gamma, eps, g) -> tuple:
    """The NumPy backward rules' arguments for input 0, 1, 2 (x, mu, sigma^2) or
    gamma / beta (:data:`BACKWARD_RULES`)."""
    return {0: (g, gamma, sigma2, eps), 1: (g, gamma, sigma2, eps),
            2: (g, x, mu, gamma, sigma2, eps), "gamma": (g, x, mu, sigma2, eps),
            "beta": (g,)}[wrt]


#: :meth:`Normalize.facts` per derivation, by stage name (stages never change).
_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Normalize(Operation):
    """gamma * (x - mu) / denominator + beta, with exact gamma, beta and eps.

    ``from_stages``: gamma and beta are inputs 3 and 4 (1 x d stages) after x, mu and
    sigma^2; the fields ``gamma`` and ``beta`` are then the values they started from,
    not read (see :meth:`Operation.staged`).
    """

    eps: sympy.Rational
    gamma: sympy.Matrix
    beta: sympy.Matrix
    unbiased: bool = False
    notation: Notation | None = None
    from_stages: bool = False

    name = "normalize"
    matrix_form = "layer_norm"
    reference_function = layer_norm
    default_notation = Notation("y", "y", "LayerNorm")
    trace_step = "norm"
    norm_keys, norm_rank = ("biased", "unbiased", "whole_matrix"), 0
    norm_label = "LayerNorm"
    norm_titles = {"biased": "biased LayerNorm", "unbiased": "unbiased LayerNorm",
                   "whole_matrix": "whole-matrix LayerNorm"}
    norm_remark = "each row less its mean, divided by its standard deviation, scaled, shifted"
    torch_norms = {
        "biased": (
            'mu = stats[f"{name}.mean"] = x.mean(-1, keepdim=True)\n'
            'var = stats[f"{name}.variance"] = ((x - mu) ** 2).mean(-1, keepdim=True)\n'
            'std = stats[f"{name}.std"] = torch.sqrt(var + eps)\n'
            "return (x - mu) / std * gamma + beta\n"),
        "unbiased": (
            'mu = stats[f"{name}.mean"] = x.mean(-1, keepdim=True)\n'
            'stats[f"{name}.variance"] = x.var(-1, unbiased=True, keepdim=True)\n'
            'std = stats[f"{name}.std"] = x.std(-1, unbiased=True, keepdim=True)\n'
            "return (x - mu) / (std + eps) * gamma + beta\n"),
        "whole_matrix": (
            "mu, var = x.mean(), ((x - x.mean()) ** 2).mean()\n"
            "return (x - mu) / torch.sqrt(var + eps) * gamma + beta\n"),
    }
    torch_modules = hf_modules = {"LayerNorm": "biased"}
    module_weights = {"gamma": "weight", "beta": "bias"}

    @classmethod
    def add_norm(cls, g: Any, name: str, x: str, key: str, eps: Any, gamma: Any,
                 beta: Any, layer: int) -> str:
        """``NAME.mean``, ``NAME.variance``, ``NAME.std`` (sigma = sqrt(sigma^2 + eps),
        printed by walkthroughs; the unbiased convention's sqrt(s^2)) and ``NAME``;
        ``whole_matrix``: the mean and variance over every entry.  With ``[stages]
        output_moments``, the output's own mean and variance too (side stages)."""
        rows = g[x].rows
        unbiased, whole = key == "unbiased", key == "whole_matrix"
        mean = g.add(f"{name}.mean", "mean", WholeMean() if whole else RowMean(), (x,),
                     rows, ("mean",), layer=layer)
        variance_op = WholeVariance() if whole else RowVariance(
            unbiased, UNBIASED_VARIANCE if unbiased else None)
        var = g.add(f"{name}.variance", "variance", variance_op, (x, mean), rows,
                    ("variance",), layer=layer)
        # sigma, a number of its own (Normalize still reads the variance)
        std = StdDev(sympy.S.Zero, UNBIASED_STD) if unbiased else StdDev(eps)
        g.add(f"{name}.std", "std", std, (var,), rows, ("std",), layer=layer)
        out = g.add(name, "layer_norm", cls(eps, gamma, beta, unbiased), (x, mean, var),
                    rows, g[x].cols, layer=layer)
        asked = g.example.stages if g.example is not None else None
        if asked is None or not asked.output_moments:  # opt-in: two sections per LayerNorm
            return out
        # the output's own mean and (biased) variance, as lessons check them (about 0 and
        # 1 with gamma = 1, beta = 0): side stages, nothing reads them
        out_mean = g.add(f"{name}.output_mean", "mean",
                         WholeMean(notation=OUTPUT_MEAN) if whole
                         else RowMean(notation=OUTPUT_MEAN), (out,), rows, ("mean",),
                         layer=layer)
        g.add(f"{name}.output_variance", "variance",
              WholeVariance(notation=OUTPUT_VARIANCE) if whole
              else RowVariance(notation=OUTPUT_VARIANCE), (out, out_mean), rows,
              ("variance",), layer=layer)
        return out

    def function(self):
        return layer_norm_unbiased if self.unbiased else layer_norm

    def _denominator(self) -> str:
        return "(sqrt(sigma2[i]) + eps)" if self.unbiased else "sqrt(sigma2[i] + eps)"

    def _plain(self, d: int) -> Normalize:
        """The same LayerNorm with gamma = 1 and beta = 0 on rows of width ``d``, constant
        (what a LayerNorm reading gamma and beta from stages scales and shifts)."""
        return Normalize(self.eps, sympy.ones(1, d), sympy.zeros(1, d), self.unbiased)

    def equation(self, shapes: Sequence[tuple[int, int]] = ()) -> IndexEquation | None:
        if self.from_stages:
            return None
        return IndexEquation(
            (f"y[i, j] = gamma[j] * (r[i, j] - mu[i]) / {self._denominator()} + beta[j]",),
            {"y": "out", "r": "in0", "mu": "in1", "sigma2": "in2", "gamma": "param:gamma",
             "beta": "param:beta"}, scalars={"eps": self.eps})

    def backward_equation(self, wrt: int | str, shapes: Sequence[tuple[int, int]] = ()
                          ) -> IndexEquation | None:
        if self.from_stages:
            return None
        D = self._denominator()
        arrays = {"dy": "grad", "r": "in0", "mu": "in1", "sigma2": "in2",
                  "gamma": "param:gamma"}
        sizes = {"d": ("r", 1), "n": ("r", 0)}
        scalars = {"eps": self.eps}
        if wrt == 0:
            line = f"dr[i, j] = gamma[j] * dy[i, j] / {D}"
        elif wrt == 1:
            line = f"dr[i] = -sum(gamma[j] * dy[i, j] for j in range(d)) / {D}"
        elif wrt == 2:
            slope = "2 * sqrt(sigma2[i]) * (sqrt(sigma2[i]) + eps) ** 2" if self.unbiased \
                else "2 * (sigma2[i] + eps) ** (3 / 2)"
            line = (f"dr[i] = -sum(gamma[j] * dy[i, j] * (r[i, j] - mu[i]) for j in range(d))"
                    f" / ({slope})")
        elif wrt == "gamma":
            line = f"dr[j] = sum(dy[i, j] * (r[i, j] - mu[i]) / {D} for i in range(n))"
        else:
            line = "dr[j] = sum(dy[i, j] for i in range(n))"
        return IndexEquation((line,), {"dr": "result", **arrays}, sizes=sizes,
                             scalars=scalars)

    def sympy(self, args: Sequence[sympy.Matrix]) -> sympy.Matrix:
        if self.from_stages:
            X, _, _, gamma, beta = args
            n = self._plain(X.cols).sympy(args[:3])
            return sympy.Matrix(X.rows, X.cols,
                                lambda i, j: gamma[0, j] * n[i, j] + beta[0, j])
        X, mu, var = args

        def entry(i: int, j: int) -> sympy.Expr:
            if self.unbiased:
                denominator = sympy.sqrt(var[i, 0]) + self.eps
            else:
                denominator = sympy.sqrt(var[i, 0] + self.eps)
            return self.gamma[j] * (X[i, j] - mu[i, 0]) / denominator + self.beta[j]

        return sympy.Matrix(X.rows, X.cols, entry)

    def named_constants(self) -> dict[str, Notation]:
        if self.from_stages:
            return {}
        return {"gamma": Notation(r"\gamma", "γ", "scale"),
                "beta": Notation(r"\beta", "β", "shift"),
                "eps": Notation(r"\varepsilon", "ε", "epsilon")}

    def arb(self, args: Sequence[ArbMatrix]) -> ArbMatrix:
        if self.from_stages:
            (gamma,), (beta,) = args[3], args[4]
            n = self._plain(len(args[0][0])).arb(args[:3])
            return [[g * x + b for x, g, b in zip(row, gamma, beta)] for row in n]
        X, mu, var = args
        eps = rational_ball(self.eps)
        gamma = constant_vector(self.gamma)
        beta = constant_vector(self.beta)
        out = []
        for row, (m,), (v,) in zip(X, mu, var):
            # A variance ball reaching below 0 (an exact 0 variance) has its root in
            # [0, sqrt(upper)]; arb's sqrt would give NaN there.
            denominator = root(v) + eps if self.unbiased else (v + eps).sqrt()
            out.append([g * (x - m) / denominator + b for x, g, b in zip(row, gamma, beta)])
        return out

    def denominators(self, row: int) -> list[tuple[int, int, int]]:
        # sqrt(var + eps) and sqrt(var) + eps are > 0 unless eps = 0
        return [(2, row, 0)] if self.eps == 0 else []

    def backward_denominators(self, wrt: int | str, row: int) -> list[tuple[int, int, int]]:
        # unbiased: D = sqrt(s^2) + eps, whose derivative 1 / (2 sqrt(s^2)) needs s^2 > 0
        # (the variance is input 2 whether gamma and beta are constants or stages, so
        # that a training step names an undefined gradient instead of overflowing)
        return [(2, row, 0)] if self.unbiased and wrt == 2 else []

    def backward_undefined(self, stage, row: int) -> Exception:
        return undefined_error(
            stage, row, 'with layer_norm = "unbiased" the denominator sqrt(s^2) + eps has no '
            "derivative where the variance s^2 is exactly 0 (every entry of the row equals "
            "its mean); use the biased LayerNorm, sqrt(sigma^2 + eps), or another example")

    def undefined(self, stage, row: int) -> Exception:
        return undefined_error(stage, row, "eps = 0 and every entry of the row equals its "
                               "mean, so LayerNorm divides 0 by 0 (give eps > 0)")

    def difference(self, x0: Sequence[ArbMatrix], dx: Sequence[ArbMatrix]) -> ArbMatrix | None:
        if self.from_stages:
            return None
        (x, mu, var), (d, dmu, dvar) = x0, dx
        eps = rational_ball(self.eps)
        gamma = constant_vector(self.gamma)
        out = []
        for row, (m,), (v,), drow, (dm,), (dv,) in zip(x, mu, var, d, dmu, dvar):
            if self.unbiased:
                r0, r = root(v), root(v + dv)
                den0, den = r0 + eps, r + eps
                dden = dv / (r + r0)
            else:
                den0, den = (v + eps).sqrt(), (v + dv + eps).sqrt()
                dden = dv / (den + den0)
            out.append([g * ((dv_ - dm) / den - (v_ - m) * dden / (den * den0))
                        for v_, dv_, g in zip(row, drow, gamma)])
        return out

    def facts(self, stage: Stage) -> list[Fact]:
        """Each row has mean 0 and variance sigma^2/(sigma^2+eps) -- not 1.

        Stated after removing gamma and beta; none when some gamma is 0 (that
        column carries no information about the normalised row); none either when gamma
        and beta are stages.  Proved once per stage (every export of a derivation
        states them).
        """
        known = _FACTS.setdefault(stage.derivation, {})
        if stage.name not in known:
            known[stage.name] = self._facts(stage)
        return list(known[stage.name])

    def _facts(self, stage: Stage) -> list[Fact]:
        if self.from_stages or any(gm == 0 for gm in self.gamma):
            return []
        g, name = stage.derivation, stage.name
        _x, mu_name, var_name = stage.inputs
        local = stage.local
        mu_subs = dict(zip(g.symbols(mu_name), g.local(mu_name)))
        var_subs = dict(zip(g.symbols(var_name), g.local(var_name)))
        d = local.cols
        z = sympy.Matrix([[(local[i, j] - self.beta[j]) / self.gamma[j] for j in range(d)]
                          for i in range(local.rows)])
        # mean 0: the numerator over the common denominator is sum_j (x_j - mu) = 0
        means_zero = all(
            sympy.expand(sympy.together(sum(z.row(i))).as_numer_denom()[0].xreplace(mu_subs))
            == 0 for i in range(z.rows))
        var_sym = g.symbols(var_name)
        ok_var = True
        for i in range(z.rows):
            v = var_sym[i, 0]
            sq = sum(e ** 2 for e in z.row(i)) / d
            if self.unbiased:  # y = (x - mu)/(s + eps): biased variance (d-1)/d s^2/(s+eps)^2
                target = sympy.Rational(d - 1, d) * v / (sympy.sqrt(v) + self.eps) ** 2
            else:
                target = v / (v + self.eps)
            # v is the variance's own formula over x and mu: substitute it, keep mu a name
            difference = sympy.together((sq - target).xreplace(var_subs))
            if sympy.expand(difference.as_numer_denom()[0]) != 0:
                ok_var = False
        formula = "(d-1)/d s^2/(s+eps)^2" if self.unbiased else "sigma^2/(sigma^2+eps)"
        return [
            Fact(f"{name}.mean", f"every row of {name} (after removing gamma, beta) has mean "
                 "exactly 0", PROVED if means_zero else FALSE,
                 "sum_j (x_j - mu) = 0 with mu = sum_j x_j / d" if means_zero
                 else "the local row mean does not simplify to 0"),
            Fact(f"{name}.variance", f"every row of {name} has variance exactly {formula}",
                 PROVED if ok_var else FALSE,
                 "the local formulas simplify to it" if ok_var else "they do not"),
            self.unit_variance(stage),
        ]

    def unit_variance(self, stage: Stage) -> Fact:
        """The lecture-note claim "variance 1": false whenever eps > 0 (shown on a row)."""
        name = stage.name
        statement = f"every row of {name} has variance exactly 1"
        if self.eps == 0 and not self.unbiased:
            # sigma^2/(sigma^2 + 0) = 1 needs sigma^2 != 0: a row of variance exactly 0 is
            # an InputError when the derivation is evaluated; here each is certified > 0.
            variances = stage.derivation.evaluate(128)[stage.inputs[2]]
            zero = [i for i, (v,) in enumerate(variances) if not v > 0]
            if zero:
                return Fact(f"{name}.unit_variance", statement, CERTIFIED,
                            f"undecided: the variance of row {zero[0]} is not certified > 0")
            return Fact(f"{name}.unit_variance", statement, PROVED,
                        "eps = 0 and every row's variance is certified > 0")
        var = stage.derivation.evaluate(128)[stage.inputs[2]][0][0]
        eps = arb(int(self.eps.p)) / int(self.eps.q)
        gap = eps / (var + eps) if not self.unbiased else None
        detail = (f"false for eps > 0: row 0 has variance 1 - eps/(sigma^2+eps) with "
                  f"eps/(sigma^2+eps) in {gap.str(5, radius=True)}" if gap is not None else
                  "false for eps > 0 (and the unbiased convention scales it by (d-1)/d)")
        return Fact(f"{name}.unit_variance", statement, FALSE, detail)

    def arguments(self, args: Sequence[np.ndarray], dtype: type) -> Sequence[Any]:
        if self.from_stages:
            x, mu, sigma2, gamma, beta = (np.asarray(a, dtype=dtype) for a in args)
            return x, mu, sigma2, gamma, beta, dtype(float(self.eps))
        x, mu, sigma2 = args
        return (x, mu, sigma2, matrix(self.gamma, dtype), matrix(self.beta, dtype),
                dtype(float(self.eps)))

    def parameters(self) -> dict[str, sympy.Matrix]:
        """gamma and beta (none when they are stages)."""
        return {} if self.from_stages else {"gamma": self.gamma, "beta": self.beta}

    def backward(self, args: Sequence[Rows], out: Rows, grad: Rows, wrt: int | str,
                 num: Arithmetic) -> Rows:
        """y_j = gamma_j (x_j - mu) / D + beta_j with D = sqrt(sigma^2 + eps) (biased) or
        sqrt(s^2) + eps (unbiased), mu and sigma^2 being stages of their own:

        dL/dx_j = gamma_j g_j / D;  dL/dmu = -sum_j gamma_j g_j / D;
        dL/dsigma^2 = -sum_j gamma_j g_j (x_j - mu) / D^2 * dD/dsigma^2, where dD/dsigma^2 is
        1 / (2 D) (biased) or 1 / (2 sqrt(s^2)) (unbiased);
        dL/dgamma_j = sum_i g_ij (x_ij - mu_i) / D_i;  dL/dbeta_j = sum_i g_ij.

        From stages (gamma and beta inputs 3 and 4): dL/dn_j = gamma_j g_j through the
        rule of the LayerNorm with gamma = 1 and beta = 0, whose own gamma and beta
        gradients (with g) are those of inputs 3 and 4.
        """
        if self.from_stages:
            plain = self._plain(len(args[0][0]))
            if wrt in _PARAMETER:
                return plain.backward(args[:3], out, grad, _PARAMETER[wrt], num)
            (gamma,) = args[3]
            scaled = [[g * c for g, c in zip(row, gamma)] for row in grad]
            return plain.backward(args[:3], out, scaled, wrt, num)
        X, mu, var = args
        if wrt == "beta":
            return [[num.total(column) for column in zip(*grad)]]
        eps = num.const(self.eps)
        gamma = [num.const(v) for v in self.gamma] if wrt != "gamma" else []
        result, centred = [], []
        for row, (m,), (v,), g in zip(X, mu, var, grad):
            root = num.sqrt(v) if self.unbiased else None  # s, for the unbiased D only
            D = root + eps if self.unbiased else num.sqrt(v + eps)
            if wrt == "gamma":
                centred.append([(x - m) / D for x in row])
            elif wrt == 0:
                result.append([c * d / D for c, d in zip(gamma, g)])
            elif wrt == 1:
                result.append([-num.total(c * d for c, d in zip(gamma, g)) / D])
            elif wrt == 2:
                slope = 1 / (2 * root) if self.unbiased else 1 / (2 * D)
                result.append([-num.total(c * d * (x - m) for c, d, x in zip(gamma, g, row))
                               * slope / (D * D)])
        if wrt == "gamma":
            return [[num.total(d * c for d, c in zip(ds, cs))
                     for ds, cs in zip(zip(*grad), zip(*centred))]]
        return result

    def staged(self) -> Operation | None:
        """The same LayerNorm reading gamma and beta from stages."""
        return None if self.from_stages else replace(
            self, from_stages=True, notation=self.notation or TRAINED)

    def backward_facts(self, gradient: Stage, part: Part) -> list[Fact]:
        """The LayerNorm's gradient at its input sums to exactly 0 over each row.

        The LayerNorm's part of dL/dx is the sum of three rules: this step's, the
        mean's and the variance's (x's other consumers, such as a residual connection
        in pre-norm, are not part of it).  Each row's sum cancels once dL/dmu is
        written as its local formula -sum_j gamma_j g_j / D.  False for the
        whole-matrix mean and variance (only the sum over the whole matrix cancels).
        """
        if part.wrt != 0 or self.from_stages:
            return []
        g, norm = gradient.derivation, part.consumer
        mine = [p for p in gradient.op.parts(gradient)
                if p.consumer is norm or p.consumer.name in norm.inputs[1:] and p.wrt == 0]
        mean = [p.upstream for p in mine if p.consumer.name == norm.inputs[1]]
        subs = {s: e for u in mean for s, e in zip(g.symbols(u), g.local(u))}
        total = sum((p.formula for p in mine[1:]), mine[0].formula)
        name = f"{gradient.name}.layer_norm_row_sums_zero{label(gradient)}"
        statement = (f"the gradient of {norm.name} at its input ({gradient.name}, its "
                     f"LayerNorm part) sums to exactly 0 over each row{label(gradient)}")
        bad = [i for i in range(total.rows) if not cancels(sympy.Add(*total.row(i)).xreplace(
            subs))]
        if bad:
            return [Fact(name, statement, FALSE, f"row {bad[0]} does not cancel (a mean or "
                         f"variance over more than the row)")]
        return [Fact(name, statement, PROVED, "sum_j (gamma_j g_j / D + dL/dmu / d + dL/dsigma^2 "
                     "2 (x_j - mu) / m) = 0 with dL/dmu = -sum_j gamma_j g_j / D")]

    def backward_function(self, wrt: int | str):
        return BACKWARD_RULES[self.unbiased][_PARAMETER.get(wrt, wrt) if self.from_stages
                                             else wrt]

    def backward_arguments(self, wrt, args, out, grad, dtype):
        if self.from_stages:
            x, mu, sigma2, gamma, _beta, eps = self.arguments(args, dtype)
            wrt = _PARAMETER.get(wrt, wrt)
        else:
            x, mu, sigma2, gamma, _beta, eps = self.arguments(
                [a.astype(dtype) for a in args], dtype)
        return backward_arguments(wrt, x, mu, sigma2, gamma, eps, grad.astype(dtype))


#: The unbiased convention's variance s^2 and its root, a LayerNorm's output's own mean
#: and variance (``[stages] output_moments``).
UNBIASED_VARIANCE = Notation(r"\hat{\sigma}^2", "σ̂²", "Unbiased variance")
UNBIASED_STD = Notation(r"\hat{\sigma}", "σ̂", "Unbiased standard deviation")
OUTPUT_MEAN = Notation(r"\mu_y", "μ_y", "Mean of the normalised output")
OUTPUT_VARIANCE = Notation(r"\sigma_y^2", "σ_y²", "Variance of the normalised output")
#: gamma and beta: inputs 3 and 4 of a LayerNorm reading them from stages.
_PARAMETER = {3: "gamma", 4: "beta"}
#: A LayerNorm's notation reading trained gamma and beta, when its role gives it none.
TRAINED = Notation("y", "y", "LayerNorm (trained scale and shift)")
