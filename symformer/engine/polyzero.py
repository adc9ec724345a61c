"""Fast exact zero proofs: polynomial identities over stage symbols and opaque atoms.

An expression over stage symbols is turned into a sparse polynomial with rational
coefficients whose variables are

* stage symbols (``grad.output[0,1]``), which may be *unfolded* (replaced by the
  polynomial of their local formula), and
* *atoms*: every sub-expression that is not a sum, a product or a non-negative integer
  power (``exp(s)``, ``(var + eps)**(-1/2)``, ``Max(0, h)``), kept opaque and
  identified by its SymPy form.

If the polynomial is identically 0 as a polynomial in those variables, the expression
is 0 whatever the variables' values: a proof, exact, with no number evaluated.  A
polynomial that is not 0 proves nothing (the atoms are not independent).

Two strategies, each within a term budget:

1. *structural*: unfold the latest stage's symbols first (zeros of structural origin:
   a gradient row that sums to 0);
2. *canonical*: every non-gradient stage symbol is replaced by its canonical
   polynomial (:class:`PolyCanonical`: the forward pass computed with polynomials, so
   entries equal by repeated weights or identical tokens get equal polynomials), and
   only gradient stages are unfolded.

Polynomials are dicts ``{monomial: fmpq}``, a monomial a sorted tuple of
``(variable id, exponent)``.  Python dicts and flint rationals: no SymPy arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from flint import fmpq

from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Derivation

Monomial = tuple[tuple[int, int], ...]
Poly = dict[Monomial, fmpq]

#: Proof attempts give up past this many terms.
MAX_TERMS = 600
#: The structural strategy (tried first) gives up past this many terms.
STRUCTURAL_TERMS = 64
#: Unfolding steps per attempt.
MAX_UNFOLD = 40
#: How many stages below an entry its canonical polynomial reads.
CANONICAL_DEPTH = 2
#: A canonical polynomial (or a product on the way) larger than this is replaced by
#: the entry's own variable.
MAX_CANONICAL_TERMS = 64

_ONE: Monomial = ()
@cache
def _undefined() -> tuple[sympy.Expr, ...]:
    """SymPy's infinities and nan: a formula holding one has no value."""
    return (sympy.oo, -sympy.oo, sympy.zoo, sympy.nan)


class Refused(Exception):
    """The expression has a part no polynomial can stand for (an infinity)."""


