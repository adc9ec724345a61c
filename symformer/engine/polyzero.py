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
from typing import TYPE_CHECKING

import sympy
from flint import fmpq

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
#: A canonical polynomial (or a product on the way) larger than this is replaced by
#: the entry's own variable.
MAX_CANONICAL_TERMS = 64
#: Stage kinds that are unfolded, not canonicalised, by the canonical strategy.
GRADIENT_KINDS = frozenset({"gradient", "weight_gradient", "gradient_seed"})

_ONE: Monomial = ()
_UNDEFINED = (sympy.oo, -sympy.oo, sympy.zoo, sympy.nan)


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
    c = sympy.Rational(c)
    return {_ONE: fmpq(int(c.p), int(c.q))} if c != 0 else {}


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
        out = {_ONE: fmpq(1)}
        for a in expr.args:
            out = mul(out, to_poly(a, symbol, atom, limit), limit)
            if not out:
                return out
        return out
    if expr.is_Pow and expr.exp.is_Integer and expr.exp >= 0:
        return power(to_poly(expr.base, symbol, atom, limit), int(expr.exp), limit)
    if expr in _UNDEFINED:
        raise Refused(str(expr))
    return atom(expr)


class PolyProver:
    """Polynomial zero proofs over one derivation (see the module)."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self.vars = Variables()
        self._local: dict[tuple[str, int, int], Poly] = {}
        self.canonical = PolyCanonical(g, self.vars)

    # -- the two strategies ----------------------------------------------------------
    def structural(self, expr: sympy.Expr, resolve: Callable[[str, int, int], sympy.Expr],
                   limit: int = STRUCTURAL_TERMS) -> bool:
        """Unfold the latest stage first until the polynomial is 0 (True) or has more
        than ``limit`` terms."""
        try:
            p = self._poly(expr)
            for _ in range(MAX_UNFOLD):
                if not p:
                    return True
                stages = self._stages(p)
                if not stages or len(p) > limit:
                    return False
                latest = max(stages, key=self._order().get)
                p = self._unfold(p, latest, resolve)
        except Refused:
            return False
        return not p

    def with_canonical(self, expr: sympy.Expr,
                       resolve: Callable[[str, int, int], sympy.Expr]) -> bool:
        """Forward entries replaced by their canonical polynomials; gradients unfolded
        latest first until the polynomial is 0 (True) or too large."""
        order = self._order()
        try:
            p = self._canonicalise(self._poly(expr))
            for _ in range(MAX_UNFOLD):
                if not p:
                    return True
                stages = [s for s in self._stages(p) if self.g[s].kind in GRADIENT_KINDS]
                if not stages or len(p) > MAX_TERMS:
                    return False
                latest = max(stages, key=order.get)
                p = self._canonicalise(self._unfold(p, latest, resolve))
        except Refused:
            return False
        return not p

    # -- helpers ---------------------------------------------------------------------
    def _order(self) -> dict[str, int]:
        return {name: k for k, name in enumerate(self.g.stages)}

    def _poly(self, expr: sympy.Expr) -> Poly:
        return to_poly(expr, self.vars.var, self._atom)

    def _atom(self, expr: sympy.Expr) -> Poly:
        if expr.has(*_UNDEFINED):
            raise Refused(str(expr))
        return self.vars.var(expr)

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
            if owner is None or self.g[owner[0]].kind in GRADIENT_KINDS:
                return None
            return self.canonical.of(expr)

        return self._substitute(p, canonical)


class PolyCanonical:
    """Canonical polynomials of the non-gradient entries, stage by stage on demand.

    An entry's canonical polynomial is its local formula with the inputs' canonical
    polynomials substituted; a non-polynomial part (an exponential, a root, a
    reciprocal) becomes an atom named by its SymPy form over the inputs'
    *representatives* (a rational input is substituted as its value, any other input
    by the symbol of the first entry with the same canonical polynomial), so SymPy's
    automatic simplification still cancels ``exp(a)/(exp(a) + exp(a))`` to 1/2.  An
    entry whose polynomial would be too large, or whose formula meets an infinity
    (a masked score), is its own variable.  Equal polynomials are equal values.
    """

    def __init__(self, g: Derivation, variables: Variables) -> None:
        self.g = g
        self.vars = variables
        self.value: dict[sympy.Symbol, Poly] = {}
        self.masked: set[sympy.Symbol] = set()  # entries exactly -oo (masked scores)
        self._rep: dict[tuple, sympy.Expr] = {}  # frozen polynomial -> representative
        self._rep_of: dict[sympy.Symbol, sympy.Expr] = {}
        self._done: set[str] = set()

    def of(self, symbol: sympy.Symbol) -> Poly | None:
        """The canonical polynomial of the entry ``symbol`` names (None: exactly -oo)."""
        if symbol not in self.value and symbol not in self.masked:
            self._stage(self.g.owner(symbol)[0])
        return self.value.get(symbol)

    def _input(self, symbol: sympy.Symbol) -> Poly:
        if symbol in self.masked:
            raise Refused(str(symbol))
        return self.value[symbol]

    def _stage(self, name: str) -> None:
        todo = [name]
        while todo:  # the stage's ancestors first, without recursion
            top = todo[-1]
            missing = [i for i in self.g[top].inputs if i not in self._done]
            if missing:
                todo.extend(missing)
                continue
            todo.pop()
            if top not in self._done:
                self._compute(top)
                self._done.add(top)

    def _representative(self, symbol: sympy.Symbol) -> sympy.Expr:
        """-oo, the rational value, or the first symbol with the same polynomial."""
        if symbol in self._rep_of:
            return self._rep_of[symbol]
        if symbol in self.masked:
            rep = -sympy.oo
        else:
            p = self.value[symbol]
            if not p:
                rep = sympy.S.Zero
            elif len(p) == 1 and _ONE in p:
                c = p[_ONE]
                rep = sympy.Rational(int(c.p), int(c.q))
            else:
                rep = self._rep.setdefault(
                    tuple(sorted((m, int(c.p), int(c.q)) for m, c in p.items())), symbol)
        self._rep_of[symbol] = rep
        return rep

    def _compute(self, name: str) -> None:
        g = self.g
        local, symbols = g.local(name), g.symbols(name)

        def atom(expr: sympy.Expr) -> Poly:
            key = expr.xreplace({s: self._representative(s) for s in expr.free_symbols})
            if key.is_Rational:
                return constant(key)
            if key.has(*_UNDEFINED):
                raise Refused(str(key))
            return self.vars.var(key)

        for i in range(local.rows):
            for j in range(local.cols):
                own = symbols[i, j]
                if local[i, j] == -sympy.oo:
                    self.masked.add(own)
                    continue
                try:
                    p = to_poly(local[i, j], self._input, atom, MAX_CANONICAL_TERMS)
                except Refused:
                    p = self.vars.var(own)
                self.value[own] = p
