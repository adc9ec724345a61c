"""Recompute stages from replaced or rounded upstream values, exactly where possible.

A *chain* re-evaluates the stages between some upstream stages and a target:

* **replaced** stages take given values: an author's printed numbers as exact
  rationals (the step "as printed"), or balls of radius ½·10^-d around them (every
  input inside the author's rounding interval, for interval consistency);
* **rounded** stages are rounded to d decimals after they are computed, as a reader
  with a pencil copies a printed table ("reader rounding").

Entries are exact SymPy rationals while every input is rational and the op keeps
them rational (sums, products, means, ReLU), so exact ties such as 1.595 are
decided exactly; otherwise they are ``arb`` balls at the chain's precision.  Stages
untouched by replacement or rounding come from the engine's certified balls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from flint import arb, fmpq

from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.engine.rounding import round_ball, round_fraction
from symformer.errors import InputError, UndecidedError
from symformer.example.expression import Constant
from symformer.lazy import sympy
from symformer.ops import Operation

#: An entry: exact rational, ball, or None for a masked (-inf) score.
Entry = "sympy.Rational | arb | None"
Values = list[list[Entry]]

K = TypeVar("K")

#: Precisions (bits) tried in turn before giving up on a decision.
PRECISIONS = (128, 256, 512, 1024, 2048, 4096)


def ball(value: Fraction | Constant, radius: Fraction = Fraction(0)) -> arb:
    """A ball holding the rational (or irrational claimed) ``value`` (± ``radius``) at
    the current precision."""
    centre = value.ball() if isinstance(value, Constant) else arb(
        fmpq(value.numerator, value.denominator))
    if not radius:
        return centre
    r = arb(fmpq(radius.numerator, radius.denominator))
    return (centre - r).union(centre + r)


def is_rational(e: Entry) -> bool:
    """Is the entry an exact SymPy rational (not a ball, not -inf)?"""
    return isinstance(e, sympy.Basic) and e.is_Rational


def as_ball(e: Entry) -> arb | None:
    """The entry as a ball at the current precision (None, -inf, stays None)."""
    if e is None or isinstance(e, arb):
        return e
    if isinstance(e, Constant):  # a claimed irrational taken as printed
        return e.ball()
    return ball(Fraction(int(e.p), int(e.q)))


@dataclass(frozen=True)
class Partial:
    """Some entries of a stage replaced (an author printed some rows, or one entry):
    ``entries`` maps (row, col) to a value (or a callable of no argument giving one at
    the current precision); every other entry is the engine's exact value."""

    entries: Mapping[tuple[int, int], object]

    def merged(self, exact: Values) -> Values:
        """The stage's entries with the given ones in place of ``exact``'s."""
        out = [list(row) for row in exact]
        for (i, j), v in self.entries.items():
            out[i][j] = v() if callable(v) else v
        return out


class Chain:
    """Re-evaluate ``target`` from ``replaced`` and ``rounded`` upstream stages of ``g``.

    A replaced stage's value is a matrix of entries, a callable of no argument giving
    one (at the precision evaluated), or a :class:`Partial` (some entries replaced).
    """

    def __init__(self, g: Derivation, target: str, replaced: dict[str, object] | None = None,
                 rounded: dict[str, int] | None = None) -> None:
        self.g = g
        self.target = target
        self.replaced = dict(replaced or {})
        self.rounded = dict(rounded or {})
        upstream = g.ancestors(target) | {target}
        for name in self.replaced:
            if name not in upstream:
                raise InputError(f"{name} does not feed {target}: only stages that "
                                 f"{target} is computed from can be replaced")
        sources = set(self.replaced) | (set(self.rounded) & upstream)
        self.affected = {s.name for s in g if s.name in upstream
                         and (s.name in sources or g.ancestors(s.name) & sources)}

    def evaluate(self, bits: int) -> dict[str, Values] | None:
        """Every affected stage at ``bits``; None when a rounding is undecided there.

        ``replaced`` values may be callables of no argument, called at this precision
        (balls must be built at the precision they are used at).
        """
        engine = self.g.evaluate(bits)
        values: dict[str, Values] = {}
        with precision(bits):
            for stage in self.g:
                if stage.name not in self.affected:
                    continue
                if stage.name in self.replaced:
                    v = self.replaced[stage.name]
                    v = v.merged(engine[stage.name]) if isinstance(v, Partial) \
                        else v() if callable(v) else v
                else:
                    v = apply(stage.op, [values.get(i, engine[i]) for i in stage.inputs])
                if stage.name in self.rounded:
                    v = round_values(v, self.rounded[stage.name])
                    if v is None:
                        return None
                values[stage.name] = v
                if stage.name == self.target:
                    break
        if self.target not in values:
            values[self.target] = engine[self.target]
        return values

    def feeding(self) -> set[str]:
        """The replaced stages the target is recomputed from: those reached from it
        through stages that are not replaced themselves (a replaced stage upstream of
        another, and only through it, is never read)."""
        found, seen = set(), set()
        pending = [self.target]
        while pending:
            name = pending.pop()
            for i in self.g[name].inputs:
                if i in seen:
                    continue
                seen.add(i)
                if i in self.replaced:
                    found.add(i)
                else:
                    pending.append(i)
        return found

    def values(self) -> tuple[Values, int]:
        """The target's entries and the precision they were computed at."""
        for bits in PRECISIONS:
            result = self.evaluate(bits)
            if result is not None:
                return result[self.target], bits
        raise UndecidedError(f"cannot decide the roundings upstream of {self.target} "
                             f"within {PRECISIONS[-1]} bits")


