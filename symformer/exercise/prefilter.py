"""A float64 prefilter: reject draws whose asked values lie clearly within the margin.

Most draws fail the rounding margin, and building a draw as an example (every entry
read as an exact rational) costs far more than the check.  The prefilter computes
the asked stages of a draw in float64, straight from the drawn table (no loader,
no derivation): the stages no drawn number reaches are the template's floats,
computed once; an embedding or projection reading drawn numbers runs its
operation's NumPy function on the drawn floats; every other stage runs its
operation's float reference (:meth:`~symformer.ops.base.Operation.reference`).

**It never rejects a draw the certified check would accept.**  A draw is rejected
only when some asked value ``t = v * 10**D`` has a float estimate whose distance
to the nearest rounding boundary, plus a tolerance, is at most the margin:

    dist(t_float) + tol <= margin,  tol = 10**D * 2**-30 * (1 + S)

with ``S`` the largest magnitude of any value the forward computed.  The float
error of ``t`` is at most a few dozen roundings of quantities no larger than ``S``
(sums of products of small rationals, one division by sqrt(d_k), a softmax's
exp, sin/cos of the template's positional encoding), i.e. below about
``10**D * 2**-45 * (1 + S)``: ``tol`` exceeds it by a factor of at least 30,000.
So a rejected draw's true distance is below the margin, and the certified check
(which accepts only a distance proved above the margin) would reject it too.

Hence the prefilter decides nothing: the accepted variants (the files a seed
gives) are exactly those of the certified check alone, on every machine.  A
platform whose float rounding differs (by ~1e-15 relative) can only move a draw
that both checks reject from one to the other; both count it under ``margin``.
Non-finite floats (a masked score, a zero variance) are never rejected here.

When an asked stage reads a parameter the prefilter cannot place for certain (an
embedding's or projection's table not found where :func:`_locate` looks, e.g. in
a decoder, or not holding the template's derived numbers; an operation with
parameters other than these and LayerNorm), :func:`prefilter`
returns ``None`` and every draw goes to the certified check.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from symformer.engine import Derivation, Stage
from symformer.exercise.cells import entries_of
from symformer.exercise.draw import drawn_key
from symformer.exercise.fair import PATH_SHARE, score_stages
from symformer.exercise.settings import Settings, given_places

#: Relative tolerance of the float estimate (see the module docstring).
TOLERANCE = 2.0 ** -30
#: The tolerance on an input's rounding in the ``given``/``path`` recomputation, as a
#: share of TOLERANCE: 2^-40 (1 + S), still 32 times the float error bound 2^-45 (1 + S).
#: The positional encoding's cos(1/100) = 0.99995000042 lies 4.2e-6 units from a
#: boundary at 4 places, inside TOLERANCE's 3.6e-5: with it no draw of the built-in
#: example would be recomputed here.
INPUT_SHARE = 2.0 ** -10

_FLOATS: dict[Any, float] = {}


def _float(value: Any) -> float:
    """A drawn entry (an int, a decimal's text, a fraction's text) as a float."""
    if value not in _FLOATS:
        _FLOATS[value] = float(Fraction(value))
    return _FLOATS[value]


def _array(value: Any) -> np.ndarray:
    rows = value if isinstance(value[0], list) else [value]
    return np.array([[_float(v) for v in row] for row in rows], dtype=np.float64)


def _locate(stage: Stage, name: str) -> tuple[Any, ...] | None:
    """Where the template holds ``stage``'s parameter ``name``: a key path, else None."""
    if name == "embedding_table":
        return ("embeddings",)
    if stage.side != "encoder" or not stage.layer:
        return None
    path: tuple[Any, ...] = ("layer", stage.layer - 1)
    if stage.head:
        path += ("head", stage.head - 1)
    return (*path, name)


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def _same(value: Any, exact: Any) -> bool:
    """Whether the template's table ``value`` holds the exact matrix ``exact``."""
    flat = [v for row in value for v in row] if isinstance(value[0], list) else list(value)
    return len(flat) == len(exact) and all(
        Fraction(v) == Fraction(int(e.p), int(e.q)) for v, e in zip(flat, exact))


