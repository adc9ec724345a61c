"""What is certified from a derivation's balls: correct roundings, signs, exact zeros.

:class:`~symformer.engine.graph.Derivation` is the graph (stages, their symbols and
local formulas, their closed forms, its evaluation in ball arithmetic at a
precision); a :class:`Certification`, ``derivation.certification``, decides from
those balls what a printed digit needs, and proves exactly what a ball cannot
decide:

* **rounding** (:meth:`Certification.rounded`): every entry's correct rounding, the
  whole stage from one evaluation at a precision planned from the graph's depth,
  the entries left open at higher precisions, then one by one with their exact
  proofs (a rational value; a value proved equal to the boundary its ball straddles;
  under a finite mask, the side of a tie the mask's exp(-1e9)-small share picks);
* **signs** (:meth:`Certification.sign`): -1, 0 or 1, 0 only when proved (ReLU's
  branch, :meth:`Certification.resolved_local`);
* **zero proofs** (:meth:`Certification.prove_zero`, :meth:`Certification.
  structural_zero`): an entry, a difference, a denominator proved exactly 0 without
  a float (local formulas unfolded latest stage first, canonical forms, polynomial
  identities, :mod:`symformer.engine.polyzero`); a denominator exactly 0 makes its
  row undefined (:meth:`Certification.check_denominators`, asked by the evaluation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from symformer.engine.arbmath import NEG_INF, ArbMatrix, precision, sympy_to_arb
from symformer.engine.exact import undefined_row
from symformer.engine.perturb import differences, finitely_masked
from symformer.engine.polyzero import PolyProver
from symformer.engine.rounding import (
    MAX_PRECISION,
    Rounded,
    ball_bounds,
    certified_rounding,
    missing_bits,
    moderate,
    round_ball,
    round_fraction,
    round_stage,
    start_precision,
)
from symformer.engine.zero import is_zero
from symformer.errors import InputError, NotSupportedError, UndecidedError
from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Derivation, Stage

#: A ball this precise (bits) that still straddles a rounding boundary is worth a
#: symbolic proof that the value is the boundary.
PROOF_PRECISION = 4096
#: The type of None, for a scan of a row in C.
_NONE = type(None)
#: Bits added to the first working precision of :meth:`Certification.rounded` per stage
#: of the graph's longest path: balls widen along the path (through LayerNorms, a
#: backward pass), about 0.4 to 0.8 bits per stage in the benchmarks' examples, and
#: a few hundred bits more cost little next to a second evaluation of the graph.
BITS_PER_DEPTH = 1
#: The last resort of the zero test of a denominator (a variance, a mean square) whose
#: ball contains 0: :meth:`Certification.prove_zero` within this size and this many
#: unfolded stages (an unbounded attempt expanded a 3-layer RMSNorm's ReLU-clipped
#: row for minutes).
_DENOMINATOR_MAX_OPS = 400
#: A proof expands no form larger than this many nodes per operation of its ``max_ops``.
_PROOF_NODES = 2
#: The steps of a proof that decides a rounding or a sign (a tie, a zero): proofs that
#: succeed take a few (1 to 5 on the shipped examples and the tests); failing ones on
#: an exp(-1e5)-small gradient took 1-3 s each with 200, for every entry.
_DECIDING_UNFOLD = 24
_DECIDING_OPS = 800
_DECIDING_BUDGET = 10 * _DECIDING_UNFOLD
_DENOMINATOR_UNFOLD = 12


class Certification:
    """The certified digits, signs and exact zeros of one derivation (``g``), and the
    caches that make them cheap to ask for again."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self._signs: dict[tuple[str, int, int], int] = {}
        self._exact_roundings: dict[tuple, Rounded | None] = {}
        self._zeros: set[sympy.Expr] = set()  # expressions proved to be 0
        self._exact_twin: Derivation | None = None
        self._poly_prover: PolyProver | None = None
        #: Entries (stage, row, column) tried by :meth:`cheap_zero`, and the outcome.
        self.cheap_zeros: dict[tuple[str, int, int], bool] = {}
        self._won_attempt: dict[str | None, int] = {}  # stage -> proof attempt that worked
        self._raised: dict[int, int] = {}  # first precision -> the precision it needed
        self._proof_steps: int | None = None  # what the proof under way has left
        self.last_proof_steps = 0  # the steps the last proof took
        self._failed_steps = 0  # the steps of the rounding and sign proofs that failed

    def check_denominators(self, stage: Stage, values: dict[str, ArbMatrix]) -> None:
        """A row that divides by an entry exactly 0 (LayerNorm, eps = 0, a constant row)
        is undefined: the operation's error.

        Only denominators whose ball contains 0 are examined, exactly: a ball that *is*
        0 (radius 0: a ReLU that clips every unit, a product with an exact 0) is a
        certified 0; then the exact forward pass, then a bounded proof that the
        denominator is 0 (a polynomial identity within a term budget, then
        :meth:`prove_zero` on small forms only: its expansions have no time limit).
        """
        if not all(b is NEG_INF or b is None or b.is_finite()
                   for row in values[stage.name] for b in row):
            self._check_domain(stage, values)
        for row in range(stage.shape[0]):
            for k, i, j in stage.op.denominators(row):
                name = stage.inputs[k]
                ball = values[name][i][j]
                if ball > 0 or ball < 0:
                    continue
                if ball == 0:  # an arb of radius 0 at 0: the value is exactly 0
                    raise undefined_row(stage, row)
                self.g.canonical.upto(stage.name)  # raises for a denominator exactly 0
                if self._denominator_zero(name, i, j, values):
                    raise undefined_row(stage, row)

    def _check_domain(self, stage: Stage, values: dict[str, ArbMatrix]) -> None:
        """A stage whose value is not finite because an objective (or its derivative, in
        a gradient's terms) left its domain at a step's parameters: the one-line error
        ``division by zero at step N`` (log of 0, the root of a negative number), decided
        by balls or the parameters' exact rational values; nothing when not shown (the
        rounding then raises the precision as for any wide ball)."""
        found, k = [(stage.op, stage.inputs, False)], 0
        for term in getattr(stage.op, "terms", ()):  # a gradient: each term's own inputs
            found.append((term.op, stage.inputs[k:k + term.arity], True))
            k += term.arity + 2
        for op, inputs, gradient in found:
            explain = getattr(op, "outside_domain", None)
            if explain is None or len(inputs) != 1:
                continue
            name = inputs[0]
            balls = values[name]
            exact = [self.g.exact_rational(name, 0, j) for j in range(len(balls[0]))]
            why = explain([balls], exact, gradient)
            if why is not None:
                step = re.search(r"(?:^|\.)step(\d+)\.", stage.name)
                when = f"at step {step.group(1)}" if step else "at its parameters"
                raise InputError(f"{self.g.example.source}, objective: {why} {when} "
                                 f"({stage.name})")

    def _denominator_zero(self, name: str, i: int, j: int,
                          values: dict[str, ArbMatrix]) -> bool:
        """Whether the denominator entry (a variance, a mean square) is proved exactly 0,
        by bounded means only (it is asked while the graph is being evaluated, so ReLU
        stays max(0, h) and nothing is evaluated).  Entries whose ball at this precision
        *is* 0 are 0."""
        local = self.g._local_entry(name, i, j)
        zeros = {}
        for s in local.free_symbols:
            owner, a, b = self.g.owner(s)
            ball = values[owner][a][b]
            if ball is not NEG_INF and ball == 0:
                zeros[s] = sympy.S.Zero
        expr = local.xreplace(zeros) if zeros else local
        if expr == 0:
            return True
        if self._poly_prover is None:
            self._poly_prover = PolyProver(
                self.g, lambda s: self.cheap_zeros.get(self.g.owner(s)) is True)
        if self._poly_prover.structural(expr, self.g._local_entry):
            return True
        return self.prove_zero(expr, max_ops=_DENOMINATOR_MAX_OPS,
                               max_unfold=_DENOMINATOR_UNFOLD, decide_relu=False)

    def rounded(self, name: str, *, decimals: int | None = None,
                significant: int | None = None, rows: Sequence[int] | None = None,
                cols: Sequence[int] | None = None) -> list[list[Rounded | None]]:
        """Certified correct roundings of a stage (``None`` for a masked score).

        An entry that no precision up to :data:`MAX_PRECISION` and no exact proof
        decides is an :class:`~symformer.engine.rounding.Undecided` (printed
        ``low..high?``), with an :class:`~symformer.errors.UndecidedWarning` naming it.
        ``rows`` and ``cols`` (indices into the stage) round only that block: a slice
        of a large stage costs its own entries, and only the stages it reads are
        evaluated (while every entry is decided at the first precision).
        """
        if (decimals is None) == (significant is None):
            raise ValueError("give exactly one of decimals and significant")
        n, m = self.g[name].shape  # an unknown name is an InputError
        block = rows is not None or cols is not None
        at_row = list(range(n)) if rows is None else list(rows)  # block row -> stage row
        at_col = list(range(m)) if cols is None else list(cols)
        if block and (any(not 0 <= i < n for i in at_row)
                      or any(not 0 <= j < m for j in at_col)):  # a whole stage: in range
            raise ValueError(f"a row or column outside stage {name} ({n}x{m})")
        # Most entries are decided by the first precision: round the whole stage (the
        # block) from one evaluation, and give only the others the per-entry,
        # escalating path.  Indices a, b are the block's; i, j the stage's.
        base = start_precision(decimals, significant)
        prec = start = self.working_precision(base)
        # a block evaluates only the stages it reads (a slice of a big model); a whole
        # stage, every stage (a row undefined anywhere is reported first, in order)
        upto = name if block else None
        first = self.g.evaluate(prec, upto)[name]
        if block:
            first = [[first[i][j] for j in at_col] for i in at_row]
        quick = round_stage(first, decimals=decimals, significant=significant)
        # The entries left open (a masked score stays None): usually none at all.
        # (``NoneType in map(type, row)``: a scan in C, where ``None in row`` would call
        # Rounded's dataclass __eq__ on every entry)
        open_ = [(a, b) for a, row in enumerate(quick) if _NONE in map(type, row)
                 for b, r in enumerate(row) if r is None and first[a][b] is not NEG_INF]
        if not open_:
            return quick
        # Every stage, as before any decision: a row undefined anywhere (a kink, a zero
        # denominator) is reported as such, in stage order, rather than as this stage's
        # wide balls (a block evaluated only the stages it reads so far)
        self.g.evaluate(prec)
        # A ball around 0 is most likely an exact zero (a gradient whose terms cancel):
        # the cheap exact proof first, before any higher precision.
        zero = round_fraction(Fraction(0), decimals=decimals, significant=significant)
        for a, b in open_:
            ball = first[a][b]
            if ball.contains(0):
                quick[a][b] = round_ball(ball, decimals=decimals, significant=significant) \
                    or (zero if self.cheap_zero(name, at_row[a], at_col[b]) else None)
        # Entries whose balls were too wide (deep stages lose bits): the whole stage
        # again at twice and four times the precision, the precisions the per-entry
        # path would reach next anyway.  A narrow ball on a boundary (an exact tie or
        # zero) goes straight to the per-entry path and its proofs.
        pending = [(a, b) for a, b in open_ if quick[a][b] is None
                   and (missing_bits(first[a][b], decimals=decimals,
                                     significant=significant) or 0) > 0]
        for _ in range(2):
            if not pending:
                break
            prec *= 2
            higher = self.g.evaluate(prec, upto)[name]
            again = round_stage([[higher[at_row[a]][at_col[b]] for a, b in pending]],
                                decimals=decimals, significant=significant)[0]
            for (a, b), r in zip(pending, again):
                quick[a][b] = r
            pending = [where for where, r in zip(pending, again) if r is None]
            # later stages start here: no rounding at a precision known too low
            self._raised[base] = max(self._raised.get(base, 0), prec)

        for a, b in open_:
            if quick[a][b] is not None:
                continue
            i, j = at_row[a], at_col[b]
            ball = first[a][b]
            rounded = round_ball(ball, decimals=decimals, significant=significant)
            if rounded is None:
                rounded = certified_rounding(
                    lambda prec, i=i, j=j: self.g.evaluate(prec, upto)[name][i][j],
                    f"{name}[{i},{j}]", decimals=decimals, significant=significant,
                    exact=lambda ball, prec, i=i, j=j: self._round_exact(
                        name, i, j, ball, decimals, significant, prec),
                    start=start)
            quick[a][b] = rounded
        return quick

    def working_precision(self, base: int, depth: int | None = None) -> int:
        """The first precision :meth:`rounded` evaluates at, for a start of ``base`` bits.

        ``base`` plus :data:`BITS_PER_DEPTH` per stage of the graph's longest path,
        rounded up to a power of two, so that deep stages (many layers, a backward
        pass) are decided by the one evaluation of the whole graph rather than a second
        one at twice the precision; at least what an earlier stage needed.  An
        evaluation already made at up to twice that precision is reused (the power of
        two makes the forward pass's and the backward pass's forecasts meet: the
        backward pass's ReLU signs are decided at this precision, and the printing
        then evaluates only the gradient stages).  Only a matter of speed: a ball still
        too wide is evaluated again higher.  ``depth``: the longest path to plan for
        (default: the graph's own).
        """
        depth = self.g.longest_path if depth is None else depth
        wanted = 1 << (base + BITS_PER_DEPTH * depth - 1).bit_length()
        wanted = max(wanted, self._raised.get(base, 0))
        done = [p for p in self.g.precisions if wanted <= p <= 2 * wanted]
        return min(done) if done else wanted

    def backward_precision(self) -> int:
        """The precision printing this graph to 30 digits will evaluate at once a
        backward pass (about as deep again) is appended: for the decisions made before
        the gradient stages exist (ReLU signs), so that printing reuses their evaluation
        (:meth:`working_precision` reuses one up to twice what it wants)."""
        return self.working_precision(start_precision(None, 30), 2 * self.g.longest_path)

    def _round_exact(self, name: str, i: int, j: int, ball, decimals: int | None,
                     significant: int | None, prec: int = PROOF_PRECISION
                     ) -> Rounded | None:
        """The rounding of an entry proved equal to a boundary its ball straddles, or None.

        A narrow ball straddles a rounding boundary only when the value probably *is*
        the boundary (an exact zero, or an exact tie such as 0.15 at one decimal).  A
        rational entry is rounded exactly; otherwise the entry minus each boundary is
        proved zero, but only from ``prec >= PROOF_PRECISION`` bits on (a symbolic proof
        costs more than raising the precision, which decides every near-tie).
        """
        key = (name, i, j, decimals, significant)
        cheap = key + ("cheap",)
        if cheap not in self._exact_roundings:
            self._exact_roundings[cheap] = None
            if ball.contains(0) and self.cheap_zero(name, i, j):
                self._exact_roundings[cheap] = round_fraction(
                    Fraction(0), decimals=decimals, significant=significant)
                return self._exact_roundings[cheap]
            value = self.g.exact_rational(name, i, j)
            if value is not None:
                self._exact_roundings[cheap] = round_fraction(
                    value, decimals=decimals, significant=significant)
        if self._exact_roundings[cheap] is not None or prec < PROOF_PRECISION:
            return self._exact_roundings[cheap]
        if key not in self._exact_roundings:
            self._exact_roundings[key] = self._round_perturbed(
                name, i, j, ball, decimals, significant) \
                if finitely_masked(self.g.stages.values()) else None
            for boundary in _boundaries(ball, decimals, significant):
                if self._exact_roundings[key] is not None:
                    break
                if boundary == 0 and significant is not None and self._masked_to_zero(
                        name, i, j):
                    continue  # exp(-1e9)-small, not a zero: no symbolic proof (minutes)
                if self._deciding_proof(self.resolved_local(name, i, j) - _rational(boundary)):
                    self._exact_roundings[key] = round_fraction(
                        boundary, decimals=decimals, significant=significant)
                    break
        return self._exact_roundings[key]

    def _round_perturbed(self, name: str, i: int, j: int, ball, decimals: int | None,
                         significant: int | None) -> Rounded | None:
        """The rounding of an entry of a finitely masked derivation near a tie, or None.

        The entry is x0 + d: x0 its value under the exact (-inf) mask, proved equal to
        the boundary, and d what the finite mask adds (exp(-1e9)-small), enclosed
        without cancellation (:mod:`symformer.engine.perturb`); d's certified sign
        picks the side of the boundary.
        """
        if not moderate(ball):
            return None  # an exp(-1e9)-small value: nothing to decide near a tie
        twin = self._twin()
        lo, hi = ball_bounds(ball)
        sides = [round_fraction(x, decimals=decimals, significant=significant)
                 for x in (lo, hi)]
        for boundary in _boundaries(ball, decimals, significant):
            if boundary == 0 and significant is not None:
                # the digits of an exp(-1e9)-small value, not a tie: when x0 is proved
                # 0 the value is d, whose ball has its full relative precision
                if self._masked_to_zero(name, i, j):
                    return self._perturbation_digits(twin, name, i, j, significant)
                continue
            if twin.exact_rational(name, i, j) != boundary and not twin.prove_zero(
                    twin.certification.resolved_local(name, i, j) - _rational(boundary)):
                continue
            for share in self._mask_shares(twin, name):
                if share is None:
                    return None
                d = share[i][j]
                if d == 0:
                    return round_fraction(boundary, decimals=decimals, significant=significant)
                if d > 0 or d < 0:
                    return sides[1] if d > 0 else sides[0]
        return None

    def _mask_shares(self, twin: Derivation, name: str):
        """What the finite mask adds to stage ``name`` (:mod:`symformer.engine.perturb`),
        enclosed at 256 bits, then at 4 times more each time up to the ceiling; a final
        None where it cannot be enclosed."""
        prec = 256
        while prec <= MAX_PRECISION:
            base = twin.evaluate(prec)
            with precision(prec):
                stages = list(self.g)[:list(self.g.stages).index(name) + 1]
                delta = differences(stages, base)
            if delta is None:
                yield None
                return
            yield delta[name]
            prec *= 4

    def _masked_to_zero(self, name: str, i: int, j: int) -> bool:
        """Whether the entry of a finitely masked derivation is 0 under the exact mask
        (proved cheaply): its value is then what the finite mask adds alone."""
        if not finitely_masked(self.g.stages.values()):
            return False
        twin = self._twin()
        return twin.certification.cheap_zero(name, i, j) or twin.exact_rational(name, i, j) == 0

    def _perturbation_digits(self, twin: Derivation, name: str, i: int, j: int,
                             significant: int) -> Rounded | None:
        """``significant`` digits of an entry whose exactly masked value is proved 0: the
        entry is then what the finite mask adds, d, enclosed without cancellation, so
        its digits cost a precision of the digits wanted, not of its magnitude
        (exp(-1e9) would need a billion bits).  None if d stays undecided."""
        for share in self._mask_shares(twin, name):
            if share is None:
                return None
            d = share[i][j]
            if d == 0:
                return round_fraction(Fraction(0), significant=significant)
            rounded = round_ball(d, significant=significant)
            if rounded is not None:
                return rounded
        return None

    def _twin(self) -> Derivation:
        """This derivation with every finitely masked score masked exactly (-inf)."""
        if self._exact_twin is None:
            twin = type(self.g)(self.g.example, self.g.causal)
            for s in self.g:
                twin.add(s.name, s.kind, s.op.exactly_masked(), s.inputs, s.rows, s.cols,
                         layer=s.layer, head=s.head, side=s.side)
            self._exact_twin = twin
        return self._exact_twin

    def sign(self, name: str, i: int, j: int) -> int:
        """The certified sign (-1, 0 or 1) of one entry; 0 only when proved exactly zero."""
        key = (name, i, j)
        if key not in self._signs:
            self._signs[key] = self._decide_sign(name, i, j)
        return self._signs[key]

    def _decide_sign(self, name: str, i: int, j: int) -> int:
        # start from the most precise evaluation so far (no new pass at 128 bits)
        prec, tried = max(self.g.precisions, default=128), False
        while True:
            ball = self.g.evaluate(prec)[name][i][j]
            if ball is NEG_INF or ball < 0:
                return -1
            if ball > 0:
                return 1
            if ball == 0:
                return 0
            if not tried and prec >= 256:
                tried = True
                value = self.g.exact_rational(name, i, j)
                if value is not None:
                    return (value > 0) - (value < 0)
                if self._deciding_proof(self.resolved_local(name, i, j)):
                    return 0
            if prec >= MAX_PRECISION:
                raise UndecidedError(
                    f"cannot decide the sign of {name}[{i},{j}]: at the precision ceiling of "
                    f"{MAX_PRECISION} bits its ball {ball.str(5, radius=True)} contains 0, "
                    f"and it could not be proved exactly 0")
            prec *= 2

    def _deciding_proof(self, expr: sympy.Expr) -> bool:
        """:meth:`prove_zero` for a rounding or a sign (a tie, a zero): at most
        :data:`_DECIDING_OPS` operations and :data:`_DECIDING_UNFOLD` steps, and no more
        once the derivation's failed ones have spent :data:`_DECIDING_BUDGET` steps (the
        entries left then print as certified ranges: an exp(-1e5)-small gradient has
        hundreds of entries no proof settles)."""
        if self._proof_steps is not None:  # inside another proof: its budget
            return self.prove_zero(expr, _DECIDING_OPS, _DECIDING_UNFOLD)
        if self._failed_steps >= _DECIDING_BUDGET:
            return False
        proved = self.prove_zero(expr, _DECIDING_OPS, _DECIDING_UNFOLD)
        if not proved:
            self._failed_steps += self.last_proof_steps
        return proved

    def prove_zero(self, expr: sympy.Expr, max_ops: int = 3000, max_unfold: int = 200,
                   decide_relu: bool = True) -> bool:
        """Prove ``expr`` (over stage symbols and numbers) exactly 0; False if no proof.

        Unfolds local formulas latest stage first, cancelling after each step: a
        difference of entries that agree for structural reasons (a LayerNorm row
        summing to its betas, a W_O whose columns cancel) vanishes after a few
        steps, long before the full closed form is built.  Entries are first replaced by
        their exact canonical forms (:mod:`symformer.engine.exact`: rational values,
        one symbol for provably equal entries).  Only the numerator is kept, once every
        factor of the denominator is shown non-zero: structurally (a sum of
        exponentials, a variance plus eps > 0) or by a certified ball that excludes 0
        (a LayerNorm root with eps = 0).  Never numeric otherwise.  With
        ``decide_relu=False`` ReLU stays max(0, h) instead of being resolved by a
        certified sign, so nothing is evaluated (for proofs made while the graph itself
        is being evaluated).
        """
        if self._proof_steps is not None:  # inside a proof: its budget is shared
            return self._prove_zero(expr, max_ops, decide_relu)
        self._proof_steps = max_unfold
        try:
            return self._prove_zero(expr, max_ops, decide_relu)
        finally:
            self.last_proof_steps = max_unfold - self._proof_steps
            self._proof_steps = None

    def _prove_zero(self, expr: sympy.Expr, max_ops: int, decide_relu: bool) -> bool:
        """:meth:`prove_zero`'s loop: each step (over every factor, square and sign a
        proof recurses into) takes one of the ``max_unfold`` steps of the outermost
        call, and no form of more than :data:`_PROOF_NODES` times ``max_ops`` nodes is
        expanded (SymPy's expansions of such forms took minutes)."""
        order = {name: k for k, name in enumerate(self.g.stages)}
        steps: list[sympy.Expr] = []  # each is 0 iff expr is: all proved by one proof
        proved = False
        while self._proof_steps > 0:
            self._proof_steps -= 1
            expr = self.g.canonical.substitute(expr)  # rational values, shared symbols
            if _larger_than(expr, _PROOF_NODES * max_ops):
                break
            if _has_symbolic_denominator(expr):
                numerator, denominator = sympy.together(expr).as_numer_denom()
                if not self._nonzero(denominator):
                    break  # a denominator not shown non-zero: no proof
                expr = numerator
            squares = _sum_of_squares(expr)
            if squares:  # stage values are real: a sum of squares is 0 iff each base is
                proved = all(self._prove_zero(b, max_ops, decide_relu) for b in squares)
                break
            expr = sympy.expand(expr, power_exp=False, power_base=False, log=False)
            if expr != 0 and _larger_than(expr, _PROOF_NODES * max_ops):
                break
            if expr == 0 or _normal(expr) in self._zeros:
                proved = True
                break
            if decide_relu and self._every_term_has_a_zero_factor(expr, max_ops):
                proved = True  # e.g. sum_j w_j V[j, 0] with the whole column V[:, 0] zero
                break
            steps.append(expr)
            if expr.has(sympy.exp, sympy.Pow):
                expr = sympy.factor_terms(expr)
            if expr.is_Mul or expr.is_Pow:  # a product is 0 iff one of its factors is
                factors = _possibly_zero_factors(expr)
                if len(factors) != 1:
                    proved = any(self._prove_zero(f, max_ops, decide_relu)
                                 for f in factors)
                    break
                expr = factors[0]
            if not expr.free_symbols:
                proved = sympy.count_ops(expr) <= max_ops and is_zero(expr)
                break
            if sympy.count_ops(expr) > max_ops:
                break
            expr = self._unfold_latest(expr, order, decide_relu)
        if proved:
            # Remember the intermediate relations: a deeper entry's proof (the same
            # symmetry one block later) stops as soon as it reaches one of them.
            for e in steps:
                if e.free_symbols:
                    self._zeros.add(_normal(e))
        return proved

    def structural_zero(self, expr: sympy.Expr, stage: str | None = None) -> bool:
        """Prove ``expr`` exactly 0 by a polynomial identity; False if no quick proof.

        The cheap first attempt for a ball around 0 (:mod:`symformer.engine.polyzero`):
        zeros of equal entries (g . v with v's entries equal and g's opposite; the
        gradient at a causal first row's only score) vanish once the forward entries
        are replaced by their canonical polynomials and the gradients unfolded; zeros
        of structural origin (a gradient row whose sum cancels, the LayerNorm input
        gradient's rows) after a few unfolding steps, latest stage first.  Entries
        already proved 0 are 0.  Sparse polynomials with rational coefficients whose
        variables are stage symbols and opaque non-polynomial parts: no float, no exact
        forward pass of the gradients, and a term budget.  Sound: every
        denominator of a local formula is a stage value the derivation has evaluated
        (hence non-zero), and ReLU branches are decided by certified signs.

        ``stage``: the stage whose entry ``expr`` is; the attempt that proved one of
        its entries is tried first for the next (the rows of a stage are zero for the
        same reason, so the attempts that fail for one fail for the others).  For the
        first, a gradient entry that multiplies forward entries (head 2's weight
        gradient g . v_0) tries the canonical polynomials first.
        """
        if self._poly_prover is None:
            self._poly_prover = PolyProver(
                self.g, lambda s: self.cheap_zeros.get(self.g.owner(s)) is True)
        prover = self._poly_prover
        attempts = (lambda: prover.structural(expr, self.resolved_local, limit=16),
                    lambda: prover.with_canonical(expr, self.resolved_local),
                    lambda: prover.structural(expr, self.resolved_local))
        won = self._won_attempt.get(stage)
        if won is None and stage is not None and prover.reads_forward_entries(expr):
            won = 1  # a gradient times forward entries (g . v): equal entries, canonical
        order = range(len(attempts)) if won is None else \
            [won, *(k for k in range(len(attempts)) if k != won)]
        for k in order:
            if attempts[k]():
                if stage is not None:
                    self._won_attempt[stage] = k
                return True
        return False

    def cheap_zero(self, name: str, i: int, j: int) -> bool:
        """Whether :meth:`structural_zero` proves the entry 0 (tried once per entry)."""
        key = (name, i, j)
        if key not in self.cheap_zeros:
            self.cheap_zeros[key] = self.structural_zero(self.resolved_local(name, i, j),
                                                          name)
        return self.cheap_zeros[key]

    def _unfold_latest(self, expr: sympy.Expr, order: dict[str, int],
                       decide_relu: bool) -> sympy.Expr:
        """``expr`` with the entries of its latest stage replaced by their local formulas."""
        latest = max({self.g.owner(s)[0] for s in expr.free_symbols}, key=order.get)
        unfold = self.resolved_local if decide_relu else self.g._local_entry
        return expr.xreplace({s: unfold(*self.g.owner(s))
                              for s in expr.free_symbols if self.g.owner(s)[0] == latest})

    def _nonzero(self, denominator: sympy.Expr) -> bool:
        """Whether every factor of ``denominator`` is shown non-zero (False: no proof)."""
        for factor in sympy.Mul.make_args(denominator):
            base = factor.base if factor.is_Pow and factor.exp.is_positive else factor
            if base.is_Rational:
                if base == 0:
                    return False
                continue
            if self._sign_hint(base) == 1:
                continue
            if not self._ball_excludes_zero(base):
                return False
        return True

    def _sign_hint(self, expr: sympy.Expr) -> int | None:
        """1 if ``expr`` is structurally positive, 0 if non-negative, None if unknown."""
        if expr.is_Rational:
            return 1 if expr > 0 else 0 if expr == 0 else None
        if isinstance(expr, sympy.exp) or expr in (sympy.E, sympy.pi):
            return 1
        if expr.is_Symbol:
            op = self.g[self.g.owner(expr)[0]].op if self.g.owns(expr) else None
            return 0 if op is not None and op.nonnegative else None
        if expr.is_Pow and expr.exp.is_Integer and expr.exp.is_even:
            return 0 if self._sign_hint(expr.base) != 1 else 1
        if expr.is_Add or expr.is_Mul or expr.is_Pow:
            hints = [self._sign_hint(a) for a in (expr.args if not expr.is_Pow
                                                  else (expr.base,))]
            if None in hints or expr.is_Pow and not expr.exp.is_positive:
                return None
            return (1 if any(h == 1 for h in hints) else 0) if expr.is_Add else min(hints)
        return None

    def _ball_excludes_zero(self, expr: sympy.Expr) -> bool:
        """Whether ``expr`` certainly is not 0, by its ball at the highest precision so far."""
        if not self.g.precisions:
            return False
        prec = max(self.g.precisions)
        balls = self.g.evaluated(prec)
        env = {}
        for s in expr.free_symbols:
            name, i, j = self.g.owner(s)
            if name not in balls:  # not evaluated at this precision yet
                return False
            ball = balls[name][i][j]
            if ball is NEG_INF:
                return False
            env[s] = ball
        try:
            with precision(prec):
                ball = sympy_to_arb(expr, env)
        except NotSupportedError:
            return False
        return ball.is_finite() and not ball.contains(0)

    def _every_term_has_a_zero_factor(self, expr: sympy.Expr, max_ops: int) -> bool:
        """Prove a sum zero term by term, when every term has a factor that looks zero.

        "Looks zero": an entry whose ball (at the highest precision evaluated so far)
        contains 0.  Only a hint of which factors to try; the proof is exact.
        """
        if not expr.is_Add or not self.g.precisions:
            return False
        balls = self.g.evaluated(max(self.g.precisions))
        candidates = []
        for term in expr.args:
            looks_zero = [f for f in sympy.Mul.make_args(term)
                          if self.g.owns(f) and _contains_zero(balls, self.g.owner(f))]
            if not looks_zero:
                return False
            candidates.append(looks_zero[0])
        return all(self.prove_zero(f, max_ops) for f in dict.fromkeys(candidates))

    def resolved_local(self, name: str, i: int, j: int) -> sympy.Expr:
        """An entry's local formula with ReLU's max(0, h) resolved by the certified sign."""
        stage = self.g[name]
        return stage.op.resolve(self.g._local_entry(name, i, j),
                                lambda: self.sign(stage.inputs[0], i, j))