#: At most this many input entries are taken symbolically to keep the exact entries of
#: a step whose inputs are partly exact (:func:`apply`).
MIXED_LIMIT = 1024


def apply(op: Operation, args: list[Values]) -> Values:
    """``op`` on the given entries: exactly when it keeps rationals rational, else on
    balls; when only some inputs are exact rationals (an author printed some rows),
    the entries computed from those alone stay exact."""
    exact = [is_rational(e) for a in args for r in a for e in r]
    if op.rational and any(exact) and len(exact) <= MIXED_LIMIT:
        # the engine's balls of radius 0 (1/2, 3/2) are exact too: a printed 1.21 times
        # them is decided exactly (0.5 · 1.21 + 1.5 · 1.14 = 2.315, a tie at 2 decimals)
        args = [[[exact_ball(e) for e in r] for r in a] for a in args]
        exact = [is_rational(e) for a in args for r in a for e in r]
    if op.rational and all(exact):
        if args:  # a stage with no inputs is a constant: its balls are its value
            result = op.sympy([sympy.Matrix(a) for a in args])
            if all(e.is_Rational for e in result):
                return result.tolist()
    balls = op.arb([[[as_ball(e) for e in row] for row in a] for a in args])
    if op.rational and any(exact) and len(exact) <= MIXED_LIMIT:
        found = _exact_entries(op, args)
        if found is not None:
            return [[e if e.is_Rational else b for e, b in zip(er, br)]
                    for er, br in zip(found.tolist(), balls)]
    return balls


def exact_ball(e: Entry) -> Entry:
    """A finite ball of radius 0 as the exact (dyadic) rational it is; else ``e``."""
    if isinstance(e, arb) and e.is_exact() and e.is_finite():
        man, exp = e.mid().man_exp()
        return sympy.Rational(int(man)) * sympy.Rational(2) ** int(exp)
    return e


def _exact_entries(op: Operation, args: list[Values]) -> sympy.Matrix | None:
    """``op`` with every entry that is not an exact rational taken as a symbol of its
    own: the result's rational entries do not depend on them (None: the operation
    cannot take symbols)."""
    symbolic = [sympy.Matrix([[e if is_rational(e) else sympy.Symbol(f"x{k}_{i}_{j}", real=True)
                               for j, e in enumerate(row)] for i, row in enumerate(a)])
                for k, a in enumerate(args)]
    try:
        result = op.sympy(symbolic)
    except (TypeError, ValueError):  # a comparison a symbol cannot decide
        return None
    return result


def round_values(values: Values, decimals: int) -> Values | None:
    """Round every entry to ``decimals`` (exact rationals out); None if a ball cannot tell."""
    out: Values = []
    for row in values:
        out_row: list[Entry] = []
        for e in row:
            if e is None:
                out_row.append(None)
                continue
            if is_rational(e):
                r = round_fraction(Fraction(int(e.p), int(e.q)), decimals=decimals)
            else:
                r = round_ball(e, decimals=decimals)
                if r is None:
                    return None
            out_row.append(sympy.Rational(r.digits) * sympy.Rational(10) ** r.exponent)
        out.append(out_row)
    return out


def within(e: Entry, claimed: Fraction | Constant, half: Fraction) -> bool | None:
    """Is |e - claimed| <= half?  None when the ball is too wide to tell (an irrational
    ``claimed``, whose half is 0, is never decided equal here: only a proof tells)."""
    if e is None:
        return False
    e = exact_ball(e)  # a ball of radius 0 is compared exactly (1 against 1.0000 ± ½·10⁻⁴)
    if isinstance(claimed, Constant):
        difference = as_ball(e) - claimed.ball()
        return False if (difference > 0 or difference < 0) else None
    if is_rational(e):
        return abs(Fraction(int(e.p), int(e.q)) - claimed) <= half
    distance = abs(e - ball(claimed))
    h = ball(half)
    if distance <= h:
        return True
    if distance > h:
        return False
    return None