class Prefilter:
    """The float forward of the asked stages of a template's draws (see the module)."""

    def __init__(self, g: Derivation, asked: list[str], decimals: int, margin: Fraction,
                 fixed: dict[str, np.ndarray],
                 steps: list[tuple[str, Callable[[dict, list[np.ndarray]], np.ndarray]]],
                 fair: Settings | None = None) -> None:
        self._asked = asked
        self._inputs = {s.name: g[s.name].inputs for s in g}
        self._scale = float(10 ** decimals)
        self._margin = float(margin)
        self._fixed = fixed
        self._steps = steps
        self._fair = fair
        self._decimals = decimals
        computed = dict(steps)
        self._compute = {n: computed.get(n, lambda drawn, inputs, op=g[n].op:
                                          op.reference(inputs)) for n in asked}
        # ``given`` is decided here only for a stage computed from given tables alone: the
        # certified check reads a mixed stage's asked inputs exact, this chain rounded
        self._given = {n: all(i not in asked for i in g[n].inputs) for n in asked}
        self._scores = score_stages(g, asked)
        self._softmax = [n for n in asked if g[n].op.weighs_keys]
        # the asked entries (one token's path), and the rows of each softmax and score
        self._cells = {n: _mask(g[n].shape, entries_of(asked, n, g[n].shape))
                       for n in asked}
        self._rows = {n: self._cells[n].any(axis=1) for n in self._softmax}
        for n in self._scores:
            rows = np.zeros(g[n].shape[0], dtype=bool)
            if n in asked:
                rows |= self._cells[n].any(axis=1)
            for m in self._softmax:
                if self._inputs[m][0] == n:
                    rows |= self._rows[m]
            self._rows[n] = rows

    def _forward(self, drawn: dict[str, Any]) -> tuple[dict[str, np.ndarray], float]:
        """Every needed stage of the draw in float64, and the tolerance ``tol``."""
        values = dict(self._fixed)
        with np.errstate(all="ignore"):
            for name, step in self._steps:
                values[name] = step(drawn, [values[i] for i in self._inputs[name]])
            size = max(float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0))
                       for v in values.values())
        return values, self._scale * TOLERANCE * (1.0 + size)

    def failure(self, drawn: dict[str, Any]) -> str | None:
        """The first asked entry of the draw clearly within the margin, else None."""
        found = self.rejection(drawn, fair=False)
        return None if found is None else found[1]

    def rejection(self, drawn: dict[str, Any], fair: bool = True) -> tuple[str, str] | None:
        """Why the draw is clearly rejected (``margin``, or with ``fair`` one of the
        fairness constraints the prefilter decides: ``score``, ``saturated``,
        ``stated``) and the first entry, else None."""
        values, tol = self._forward(drawn)
        with np.errstate(all="ignore"):
            for name in self._asked:
                t = values[name] * self._scale
                bad = self._cells[name] & np.isfinite(t) & (
                    np.abs(t - np.floor(t) - 0.5) + tol <= self._margin)
                if bad.any():
                    i, j = np.argwhere(bad)[0]
                    return "margin", f"{name}[{i},{j}]"
            if fair and self._fair is not None:
                return self._unfair(values, tol / self._scale) or \
                    self._path(drawn, values, tol / self._scale)
        return None

    def _flat(self, values: dict[str, np.ndarray], tol: float) -> tuple[str, str] | None:
        """``spread`` clearly failed: an asked softmax row (two unmasked keys or more)
        whose largest weight exceeds the smallest by clearly less than min_spread."""
        for name in self._softmax:
            w, live = values[name], np.isfinite(values[self._inputs[name][0]])
            for i, (row, keep) in enumerate(zip(w, live)):
                if self._rows[name][i] and keep.sum() >= 2 and \
                        row[keep].max() - row[keep].min() + 2 * tol < float(self._fair.min_spread):
                    return "spread", f"{name} row {i}"
        return None

    def _path(self, drawn: dict[str, Any], values: dict[str, np.ndarray], tol: float
              ) -> tuple[str, str] | None:
        """``given``, ``spread`` or ``path`` clearly failed (in the certified check's
        order): an asked stage recomputed in float from its inputs rounded as a student
        has them (asked ones at D, given ones as the sheet prints them) lies clearly
        within the margin (a tenth of it for ``path``) or, read from given tables, in
        another cell; or a softmax row is clearly flatter than min_spread.  When an
        input's rounding is not clear (within ``tol`` of a boundary: an exact tie of
        the student's chain), that stage and the later ones are not decided here."""
        scale, margin = self._scale, self._margin
        recomputed: dict[str, np.ndarray] = {}
        for name in self._asked:
            inputs = []
            for source in self._inputs[name]:
                places = 10.0 ** (self._decimals if source in self._asked
                                  else given_places(self._asked, self._decimals))
                # the student's chain: an asked input as the student computed it
                t = (recomputed[source] / scale if source in recomputed
                     else values[source]) * places
                if source in recomputed:  # off the path: not read, any number will do
                    t = np.where(self._cells[source], t, values[source] * places)
                live = np.isfinite(t)
                if np.any(live & (np.abs(t - np.floor(t) - 0.5) <= tol * INPUT_SHARE * places)):
                    break  # a rounding the float cannot tell: this stage and later ones
                inputs.append(np.where(live, np.round(t) / places, values[source]))
            else:
                recomputed[name] = np.asarray(self._compute[name](drawn, inputs)) * scale
                continue
            break
        # the stages computed before any undecided input: what fails there fails
        for reason, names in (("given", [n for n in recomputed if self._given[n]]),
                              ("spread", self._softmax), ("path", list(recomputed))):
            if reason == "spread":
                found = self._flat(values, tol)
                if found is not None:
                    return found
                continue
            for name in names:
                p, t = recomputed[name], values[name] * scale
                live = self._cells[name] & np.isfinite(p) & np.isfinite(t)
                near = np.abs(p - np.floor(p) - 0.5) + tol * scale <= (
                    margin if reason == "given" else margin / PATH_SHARE)
                if reason == "given":
                    clear = (np.abs(p - np.floor(p) - 0.5) > tol * scale) & \
                        (np.abs(t - np.floor(t) - 0.5) > tol * scale)
                    near |= clear & (np.round(p) != np.round(t))
                bad = live & near
                if bad.any():
                    i, j = np.argwhere(bad)[0]
                    return reason, f"{name}[{i},{j}]"
        return None

    def _unfair(self, values: dict[str, np.ndarray], tol: float) -> tuple[str, str] | None:
        """A fairness constraint clearly failed (by more than the float error ``tol``)."""
        fair = self._fair
        if fair.max_score is not None:
            for name in self._scores:
                s = values[name]
                bad = self._rows[name][:, None] & np.isfinite(s) & (
                    np.abs(s) - tol > float(fair.max_score))
                if bad.any():
                    i, j = np.argwhere(bad)[0]
                    return "score", f"{name}[{i},{j}]"
        for name in self._softmax:
            w, live = values[name], np.isfinite(values[self._inputs[name][0]])
            rows = self._rows[name] & (live.sum(axis=1) >= 2) & np.any(
                live & (w - tol > float(fair.max_weight)), axis=1)
            if rows.any():
                return "saturated", f"{name} row {int(np.argmax(rows))}"
        if fair.stated:
            for name in self._asked:
                t = np.abs(values[name] * self._scale)
                bad = self._cells[name] & np.isfinite(t) & (t > tol * self._scale) & (
                    t + tol * self._scale < 0.5)
                if bad.any():
                    i, j = np.argwhere(bad)[0]
                    return "stated", f"{name}[{i},{j}]"
        return None


