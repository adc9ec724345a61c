"""The derivation: a graph of named stages, exact by construction, evaluated with balls.

A stage's entries are named by SymPy symbols (``layer1.head1.Q[0,1]``); its local
formula is an expression over the symbols of the stages it reads.  The derivation
is therefore a shared graph whose size grows like the float computation's
operation count, not like the fully expanded expressions (which swell
exponentially with depth).  Closed forms are produced on request, with a size
limit; the graph is evaluated once per precision in ball arithmetic.  What is
certified from those balls (correctly rounded digits, signs, exact zeros) is
:mod:`symformer.engine.certify`'s, reached as ``derivation.certification``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from symformer.engine.arbmath import ArbMatrix
from symformer.engine.argmax import NextToken, next_token
from symformer.engine.certify import Certification
from symformer.engine.exact import Canonical, expression_matrix
from symformer.engine.fast import collection_paused, working
from symformer.engine.rounding import Rounded
from symformer.errors import ClosedFormTooLarge, InputError
from symformer.lazy import sympy

if TYPE_CHECKING:
    from symformer.ops.base import Operation as Op

#: Closed forms larger than this many operations are refused unless asked for.
DEFAULT_MAX_OPS = 400


@dataclass(eq=False)
class Stage:
    """One named matrix of the derivation, with its labels and how it is computed.

    ``kind`` says what the stage is (``"Q"``, ``"weights"``, ``"layer_norm"``, ...) so
    printers can dispatch on it; ``layer`` and ``head`` are 1-based (0 when not
    applicable).
    """

    name: str
    kind: str
    op: Op = field(repr=False)
    inputs: tuple[str, ...]
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    layer: int = 0
    head: int = 0
    side: str = "encoder"
    derivation: Derivation | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return len(self.rows), len(self.cols)

    @property
    def symbols(self) -> sympy.Matrix:
        """The symbols that name this stage's entries in later stages' formulas."""
        return self.derivation.symbols(self.name)

    @property
    def local(self) -> sympy.Matrix:
        """The exact formula of every entry over the input stages' symbols."""
        return self.derivation.local(self.name)

    def closed_form(self, i: int, j: int, max_ops: int = DEFAULT_MAX_OPS) -> sympy.Expr:
        """The exact value of entry (i, j) over the example's numbers alone."""
        return self.derivation.closed_form(self.name, i, j, max_ops)

    def exact(self, max_ops: int = DEFAULT_MAX_OPS) -> sympy.Matrix:
        """The matrix of closed forms (raises :class:`ClosedFormTooLarge` past ``max_ops``)."""
        return sympy.Matrix(*self.shape, lambda i, j: self.closed_form(i, j, max_ops))

    def rounded(self, *, decimals: int | None = None, significant: int | None = None,
                rows: Sequence[int] | None = None, cols: Sequence[int] | None = None
                ) -> list[list[Rounded | None]]:
        """Certified correct roundings; ``None`` marks a masked (-inf) score.  ``rows``
        and ``cols`` (indices) round only that block of the stage."""
        return self.derivation.rounded(self.name, decimals=decimals, significant=significant,
                                       rows=rows, cols=cols)

    def values(self, *, decimals: int | None = None, significant: int | None = None,
               rows: Sequence[int] | None = None, cols: Sequence[int] | None = None
               ) -> list[list[str]]:
        """Certified decimal strings ("-inf" for masked scores); ``rows`` and ``cols``
        as in :meth:`rounded`."""
        rows = self.rounded(decimals=decimals, significant=significant, rows=rows, cols=cols)
        with collection_paused():  # a list per row, no cycle (engine.fast)
            if decimals is not None:
                return [["-inf" if r is None else r.fixed() for r in row] for row in rows]
            return [["-inf" if r is None else r.significant() for r in row] for row in rows]

    def balls(self, prec: int = 128) -> ArbMatrix:
        """The stage in ball arithmetic at ``prec`` bits."""
        return self.derivation.evaluate(prec)[self.name]

    def __repr__(self) -> str:
        r, c = self.shape
        return f"<Stage {self.name} ({r}x{c}, {self.kind})>"

    # Notebook display (implemented in symformer.display).
    def _repr_html_(self) -> str:
        from symformer.display import stage_html
        return stage_html(self)

    def _repr_markdown_(self) -> str:
        from symformer.display import stage_markdown
        return stage_markdown(self)

    def _repr_latex_(self) -> str:
        from symformer.display import stage_latex
        return stage_latex(self)