def decide(targets: Mapping[K, tuple[int, int, Fraction | None, Fraction]],
           values: Callable[[int], Values | None], g: Derivation | None = None,
           stage: str = "", where: str = "", all_or_none: bool = False) -> dict[K, bool]:
    """Is each target's claimed number within its half-unit of the value?

    ``targets`` maps a key to (row, col, claimed, half): ``claimed`` None means
    "-inf" (a masked score), right only where the value is masked too; an irrational
    ``claimed`` (a :class:`Constant`, half 0) is right only when the value is proved
    equal to it (on ``g``'s symbols of ``stage``), wrong when a ball separates them.
    ``values(bits)`` gives the stage's entries at a precision (None: not decidable
    there); it is raised until every target is decided.  A value still on the boundary
    claimed ± half at the last precision is proved equal to it on ``g``'s symbols of
    ``stage`` (a correct rounding), or the run ends with an :class:`UndecidedError`
    naming ``where``.  ``all_or_none``: only whether every target is right matters (an
    explanation): the first target decided wrong ends it, with that verdict (no proof
    is tried for the others).
    """
    pending = set(targets)
    verdicts: dict[K, bool] = {}
    tried: set[K] = set()  # exact claims whose proof failed
    for bits in PRECISIONS:
        v = values(bits)
        if v is None:  # a rounding upstream is undecided at this precision
            continue
        for key in list(pending):
            row, col, claimed, half = targets[key]
            value = v[row][col]
            if claimed is None or value is None:
                verdict: bool | None = claimed is None and value is None
            else:
                with precision(bits):
                    verdict = within(value, claimed, half)
            if verdict is None and isinstance(claimed, Constant) and g is not None \
                    and key not in tried:  # an exact claim: try the proof at once
                tried.add(key)
                verdict = _proved_equal(g, stage, row, col, claimed.sympy()) or None
            if verdict is not None:
                verdicts[key] = verdict
                pending.discard(key)
                if all_or_none and not verdict:
                    return verdicts
        if not pending:
            return verdicts
    for key in pending:  # on a boundary claimed ± half: only an exact proof can tell
        row, col, claimed, half = targets[key]
        bounds = [claimed.sympy()] if isinstance(claimed, Constant) else [
            sympy.Rational(b.numerator, b.denominator) for b in (claimed - half, claimed + half)]
        if g is None or key in tried or not any(
                _proved_equal(g, stage, row, col, b) for b in bounds):
            raise UndecidedError(f"{where}: cannot decide {stage}[{row},{col}]: the "
                                 f"value is within 2^-{PRECISIONS[-1]} of a rounding "
                                 f"boundary and could not be proved equal to it")
        verdicts[key] = True  # exactly claimed ± half: a correct rounding
    return verdicts


def _proved_equal(g: Derivation, stage: str, row: int, col: int, value: sympy.Expr) -> bool:
    """Is entry (row, col) of ``stage`` proved equal to the exact ``value``?"""
    return g.prove_zero(g.symbols(stage)[row, col] - value)


def reader_rounding(g: Derivation, decimals: int, stages: list[str] | None = None
                    ) -> dict[str, list[list[str]]]:
    """What a reader gets who recomputes every stage from the previous ones as printed.

    Each stage is computed from its inputs rounded to ``decimals`` places (as a
    printed table shows them) and is itself rounded to ``decimals``.  Returns the
    certified strings of the requested stages (all by default), in stage order;
    ``"-inf"`` marks a masked score.
    """
    names = [s.name for s in g]
    wanted = stages if stages is not None else names
    rounded = dict.fromkeys(names, decimals)
    result: dict[str, Values] = {}
    for name in reversed(names):  # one chain covers a stage and everything it reads
        if name in wanted and name not in result:  # (probabilities do not feed next_token)
            result.update(_reader_chain(Chain(g, name, rounded=rounded)))
    return {name: [["-inf" if e is None else _fixed(e, decimals) for e in row]
                   for row in result[name]] for name in wanted}


def _reader_chain(chain: Chain) -> dict[str, Values]:
    for bits in PRECISIONS:
        result = chain.evaluate(bits)
        if result is not None:
            return result
    raise UndecidedError(f"cannot decide a reader rounding within {PRECISIONS[-1]} bits")


def _fixed(e: Entry, decimals: int) -> str:
    return round_fraction(Fraction(int(e.p), int(e.q)), decimals=decimals).fixed()
