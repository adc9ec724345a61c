"""Exact values where they are cheap: rational entries and provably equal entries.

A forward pass over the stage-local formulas in which every entry is replaced by a
*canonical* form before the next stage reads it:

* a rational number when the entry is rational (embeddings with
  ``positional_encoding = "none"``, projections, sums, means and variances of
  rationals; a softmax row of equal scores, whose weights are 1/n exactly; the
  square root of a rational square; a weighted sum of equal values with a softmax
  row's weights, which sum to 1; the dot product of a query and a key rotated by
  RoPE at the same position, as sin^2 + cos^2 = 1);
* ``-oo`` for a masked score;
* otherwise the symbol of the *first* entry computed by the same canonical formula
  (value numbering): two entries with the same formula over the same canonical
  inputs are equal, so identical tokens, symmetric heads and repeated weights
  share one symbol, and differences of them cancel in SymPy's automatic
  simplification (``exp(a)/(exp(a) + exp(a))`` is ``1/2``, ``h - h`` is ``0``).

Everything is exact SymPy arithmetic on rationals and symbols; nothing is numeric.
Sharing a symbol is a proof of equality; *not* sharing one proves nothing.

With ``eps = 0`` a LayerNorm row whose variance is exactly 0 is 0/0: that raises
:class:`~symformer.errors.InputError` naming the stage and the row.  A LayerNorm entry
with ``eps = 0`` is given a canonical value only when its variance is a non-zero
rational (else it keeps its own symbol), so no 0/0 is ever simplified away.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.engine.graph import Derivation

#: Canonical formulas larger than this many operations are not compared (own symbol).
_MAX_KEY_OPS = 400


class Canonical:
    """The canonical forms of a derivation's entries, computed stage by stage on demand."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self.done: list[str] = []
        self.value: dict[sympy.Symbol, sympy.Expr] = {}
        self._seen: dict[sympy.Expr, sympy.Symbol] = {}
        #: the forms of rotated (RoPE) entries that are not rational, for :meth:`_unrotated`
        self._rotated: dict[sympy.Symbol, sympy.Expr] = {}

    def upto(self, name: str) -> None:
        """Compute every stage up to and including ``name``."""
        if name in self.done:
            return
        for stage_name in list(self.g.stages)[len(self.done):]:
            self._stage(stage_name)
            self.done.append(stage_name)
            if stage_name == name:
                return

    def of(self, symbol: sympy.Symbol) -> sympy.Expr:
        """The canonical form of the entry a symbol names."""
        self.upto(self.g.owner(symbol)[0])
        return self.value[symbol]

    def rational(self, name: str, i: int, j: int) -> Fraction | None:
        """The exact value of an entry when it is rational, else None."""
        form = self.of(self.g.symbols(name)[i, j])
        return Fraction(int(form.p), int(form.q)) if form.is_Rational else None

    def substitute(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` with every stage symbol replaced by its canonical form (equal value)."""
        mapping = {s: self.of(s) for s in expr.free_symbols}
        return expr.xreplace(mapping) if mapping else expr

    def _stage(self, name: str) -> None:
        g = self.g
        stage = g[name]
        local, symbols = g.local(name), g.symbols(name)
        inputs = {s: self.value[s] for i in stage.inputs for s in g.symbols(i)}
        guarded = self._guard(stage, inputs)
        unit = self._unit_rows(stage)
        rotated = any(self.g[name].op.rotates for name in stage.inputs)
        for i in range(local.rows):
            for j in range(local.cols):
                own = symbols[i, j]
                form = local[i, j].xreplace(inputs) if inputs else local[i, j]
                if unit and not form.is_Rational:
                    form = _weights_summed(form, unit)
                if rotated and not form.is_Rational:
                    form = self._unrotated(form)
                self.value[own] = own if i in guarded else self._canonical(own, form)
                if stage.op.rotates and not self.value[own].is_Rational:
                    self._rotated[own] = form

    def _unrotated(self, form: sympy.Expr) -> sympy.Expr:
        """``form`` as a rational when it is one once the rotated entries it reads are
        written out and sin(a)^2 = 1 - cos(a)^2: the dot product of a query and a key
        rotated by the same angle (same position) is that of the unrotated pair;
        else ``form``."""
        mapping = {s: self._rotated[s] for s in form.free_symbols if s in self._rotated}
        # only entries of one position (row) can lose their angles: skip the others
        # cheaply (a score of two positions depends on their distance)
        if not mapping or len({self.g.owner(s)[1] for s in mapping}) > 1 \
                or not _few_nodes(form):
            return form
        written = sympy.expand(form.xreplace(mapping))
        squared = written.replace(
            lambda e: e.is_Pow and e.exp == 2 and isinstance(e.base, sympy.sin),
            lambda e: 1 - sympy.cos(e.base.args[0]) ** 2)
        reduced = sympy.expand(squared)
        return reduced if reduced.is_Rational else form

    def _unit_rows(self, stage) -> dict[sympy.Symbol, sympy.Expr]:
        """For each input row that sums to 1 (a softmax's weights), its last entry's
        canonical symbol mapped to 1 minus the row's other entries: an identity between
        values, so substituting it is sound wherever it is used."""
        unit = {}
        for name in stage.inputs:
            if not self.g[name].op.rows_sum_to_one:
                continue
            values = self.g.symbols(name).applyfunc(lambda s: self.value[s])
            for i in range(values.rows):
                row = list(values.row(i))
                # the last entry that is not a known number (a causal row's last
                # entries are masked, exactly 0)
                k = next((k for k in reversed(range(len(row))) if row[k].is_Symbol), None)
                if k is not None and row[k] not in unit:
                    unit[row[k]] = 1 - sum(row[:k] + row[k + 1:])
        return unit

    def _canonical(self, own: sympy.Symbol, form: sympy.Expr) -> sympy.Expr:
        if form.is_Rational or form == -sympy.oo:
            return form
        if form.is_Symbol:
            return form
        if form.has(sympy.nan, sympy.zoo, sympy.oo) or not _few_nodes(form) and \
                sympy.count_ops(form) > _MAX_KEY_OPS:
            return own
        return self._seen.setdefault(form, own)

    def _guard(self, stage, inputs: dict[sympy.Symbol, sympy.Expr]) -> set[int]:
        """Rows whose denominators are not known to be non-zero (LayerNorm with eps = 0).

        Raises the operation's error for a row whose denominator is exactly 0.
        """
        guarded = set()
        for i in range(stage.shape[0]):
            for k, r, c in stage.op.denominators(i):
                v = inputs[self.g.symbols(stage.inputs[k])[r, c]]
                if v == 0:
                    raise stage.op.undefined(stage, i)
                if not (v.is_Rational and v != 0):
                    guarded.add(i)
        return guarded


def _weights_summed(form: sympy.Expr, unit: dict[sympy.Symbol, sympy.Expr]
                    ) -> sympy.Expr:
    """``form`` with each row of softmax weights summed to 1 (``unit``), when that makes
    the weights cancel (a weighted sum of equal values is that value); else ``form``.

    The rewritten form is kept only when it no longer contains the substituted weights,
    so forms stay a deterministic function of their inputs (value numbering sound)."""
    if not form.free_symbols & unit.keys() or not _few_nodes(form):
        return form
    summed = sympy.expand(form.xreplace(unit))
    return form if summed.free_symbols & unit.keys() else summed


def _few_nodes(expr: sympy.Expr) -> bool:
    """Whether ``expr`` has at most ``_MAX_KEY_OPS // 4`` nodes, so that it surely has at
    most ``_MAX_KEY_OPS`` operations: ``count_ops`` counts, per node, its own operation
    (a function, a power), a sign, a division, and one per argument after the first
    (each argument a node of its own) — at most 4 per node.  A cheap test that spares
    most forms ``count_ops``'s slow walk."""
    budget = _MAX_KEY_OPS // 4
    todo = [expr]
    while todo:
        budget -= 1
        if budget < 0:
            return False
        todo.extend(todo.pop().args)
    return True


def expression_matrix(rows: list[list]) -> sympy.Matrix:
    """A SymPy matrix of expressions (symbols, local formulas), built straight from its
    sparse domain matrix: the same matrix as ``sympy.Matrix(rows)``, a few times faster
    (the backward pass builds many small symbol and gradient matrices)."""
    shape = (len(rows), len(rows[0]) if rows else 0)
    if not shape[1]:
        return sympy.Matrix(rows)
    entries = [[x if isinstance(x, sympy.Basic) else sympy.sympify(x) for x in row]
               for row in rows]
    # the sparse rows straight from the lists (zeros left out, as to_sparse does)
    matrices = sympy.polys.matrices
    sparse = matrices.sdm.SDM.from_list(entries, shape, sympy.polys.domains.EXRAW)
    return sympy.MutableDenseMatrix._fromrep(matrices.DomainMatrix.from_rep(sparse))


def undefined_row(stage, row: int) -> Exception:
    """The error for an output row that divides by exactly 0 (the operation words it)."""
    return stage.op.undefined(stage, row)