class Derivation:
    """An example pushed through its blocks: stages in order, addressable by name."""

    def __init__(self, example, causal: bool) -> None:
        self.example = example
        self.causal = causal
        self.stages: dict[str, Stage] = {}
        self._symbols: dict[str, sympy.Matrix] = {}
        self._owner: dict[sympy.Symbol, tuple[str, int, int]] = {}
        self._local: dict[str, sympy.Matrix] = {}
        self._local_rows: dict[str, list[list[sympy.Expr]]] = {}  # the same, as lists
        self._entries: dict[tuple[str, int, int], sympy.Expr | None] = {}  # single entries
        self._entry_counts: dict[str, int] = {}  # single entries built, per stage
        self._closed: dict[tuple[str, int, int], sympy.Expr] = {}
        self._balls: dict[int, dict[str, ArbMatrix]] = {}
        self._canonical: Canonical | None = None
        self._depth: dict[str, int] = {}  # stage -> length of its longest input path
        self._max_depth = 0
        #: What is certified from the balls: roundings, signs, exact zeros.
        self.certification = Certification(self)

    # -- building ---------------------------------------------------------------
    def add(self, name: str, kind: str, op: Op, inputs: tuple[str, ...] | list[str],
            rows: tuple[str, ...], cols: tuple[str, ...], **where: object) -> str:
        """Append a stage computed by ``op`` from the named ``inputs``; returns its name."""
        if name in self.stages:
            raise ValueError(f"duplicate stage name {name}")
        missing = [i for i in inputs if i not in self.stages]
        if missing:
            raise ValueError(f"stage {name} reads unknown stages {missing}")
        self.stages[name] = Stage(name, kind, op, tuple(inputs), tuple(rows), tuple(cols),
                                  derivation=self, **where)
        depth = self._depth[name] = 1 + max((self._depth[i] for i in inputs), default=0)
        self._max_depth = max(self._max_depth, depth)
        # stages are append-only and never change: evaluate() computes only the new ones
        return name

    # -- lookup -----------------------------------------------------------------
    def __getitem__(self, name: str) -> Stage:
        try:
            return self.stages[name]
        except KeyError:
            raise InputError(unknown_stage_message(name, list(self.stages))) from None

    def __contains__(self, name: object) -> bool:
        return name in self.stages

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages.values())

    def __len__(self) -> int:
        return len(self.stages)

    def next_token(self) -> NextToken:
        """The exact next token of a decoder example (a tie is reported, never broken)."""
        return next_token(self)

    # Notebook display (implemented in symformer.display).
    def _repr_html_(self) -> str:
        from symformer.display import derivation_html
        return derivation_html(self)

    def _repr_markdown_(self) -> str:
        from symformer.display import derivation_markdown
        return derivation_markdown(self)

    def _repr_latex_(self) -> str:
        from symformer.display import derivation_latex
        return derivation_latex(self)

    def ancestors(self, name: str) -> set[str]:
        """Every stage that ``name`` reads, directly or through other stages."""
        seen: set[str] = set()
        todo = list(self[name].inputs)
        while todo:
            s = todo.pop()
            if s not in seen:
                seen.add(s)
                todo.extend(self[s].inputs)
        return seen

    def select(self, patterns: list[str] | None) -> list[Stage]:
        """Stages matching any of the glob ``patterns`` (all stages for None), in order."""
        if not patterns:
            return list(self)
        chosen = []
        for pattern in patterns:
            hits = [s for s in self if fnmatch.fnmatchcase(s.name, pattern)]
            if not hits:
                raise InputError(unknown_stage_message(pattern, list(self.stages)))
            chosen.extend(hits)
        seen: set[str] = set()
        return [s for s in chosen if not (s.name in seen or seen.add(s.name))]

    # -- exact ------------------------------------------------------------------
    def symbols(self, name: str) -> sympy.Matrix:
        """The matrix of symbols naming the entries of stage ``name``."""
        if name not in self._symbols:
            stage = self[name]
            rows, cols = stage.shape  # Python ints: formatting SymPy integers is slow
            entries = [[sympy.Symbol(f"{name}[{i},{j}]") for j in range(cols)]
                       for i in range(rows)]
            self._symbols[name] = expression_matrix(entries)
            owner = self._owner
            for i, row in enumerate(entries):  # from the lists: a matrix's indexing is slow
                for j, symbol in enumerate(row):
                    owner[symbol] = (name, i, j)
        return self._symbols[name]

    def owner(self, symbol: sympy.Symbol) -> tuple[str, int, int]:
        """(stage, row, column) that a symbol names."""
        return self._owner[symbol]

    def local(self, name: str) -> sympy.Matrix:
        """The local formulas of stage ``name`` over its inputs' symbols (cached)."""
        if name not in self._local:
            stage = self[name]
            self._local[name] = stage.op.sympy([self.symbols(i) for i in stage.inputs])
        return self._local[name]

    def closed_form(self, name: str, i: int, j: int, max_ops: int = DEFAULT_MAX_OPS
                    ) -> sympy.Expr:
        """The exact value of one entry as an expression over the example's numbers.

        Substitutes closed forms for the local formula's symbols, stage by stage.
        ReLU's max(0, h) is resolved by the certified sign of h.  Raises
        :class:`ClosedFormTooLarge` when the result exceeds ``max_ops`` operations.
        """
        key = (name, i, j)
        if key in self._closed:
            expr = self._closed[key]
        else:
            local = self.certification.resolved_local(name, i, j)
            mapping = {s: self.closed_form(*self.owner(s), max_ops) for s in local.free_symbols}
            expr = local.xreplace(mapping) if mapping else local
            expr = _tidy(expr, max_ops)
            self._closed[key] = expr
        size = sympy.count_ops(expr)
        if size > max_ops:
            raise ClosedFormTooLarge(
                f"the closed form of {name}[{i},{j}] has {size} operations, more than "
                f"max_ops={max_ops}; pass a larger max_ops, or use the stage's local "
                f"formula (stage.local), which stays short"
            )
        return expr

    # -- balls ------------------------------------------------------------------
    def evaluate(self, prec: int, upto: str | None = None) -> dict[str, ArbMatrix]:
        """Every stage in ball arithmetic at ``prec`` bits (cached per precision).

        Incremental: stages added since the last call at ``prec`` are the only ones
        computed (a training step costs its own stages, not the steps before it).
        ``upto``: only that stage and the stages it reads, directly or not (a table of
        one head needs neither the other heads of its layer nor the layers after it);
        the others are computed when a later call asks for them.
        """
        values = self._balls.setdefault(prec, {})
        if len(values) < len(self.stages):
            needed = None
            if upto is not None and upto not in values:
                needed = self.ancestors(upto) | {upto}
            elif upto is not None:
                return values
            with working(prec):  # the collector paused: lists of balls, no cycle
                for stage in self:
                    if stage.name in values or needed is not None and \
                            stage.name not in needed:
                        continue
                    values[stage.name] = stage.op.arb([values[i] for i in stage.inputs])
                    try:
                        self.certification.check_denominators(stage, values)
                    except Exception:
                        del values[stage.name]
                        raise
        return values






    @property
    def precisions(self) -> tuple[int, ...]:
        """The precisions (bits) the graph has been evaluated at so far."""
        return tuple(self._balls)

    def evaluated(self, prec: int) -> dict[str, ArbMatrix]:
        """The stages evaluated so far at ``prec`` bits (nothing is computed)."""
        return self._balls.get(prec, {})

    @property
    def longest_path(self) -> int:
        """The number of stages on the graph's longest input path."""
        return self._max_depth

    def owns(self, symbol: object) -> bool:
        """Whether ``symbol`` names an entry of a stage of this derivation."""
        return symbol in self._owner

    # -- certified (symformer.engine.certify) -------------------------------------
    def rounded(self, name: str, *, decimals: int | None = None,
                significant: int | None = None, rows: Sequence[int] | None = None,
                cols: Sequence[int] | None = None) -> list[list[Rounded | None]]:
        """Certified correct roundings of a stage (``None`` for a masked score):
        :meth:`Certification.rounded <symformer.engine.certify.Certification.rounded>`."""
        return self.certification.rounded(name, decimals=decimals, significant=significant,
                                          rows=rows, cols=cols)

    def sign(self, name: str, i: int, j: int) -> int:
        """The certified sign (-1, 0 or 1) of one entry; 0 only when proved exactly zero
        (:meth:`Certification.sign <symformer.engine.certify.Certification.sign>`)."""
        return self.certification.sign(name, i, j)

    def prove_zero(self, expr: sympy.Expr, max_ops: int = 3000, max_unfold: int = 200,
                   decide_relu: bool = True) -> bool:
        """Prove ``expr`` (over stage symbols and numbers) exactly 0; False if no proof
        (:meth:`Certification.prove_zero
        <symformer.engine.certify.Certification.prove_zero>`)."""
        return self.certification.prove_zero(expr, max_ops, max_unfold, decide_relu)

    def structural_zero(self, expr: sympy.Expr, stage: str | None = None) -> bool:
        """Prove ``expr`` exactly 0 by a polynomial identity; False if no quick proof
        (:meth:`Certification.structural_zero
        <symformer.engine.certify.Certification.structural_zero>`)."""
        return self.certification.structural_zero(expr, stage)

    @property
    def canonical(self) -> Canonical:
        """Exact canonical forms of the entries (rational values, shared symbols)."""
        if self._canonical is None:
            self._canonical = Canonical(self)
        return self._canonical

    def exact_rational(self, name: str, i: int, j: int) -> Fraction | None:
        """The exact value of an entry when the exact forward pass finds it rational."""
        return self.canonical.rational(name, i, j)

















    def _local_entry(self, name: str, i: int, j: int) -> sympy.Expr:
        """One entry's local formula: from the stage's cached matrix, or built alone when
        the operation can (``Operation.sympy_entry``: a proof unfolds few entries).
        Past a quarter of the stage's entries the whole stage is built instead (a
        proof that reads every row: the whole matrix costs a few entries' time)."""
        if name not in self._local:
            key = (name, i, j)
            if key not in self._entries:
                stage = self[name]
                built = self._entry_counts.get(name, 0)
                if built >= max(2, stage.shape[0] * stage.shape[1] // 4):
                    return self._local_row_entry(name, i, j)
                self._entry_counts[name] = built + 1
                self._entries[key] = stage.op.sympy_entry(
                    [self.symbols(s) for s in stage.inputs], i, j)
            if self._entries[key] is not None:
                return self._entries[key]
        return self._local_row_entry(name, i, j)

    def _local_row_entry(self, name: str, i: int, j: int) -> sympy.Expr:
        """Entry (i, j) of the stage's whole local matrix (built once)."""
        rows = self._local_rows.get(name)
        if rows is None:  # a SymPy matrix's own indexing is slow: read it as lists once
            rows = self._local_rows[name] = self.local(name).tolist()
        return rows[i][j]



def _tidy(expr: sympy.Expr, max_ops: int) -> sympy.Expr:
    """Expand products and sums (not exponentials) when that keeps the form short."""
    if sympy.count_ops(expr) > max_ops:
        return expr
    expanded = sympy.expand(expr, power_exp=False, power_base=False, log=False)
    return expanded if sympy.count_ops(expanded) <= max_ops else expr


def unknown_stage_message(name: str, known: list[str]) -> str:
    """An error message for an unknown stage name that lists the close ones."""
    import difflib

    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"unknown stage {name!r}{hint} (`symformer derive --list` lists all "
            f"{len(known)} stages)")
