"""What a finite mask (``mask = -1e9``) changes, evaluated without cancellation.

With a finite mask M a masked weight is about exp(M) > 0 instead of 0, so an entry
differs from its value under the exact mask (-inf) by something like exp(-1e9): no
working precision can see it, and a tie of the exactly masked value stays a tie.
This module evaluates, in ball arithmetic, the *difference* d = x - x0 of every entry
from its exactly masked value x0 by rules that never subtract two close numbers
(d(a b) = da b0 + a0 db + da db, d(exp s) = exp(s0) expm1(ds), ...), so d is
enclosed to full relative precision however small it is.  When x0 is proved equal to
a rounding boundary, the certified sign of d decides the rounding.

A masked score has x0 = -inf; its "difference" is its full finite value.
"""

from __future__ import annotations

from collections.abc import Sequence

from flint import arb

from symformer.engine import ops
from symformer.engine.arbmath import NEG_INF, ArbMatrix, rational_ball, relu_ball


def differences(stages, base: dict[str, ArbMatrix]) -> dict[str, ArbMatrix] | None:
    """d = x - x0 of every stage (at the current precision), or None for an unknown op.

    ``stages``: the finitely masked derivation's stages in order; ``base``: every
    stage of the exactly masked twin evaluated at the current precision.
    """
    d: dict[str, ArbMatrix] = {}
    for stage in stages:
        rule = _RULES.get(type(stage.op))
        if rule is None:
            return None
        d[stage.name] = rule(stage.op, [base[i] for i in stage.inputs],
                             [d[i] for i in stage.inputs])
    return d


def _zeros_like(m: ArbMatrix) -> ArbMatrix:
    return [[arb(0) for _ in row] for row in m]


def _constant(op, x0, dx):
    return _zeros_like(op.arb([]))


def _identity(op, x0, dx):
    return dx[0]


def _add(op, x0, dx):
    return ops.Add().arb(dx)


def _affine(op: ops.Affine, x0, dx):
    return ops.Affine(op.W).arb(dx)


def _matmul(op: ops.MatMul, x0, dx):
    (a0, b0), (da, db) = x0, dx
    terms = [op.arb([da, b0]), op.arb([a0, db]), op.arb([da, db])]
    return [[x + y + z for x, y, z in zip(*rows)] for rows in zip(*terms)]


def _concat(op, x0, dx):
    return ops.Concat().arb(dx)


def _scale_mask(op: ops.ScaleMask, x0, dx):
    (s0,), (ds,) = x0, dx
    scale = 1 / arb(op.d_k).sqrt()
    offset = rational_ball(op.mask_value) if op.mask_value is not None else None
    out = []
    for i, (row0, drow) in enumerate(zip(s0, ds)):
        out_row = []
        for j, (s, d) in enumerate(zip(row0, drow)):
            if (i, j) in op.masked and offset is not None:
                out_row.append((s + d) * scale + offset)  # the full score: x0 is -inf
            else:
                out_row.append(d * scale)
        out.append(out_row)
    return out


def _softmax(op, x0, dx):
    (s0,), (ds,) = x0, dx
    out = []
    for row0, drow in zip(s0, ds):
        e0 = [arb(0) if s is NEG_INF else s.exp() for s in row0]
        de = [d.exp() if s is NEG_INF else s.exp() * d.expm1() for s, d in zip(row0, drow)]
        z0, dz = sum(e0, arb(0)), sum(de, arb(0))
        z = z0 + dz
        out.append([(d * z0 - e * dz) / (z * z0) for e, d in zip(e0, de)])
    return out


def _activation(op: ops.Activation, x0, dx):
    (h0,), (dh,) = x0, dx
    if op.kind == "relu":
        def one(h: arb, d: arb) -> arb:
            if h > 0 and h + d > 0:
                return d
            if h < 0 and h + d < 0:
                return arb(0)
            return relu_ball(h + d) - relu_ball(h)
    else:
        root2, root2pi = arb(2).sqrt(), (2 * arb.pi()).sqrt()

        def one(h: arb, d: arb) -> arb:  # mean value theorem: gelu'(xi) d
            xi = h.union(h + d)
            return ((1 + (xi / root2).erf()) / 2 + xi * (-xi * xi / 2).exp() / root2pi) * d
    return [[one(h, d) for h, d in zip(r0, dr)] for r0, dr in zip(h0, dh)]


def _row_mean(op, x0, dx):
    return ops.RowMean().arb(dx)


def _row_variance(op: ops.RowVariance, x0, dx):
    (x, mu), (d, dmu) = x0, dx
    out = []
    for row, (m,), drow, (dm,) in zip(x, mu, d, dmu):
        n = len(row) - 1 if op.unbiased else len(row)
        total = sum(((dv - dm) * (2 * (v - m) + dv - dm) for v, dv in zip(row, drow)), arb(0))
        out.append([total / n])
    return out


def _normalize(op: ops.Normalize, x0, dx):
    (x, mu, var), (d, dmu, dvar) = x0, dx
    eps = rational_ball(op.eps)
    out = []
    for row, (m,), (v,), drow, (dm,), (dv,) in zip(x, mu, var, d, dmu, dvar):
        if op.unbiased:
            r0, r = _root(v), _root(v + dv)
            den0, den = r0 + eps, r + eps
            dden = dv / (r + r0)
        else:
            den0, den = (v + eps).sqrt(), (v + dv + eps).sqrt()
            dden = dv / (den + den0)
        out.append([g * ((dv_ - dm) / den - (v_ - m) * dden / (den * den0))
                    for v_, dv_, g in zip(row, drow, (rational_ball(g) for g in op.gamma))])
    return out


def _root(v: arb) -> arb:
    return v.sqrt() if v > 0 else arb(0).union(v.upper().max(arb(0)).sqrt())


_RULES = {
    ops.Constant: _constant, ops.Identity: _identity, ops.Add: _add, ops.Affine: _affine,
    ops.MatMul: _matmul, ops.Concat: _concat, ops.ScaleMask: _scale_mask,
    ops.Softmax: _softmax, ops.Activation: _activation, ops.RowMean: _row_mean,
    ops.RowVariance: _row_variance, ops.Normalize: _normalize,
}


def finitely_masked(stages: Sequence) -> bool:
    """Whether some score is masked by a finite value (the derivation has a twin)."""
    return any(isinstance(s.op, ops.ScaleMask) and s.op.masked and s.op.mask_value is not None
               for s in stages)