def _mul_monomials(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    merged = dict(a)
    for v, e in b:
        merged[v] = merged.get(v, 0) + e
    return tuple(sorted(merged.items()))


def add(p: Poly, q: Poly) -> Poly:
    """p + q."""
    out = dict(p)
    for m, c in q.items():
        s = out.get(m, 0) + c
        if s == 0:
            out.pop(m, None)
        else:
            out[m] = s
    return out


def mul(p: Poly, q: Poly, limit: int = MAX_TERMS) -> Poly:
    """p * q; raises :class:`Refused` when the product may exceed ``limit`` terms."""
    if len(p) * len(q) > limit and len(p) > 1 and len(q) > 1:
        raise Refused("too large")
    out: Poly = {}
    for ma, ca in p.items():
        for mb, cb in q.items():
            m = _mul_monomials(ma, mb)
            s = out.get(m, 0) + ca * cb
            if s == 0:
                out.pop(m, None)
            else:
                out[m] = s
    return out


def power(p: Poly, e: int, limit: int = MAX_TERMS) -> Poly:
    """p ** e for an integer e >= 0 (:class:`Refused` past ``limit`` terms)."""
    out: Poly = {_ONE: fmpq(1)}
    for _ in range(e):
        out = mul(out, p, limit)
    return out


def constant(c: sympy.Rational | int) -> Poly:
    """The constant polynomial c."""
    if isinstance(c, int):
        return {_ONE: fmpq(c)} if c else {}
    return {_ONE: fmpq(int(c.p), int(c.q))} if c.p else {}


class Variables:
    """Integer ids of the variables (stage symbols and atoms), shared by all polynomials."""

    def __init__(self) -> None:
        self.ids: dict[sympy.Expr, int] = {}
        self.exprs: list[sympy.Expr] = []

    def var(self, expr: sympy.Expr) -> Poly:
        """The polynomial of one variable."""
        k = self.ids.get(expr)
        if k is None:
            k = self.ids[expr] = len(self.exprs)
            self.exprs.append(expr)
        return {((k, 1),): fmpq(1)}


def to_poly(expr: sympy.Expr, symbol: Callable[[sympy.Symbol], Poly],
            atom: Callable[[sympy.Expr], Poly], limit: int = MAX_TERMS) -> Poly:
    """``expr`` as a polynomial; ``symbol`` and ``atom`` give the polynomials of its
    symbols and of its non-polynomial parts.  Raises :class:`Refused` for infinities
    and past ``limit`` terms."""
    if expr.is_Rational:
        return constant(expr)
    if expr.is_Symbol:
        return symbol(expr)
    if expr.is_Add:
        out: Poly = {}
        for a in expr.args:
            out = add(out, to_poly(a, symbol, atom, limit))
        if len(out) > limit:
            raise Refused("too large")
        return out
    if expr.is_Mul:
        # single-term factors (numbers, most symbols and atoms) are merged into one
        # monomial; the others are multiplied out after
        coefficient, exponents, sums = fmpq(1), {}, []
        for a in expr.args:
            if a.is_Rational:
                coefficient *= fmpq(int(a.p), int(a.q))
                continue
            p = to_poly(a, symbol, atom, limit)
            if len(p) != 1:
                if not p:
                    return p
                sums.append(p)
                continue
            for m, c in p.items():
                coefficient *= c
                for v, e in m:
                    exponents[v] = exponents.get(v, 0) + e
        out = {tuple(sorted(exponents.items())): coefficient}
        for p in sums:
            out = mul(out, p, limit)
        return out
    if expr.is_Pow and expr.exp.is_Integer and expr.exp >= 0:
        return power(to_poly(expr.base, symbol, atom, limit), int(expr.exp), limit)
    if expr in _undefined():
        raise Refused(str(expr))
    return atom(expr)


class PolyProver:
    """Polynomial zero proofs over one derivation (see the module)."""

    def __init__(self, g: Derivation,
                 known_zero: Callable[[sympy.Symbol], bool] = lambda s: False) -> None:
        self.g = g
        self.known_zero = known_zero  # entries already proved 0
        self.relations: set[tuple] = set()  # normal forms of polynomials proved 0
        self.vars = Variables()
        self._local: dict[tuple[str, int, int], Poly] = {}
        self._nonzero: dict[int, bool] = {}  # variable id -> a non-zero atom
        self._zero: set[int] = set()  # variable ids of entries proved 0
        self.canonical = PolyCanonical(g, self.vars)

    # -- the two strategies ----------------------------------------------------------
    def structural(self, expr: sympy.Expr, resolve: Callable[[str, int, int], sympy.Expr],
                   limit: int = STRUCTURAL_TERMS) -> bool:
        """Unfold the latest stage first until the polynomial is 0 (True) or has more
        than ``limit`` terms."""
        order, steps = self._order(), []
        try:
            p = self._row_sums(self._poly(expr))
            for _ in range(MAX_UNFOLD):
                if self._known(p, steps):
                    return True
                stages = self._stages(p)
                if not stages or len(p) > limit:
                    return False
                latest = max(stages, key=order.get)
                p = self._row_sums(self._drop_zeros(self._unfold(p, latest, resolve)))
        except Refused:
            return False
        return False

    def with_canonical(self, expr: sympy.Expr,
                       resolve: Callable[[str, int, int], sympy.Expr],
                       limit: int = STRUCTURAL_TERMS) -> bool:
        """Forward entries replaced by their canonical polynomials; gradients unfolded
        latest first until the polynomial is 0 (True) or has more than ``limit`` terms."""
        order, steps = self._order(), []
        try:
            p = self._canonicalise(self._drop_zeros(self._poly(expr)))
            for _ in range(MAX_UNFOLD):
                if self._known(p, steps):
                    return True
                stages = [s for s in self._stages(p) if self.g[s].op.is_gradient]
                if not stages or len(p) > limit:
                    return False
                latest = max(stages, key=order.get)
                p = self._canonicalise(self._drop_zeros(self._unfold(p, latest, resolve)))
        except Refused:
            return False
        return False

    def reads_forward_entries(self, expr: sympy.Expr) -> bool:
        """Whether ``expr`` is a gradient's formula with forward entries among its
        polynomial variables (not only inside atoms such as 1/sqrt(var + eps)): a zero
        of equal forward entries, which :meth:`with_canonical` finds."""
        try:
            stages = self._stages(self._poly(expr))
        except Refused:
            return False
        return {self.g[s].op.is_gradient for s in stages} == {True, False}

    # -- helpers ---------------------------------------------------------------------
    def _row_sums(self, p: Poly) -> Poly:
        """``p`` with the last entry of each row of a stage whose rows sum to 1 (a
        softmax: ``Operation.rows_sum_to_one``) replaced by 1 minus the row's other
        entries: an exact identity, so that sum_m a_im (g_im - sum_k a_ik g_ik) = 0 (a
        softmax row's score gradient sums to 0; a key bias's gradient is 0) is a
        polynomial identity."""
        owners = self.g._owner
        exprs = self.vars.exprs

        def last_entry(expr: sympy.Expr) -> Poly | None:
            owner = owners.get(expr)
            if owner is None:
                return None
            name, i, j = owner
            stage = self.g[name]
            if not stage.op.rows_sum_to_one or j != stage.shape[1] - 1 or j == 0:
                return None
            symbols = self.g.symbols(name)
            out: Poly = {_ONE: fmpq(1)}
            for k in range(j):
                out = add(out, {m: -c for m, c in self.vars.var(symbols[i, k]).items()})
            return out

        if not any(owners.get(exprs[v]) is not None and self._last_of_row(exprs[v])
                   for m in p for v, _ in m):
            return p
        return self._substitute(p, last_entry)

    def _last_of_row(self, expr: sympy.Expr) -> bool:
        name, _, j = self.g._owner[expr]
        stage = self.g[name]
        return stage.op.rows_sum_to_one and j == stage.shape[1] - 1 and j > 0

    def _order(self) -> dict[str, int]:
        return {name: k for k, name in enumerate(self.g.stages)}

    def _poly(self, expr: sympy.Expr) -> Poly:
        return to_poly(expr, self.vars.var, self._atom)

    def _atom(self, expr: sympy.Expr) -> Poly:
        if expr.has(*_undefined()):
            raise Refused(str(expr))
        return self.vars.var(expr)

    def _known(self, p: Poly, steps: list[tuple]) -> bool:
        """Whether ``p`` is 0 with no further unfolding: it is the zero polynomial, its
        terms all have an entry already proved 0 as a factor, or it is a multiple of a
        polynomial met in an earlier proof (all of a proof's steps are 0).  On success
        the steps of this proof (``steps``, then ``p``) are remembered."""
        dropped = self._drop_zeros(p)
        keys = [self._normal(p)]
        if dropped is not p:
            keys.append(self._normal(dropped))
        steps.extend(k for k in keys if k)
        if dropped and not any(k in self.relations for k in keys):
            return False
        self.relations.update(steps)
        return True

    def _normal(self, p: Poly) -> tuple:
        """``p`` up to a non-zero factor, hashable (() for 0): divided by a rational
        and by the powers of *non-zero* atoms common to all its terms (an exponential,
        a negative power: a reciprocal of a value the derivation has evaluated), so
        that the normal form is 0 exactly when ``p`` is."""
        if not p:
            return ()
        common: dict[int, int] | None = None
        nonzero = self._nonzero_atom
        for m in p:
            exps = {v: e for v, e in m if nonzero(v)}
            common = exps if common is None else {
                v: min(e, exps[v]) for v, e in common.items() if v in exps}
        lead = p[min(p)]
        out = []
        for m, c in p.items():
            rest = tuple((v, e - common.get(v, 0)) for v, e in m if e > common.get(v, 0))
            q = c / lead
            out.append((rest, int(q.p), int(q.q)))
        return tuple(sorted(out))

    def _nonzero_atom(self, v: int) -> bool:
        known = self._nonzero.get(v)
        if known is None:
            expr = self.vars.exprs[v]
            known = self._nonzero[v] = isinstance(expr, sympy.exp) or (
                expr.is_Pow and expr.exp.is_negative is True)
        return known

    def _drop_zeros(self, p: Poly) -> Poly:
        """``p`` without the terms that have an entry already proved 0 as a factor."""
        owners, exprs = self.g._owner, self.vars.exprs
        present = {v for m in p for v, _ in m}
        for v in present - self._zero:
            if exprs[v] in owners and self.known_zero(exprs[v]):
                self._zero.add(v)  # a proved zero stays proved
        zero = present & self._zero
        return {m: c for m, c in p.items() if not any(v in zero for v, _ in m)} \
            if zero else p

    def _stages(self, p: Poly) -> set[str]:
        """The stages whose symbols occur in ``p`` as variables (not inside atoms)."""
        owners = self.g._owner
        found = set()
        for m in p:
            for v, _ in m:
                owner = owners.get(self.vars.exprs[v])
                if owner is not None:
                    found.add(owner[0])
        return found

    def _substitute(self, p: Poly, replacement: Callable[[sympy.Expr], Poly | None]) -> Poly:
        """``p`` with every variable for which ``replacement`` gives a polynomial replaced."""
        cache: dict[int, Poly | None] = {}
        out: Poly = {}
        for m, c in p.items():
            rest: list[tuple[int, int]] = []
            term: Poly = {_ONE: c}
            for v, e in m:
                if v not in cache:
                    cache[v] = replacement(self.vars.exprs[v])
                r = cache[v]
                if r is None:
                    rest.append((v, e))
                else:
                    term = mul(term, power(r, e))
            if rest:
                term = mul(term, {tuple(rest): fmpq(1)})
            out = add(out, term)
            if len(out) > MAX_TERMS:
                raise Refused("too large")
        return out

    def _unfold(self, p: Poly, latest: str,
                resolve: Callable[[str, int, int], sympy.Expr]) -> Poly:
        """``p`` with the symbols of stage ``latest`` replaced by their local formulas."""
        owners = self.g._owner

        def local(expr: sympy.Expr) -> Poly | None:
            owner = owners.get(expr)
            if owner is None or owner[0] != latest:
                return None
            if owner not in self._local:
                self._local[owner] = self._poly(resolve(*owner))
            return self._local[owner]

        return self._substitute(p, local)

    def _canonicalise(self, p: Poly) -> Poly:
        owners = self.g._owner

        def canonical(expr: sympy.Expr) -> Poly | None:
            owner = owners.get(expr)
            if owner is None or self.g[owner[0]].op.is_gradient:
                return None
            return self.canonical.of(expr)

        return self._substitute(p, canonical)


class PolyCanonical:
    """Canonical polynomials of the non-gradient entries, entry by entry, to a depth.

    An entry's canonical polynomial at depth d is its local formula with its inputs'
    canonical polynomials at depth d - 1 substituted; at depth 0 an entry is its own
    variable, unless its local formula is a constant (a rational, or -oo: a masked
    score).  A non-polynomial part (an exponential, a root, a reciprocal) becomes an
    atom named by its SymPy form over the inputs' *representatives* (a constant input
    is substituted as its value, any other input by the first symbol met with the
    same polynomial), so SymPy's automatic simplification still cancels
    ``exp(a)/(exp(a) + exp(a))`` to 1/2 and ``exp(-oo)`` to 0.  An entry whose
    polynomial would be too large, or whose formula meets an infinity, is its own
    variable.  Equal polynomials are equal values; a small depth keeps it cheap (only
    the few stages below the entries asked for are read).
    """

    def __init__(self, g: Derivation, variables: Variables, depth: int = CANONICAL_DEPTH
                 ) -> None:
        self.g = g
        self.vars = variables
        self.depth = depth
        self._value: dict[tuple[sympy.Symbol, int], Poly | None] = {}
        self._rep: dict[tuple, sympy.Symbol] = {}  # frozen polynomial -> representative
        self._rep_poly: dict[sympy.Expr, Poly] = {}  # representative -> its polynomial

    def of(self, symbol: sympy.Symbol, depth: int | None = None) -> Poly | None:
        """The canonical polynomial of the entry ``symbol`` names (None: exactly -oo)."""
        key = (symbol, self.depth if depth is None else depth)
        if key not in self._value:
            self._value[key] = self._compute(*key)
        return self._value[key]

    def _compute(self, symbol: sympy.Symbol, depth: int) -> Poly | None:
        name, i, j = self.g.owner(symbol)
        formula = self.g._local_entry(name, i, j)
        if formula == -sympy.oo:
            return None
        if formula.is_Rational:
            return constant(formula)
        if depth == 0:
            return self.vars.var(symbol)

        def inputs(s: sympy.Symbol) -> Poly:
            p = self.of(s, depth - 1)
            if p is None:
                raise Refused(str(s))
            return p

        try:
            try:  # a polynomial formula: the inputs' polynomials substituted
                return to_poly(formula, inputs, _not_polynomial, MAX_CANONICAL_TERMS)
            except _NotPolynomial:
                key = formula.xreplace({s: self._representative(s, depth - 1)
                                        for s in formula.free_symbols})
                return to_poly(key, self._rep_poly.__getitem__, self._atom,
                               MAX_CANONICAL_TERMS)
        except Refused:
            return self.vars.var(symbol)

    def _representative(self, symbol: sympy.Symbol, depth: int) -> sympy.Expr:
        """-oo, the rational value, or the first symbol met with the same polynomial."""
        p = self.of(symbol, depth)
        if p is None:
            return -sympy.oo
        if not p:
            return sympy.S.Zero
        if len(p) == 1 and _ONE in p:
            c = p[_ONE]
            return sympy.Rational(int(c.p), int(c.q))
        rep = self._rep.setdefault(
            tuple(sorted((m, int(c.p), int(c.q)) for m, c in p.items())), symbol)
        self._rep_poly.setdefault(rep, p)
        return rep

    def _atom(self, expr: sympy.Expr) -> Poly:
        if expr.has(*_undefined()):
            raise Refused(str(expr))
        return self.vars.var(expr)


class _NotPolynomial(Exception):
    pass


def _not_polynomial(expr: sympy.Expr) -> Poly:
    raise _NotPolynomial
