"""The last step of a worked line: a stage recomputed from the parts an author printed.

A lecturer prints the terms of a projection row and then their sum, e^{s − max s} and
then α = e / Σ e, x − μ and σ² + ε and then the LayerNorm, Σ_j x_j and then the mean.
Those parts are side stages (:mod:`symformer.blocks.side_parts`): nothing reads them,
so a chain over the derivation never recomputes the stage from them.  Each
:class:`Route` here says how the stage is recomputed from some of its parts, so that
reader rounding (:meth:`symformer.verify.check.Checker.explain_reader_rounding`) finds
the numbers a reader gets from the printed parts:

* a softmax S from ``S.exp`` (α = e / Σ_j e) or with ``S.exp_sum`` (α = e / Σ printed),
  the same with ``S.shifted_exp`` and ``S.shifted_exp_sum``;
* a projection or weighted sum S from ``S.terms.rowR`` (row R = column sums, plus the
  bias);
* a LayerNorm S from ``S.centred`` and/or ``S.variance_eps``: γ (x − μ) / √(σ² + ε) + β;
  an RMSNorm S from ``S.mean_square_eps``: γ x / √(⟨x²⟩ + ε);
* a row mean, a variance or a mean square S from ``S.total``: Σ / d.

Entries are exact rationals while every number read is (the printed parts and the
engine's radius-0 balls), else balls at the precision evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flint import arb

from symformer.blocks.side_stages import add_side_stage
from symformer.engine import Derivation
from symformer.engine.arbmath import constant_vector, precision, sympy_to_arb
from symformer.lazy import sympy
from symformer.verify.chain import Entry, Values, as_ball, exact_ball, is_rational

#: The parts a route reads, with their values (all rows), and the engine's values of
#: every stage: the stage's values recomputed from the parts.
Compute = Callable[[dict[str, Values], dict[str, Values]], Values]


@dataclass(frozen=True)
class Route:
    """A way to recompute a stage from some of its side stages (``parts``); ``optional``
    parts are read as printed when printed, else the route does without them (an
    S.exp_sum: else Σ_j of the printed e)."""

    parts: tuple[str, ...]
    compute: Compute
    optional: tuple[str, ...] = ()


def _exact(e: Entry) -> Entry:
    return exact_ball(e) if isinstance(e, arb) else e


def _add(values: Sequence[Entry]) -> Entry:
    values = [_exact(v) for v in values]
    if all(is_rational(v) for v in values):
        return sympy.Add(*values)
    return sum((as_ball(v) for v in values), arb(0))


def _over(a: Entry, b: Entry) -> Entry:
    a, b = _exact(a), _exact(b)
    if is_rational(a) and is_rational(b) and b != 0:
        return a / b
    return as_ball(a) / as_ball(b)


def routes(g: Derivation, stage: str) -> list[Route]:
    """The ways ``stage`` of ``g`` is recomputed from its side stages (none: [])."""
    s = g[stage]
    op = s.op.name
    if op == "softmax":
        return [Route((f"{stage}.{e}",), _normalized(f"{stage}.{e}", f"{stage}.{e}_sum"),
                      (f"{stage}.{e}_sum",)) for e in ("exp", "shifted_exp")]
    if op in ("projection", "weighted_sum"):
        return [Route((f"{stage}.terms.row{r}",), _summed(g, stage, r))
                for r in range(s.shape[0])]
    if op == "normalize" and not s.op.unbiased and not s.op.from_stages:
        centred, denominator = f"{stage}.centred", f"{stage}.variance_eps"
        return [Route((centred, denominator), _layer_norm(s.op, centred, denominator))]
    if op == "rms_normalize" and not s.op.from_stages:
        return [Route((f"{stage}.mean_square_eps",), _rms_norm(s, f"{stage}.mean_square_eps"))]
    if op in ("mean", "variance", "mean_square") and not getattr(s.op, "unbiased", False):
        d = g[s.inputs[0]].shape[1]
        return [Route((f"{stage}.total",), lambda parts, _, t=f"{stage}.total": [
            [_over(row[0], sympy.Integer(d))] for row in parts[t]])]  # biased: Σ / d
    return []


def reading(g: Derivation, stage: str, names: set[str]) -> Route | None:
    """The route of ``stage`` whose parts include every one of ``names`` (None: none
    does; ``names`` are then stages upstream, or not about the stage)."""
    if not names or stage not in g:
        return None
    for way in routes(g, stage):
        if names <= set(way.parts + way.optional):
            return way
    return None


def _normalized(exp: str, total: str) -> Compute:
    def compute(parts: dict[str, Values], _: Values) -> Values:
        sums = parts.get(total) or [[_add([e for e in row if e is not None])]
                                    for row in parts[exp]]
        return [[_over(e, s[0]) for e in row] for row, s in zip(parts[exp], sums)]
    return compute


def _summed(g: Derivation, stage: str, r: int) -> Compute:
    s = g[stage]
    terms = f"{stage}.terms.row{r}"

    def compute(parts: dict[str, Values], engine: dict[str, Values]) -> Values:
        T = parts[terms]
        out = [list(row) for row in engine[stage]]
        bias: list[Entry] = []
        if s.op.name == "projection" and s.op.b is not None:
            bias = list(engine[s.inputs[2]][0]) if s.op.from_stages else [
                v if v.is_Rational else sympy_to_arb(v) for v in s.op.b]
        out[r] = [_add([row[j] for row in T] + ([bias[j]] if bias else []))
                  for j in range(len(T[0]))]
        return out
    return compute


def _layer_norm(op, centred: str, denominator: str) -> Compute:
    def compute(parts: dict[str, Values], _: Values) -> Values:
        gamma, beta = constant_vector(op.gamma), constant_vector(op.beta)
        return [[g * as_ball(c) / as_ball(v[0]).sqrt() + b
                 for c, g, b in zip(row, gamma, beta)]
                for row, v in zip(parts[centred], parts[denominator])]
    return compute


def _rms_norm(s, denominator: str) -> Compute:
    def compute(parts: dict[str, Values], engine: dict[str, Values]) -> Values:
        gamma = constant_vector(s.op.gamma)
        return [[g * as_ball(x) / as_ball(v[0]).sqrt() for x, g in zip(row, gamma)]
                for row, v in zip(engine[s.inputs[0]], parts[denominator])]
    return compute


def evaluate(g: Derivation, stage: str, way: Route, printed: dict[str, object],
             bits: int) -> Values:
    """``stage`` recomputed by the route ``way`` at ``bits``: the printed parts (a matrix, a
    callable giving one, or a :class:`~symformer.verify.chain.Partial`) in place of the
    engine's, the parts not printed the engine's."""
    for part in way.parts + way.optional:
        if part in printed or part in way.parts:
            add_side_stage(g, part)
    engine = g.evaluate(bits)
    with precision(bits):
        parts = {}
        for part in way.parts + way.optional:
            if part not in printed:
                if part in way.parts:
                    parts[part] = engine[part]
                continue
            v = printed[part]
            parts[part] = v.merged(engine[part]) if hasattr(v, "merged") else \
                v() if callable(v) else v
        return way.compute(parts, engine)