def _mask(shape: tuple[int, int], cells: frozenset[tuple[int, int]]) -> np.ndarray:
    """A boolean table of ``shape``, True at ``cells``."""
    out = np.zeros(shape, dtype=bool)
    for i, j in cells:
        out[i, j] = True
    return out


def _step(stage: Stage, drawn_at: dict[str, tuple[Any, ...]]
          ) -> Callable[[dict, list[np.ndarray]], np.ndarray]:
    """How one stage reading drawn numbers (at ``drawn_at``) or drawn stages is computed."""
    op = stage.op
    if not drawn_at:
        return lambda drawn, inputs: op.reference(inputs)
    if op.lookup == "tokens":
        path = drawn_at["embedding_table"]
        ids = list(op.token_ids)
        return lambda drawn, inputs: op.function()(_array(_get(drawn, path)), ids)
    weight = drawn_at.get(op.weight)
    bias = drawn_at.get(op.bias)
    W0 = op.arguments([np.zeros((1, op.W.rows))], np.float64)[1:]

    def project(drawn: dict, inputs: list[np.ndarray]) -> np.ndarray:
        args = [_array(_get(drawn, weight)) if weight else W0[0]]
        if op.b is not None:
            args.append(_array(_get(drawn, bias)) if bias else W0[1])
        return np.asarray(op.function()(inputs[0], *args), dtype=np.float64)
    return project


def _placed(data: dict[str, Any], stage: Stage) -> dict[str, tuple[Any, ...]] | None:
    """Where the drawn parameters of ``stage`` are in a draw (name -> key path), or
    None when a parameter is not placed for certain.

    A LayerNorm's gamma and beta come from ``gamma_*``/``beta_*`` keys, never drawn;
    an embedding's or a projection's parameters must be found in the template at
    the path :func:`_locate` gives, holding exactly the derivation's numbers."""
    if stage.op.matrix_form == "layer_norm":
        return {}
    if not (stage.op.lookup == "tokens" or stage.op.matrix_form == "affine"):
        return None if stage.op.parameters() else {}
    drawn_at: dict[str, tuple[Any, ...]] = {}
    for name, exact in stage.op.parameters().items():
        path = _locate(stage, name)
        try:
            value = _get(data, path) if path is not None else None
            if not isinstance(value, list) or not _same(value, exact):
                return None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError,
                ZeroDivisionError):
            return None  # not there, or not plain rationals
        if drawn_key(path[-1]):
            drawn_at[name] = path
    return drawn_at


def prefilter(data: dict[str, Any], g: Derivation, asked: list[str], decimals: int,
              margin: Fraction, fair: Settings | None = None) -> Prefilter | None:
    """The prefilter of the template ``data`` (derived as ``g``), or None when it cannot
    place every drawn number the asked stages read.  With ``fair`` it also rejects the
    draws that clearly fail its ``max_score``, ``max_weight`` and ``stated``, or the
    ``given``, ``spread`` and ``path`` constraints."""
    needed = set(asked).union(*(g.ancestors(name) for name in asked))
    fixed: dict[str, np.ndarray] = {}
    steps: list = []
    for stage in g:
        if stage.name not in needed:
            continue
        drawn_at = _placed(data, stage)
        if drawn_at is None:
            return None
        if not drawn_at and all(i in fixed for i in stage.inputs):
            fixed[stage.name] = np.asarray(
                stage.op.reference([fixed[i] for i in stage.inputs]), dtype=np.float64)
        else:
            steps.append((stage.name, _step(stage, drawn_at)))
    return Prefilter(g, asked, decimals, margin, fixed, steps, fair)