def _boundaries(ball, decimals: int | None, significant: int | None) -> list[Fraction]:
    """The rounding boundaries (0 and ties) that a ball may straddle."""
    if not moderate(ball):
        return [Fraction(0)] if ball.contains(0) else []
    lo, hi = ball_bounds(ball)
    found = [Fraction(0)] if lo <= 0 <= hi else []
    low = round_fraction(lo, decimals=decimals, significant=significant)
    high = round_fraction(hi, decimals=decimals, significant=significant)
    if low != high:
        found.append((low.value() + high.value()) / 2)
    return found


def _larger_than(expr: sympy.Expr, nodes: int) -> bool:
    """Whether ``expr`` has more than ``nodes`` nodes (counted no further than that)."""
    for count, _ in enumerate(sympy.preorder_traversal(expr)):
        if count >= nodes:
            return True
    return False


def _normal(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` up to a non-zero rational factor and sign (for the proved-zero cache)."""
    primitive = expr.primitive()[1] if expr.is_Add else expr.as_coeff_Mul()[1]
    return min(primitive, -primitive, key=sympy.default_sort_key)


def _sum_of_squares(expr: sympy.Expr) -> list[sympy.Expr]:
    """The bases b_k if ``expr`` is sum(c_k * b_k**(2 n_k)) with every c_k > 0, else []."""
    if not expr.is_Add:
        return []
    bases = []
    for term in expr.args:
        c, rest = term.as_coeff_Mul()
        if not (c.is_positive and rest.is_Pow and rest.exp.is_Integer and rest.exp.is_even
                and rest.exp > 0):
            return []
        bases.append(rest.base)
    return bases


def _contains_zero(balls: dict[str, ArbMatrix], where: tuple[str, int, int]) -> bool:
    name, i, j = where
    if name not in balls:  # not evaluated at this precision yet: no hint
        return False
    ball = balls[name][i][j]
    return ball is not NEG_INF and ball.contains(0)


def _has_symbolic_denominator(expr: sympy.Expr) -> bool:
    return any(p.exp.is_negative and p.base.free_symbols for p in expr.atoms(sympy.Pow))


def _possibly_zero_factors(expr: sympy.Expr) -> list[sympy.Expr]:
    """The factors of a product that may be 0 (exp(...) and non-zero numbers never are;
    a negative power is a denominator; b**k is 0 iff b is)."""
    found = []
    for f in sympy.Mul.make_args(expr):
        if (f.is_number and f.is_zero is False) or isinstance(f, sympy.exp):
            continue
        if f.is_Pow:
            if f.exp.is_negative:
                continue
            f = f.base
        found.append(f)
    return found


def _rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)
