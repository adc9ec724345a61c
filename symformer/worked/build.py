"""Worked lines built from each stage's local formula (one builder for every operation).

For the token's row ``i`` of a stage, each entry's local formula (the operation's
``sympy`` on the input stages' symbols, with the constants the operation names
written by name) becomes

* the symbolic line: every input symbol printed as its notation
  (``g[input].op.symbol``, 0-based indices), every named constant by its name;
* the numeric line: every input symbol printed as its certified decimal, every
  constant exactly;
* the result: the stage's certified rounding.

Recomputability: the printed numeric line, evaluated exactly, must round to the
printed result (and not be a tie).  When the operands rounded to the style's
decimals cannot give the exact result's rounding, the operands are printed with
the fewest more decimals that can (decided with fractions or balls,
:mod:`symformer.worked.evaluate`).  An operation's ``worked_parts`` (a softmax's
denominator) become steps of their own, each rounded part recomputable from what
is printed before it.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import flint

from symformer.engine.arbmath import precision, sympy_to_arb
from symformer.engine.graph import Stage
from symformer.engine.rounding import round_fraction
from symformer.errors import ClosedFormTooLarge, UndecidedError
from symformer.example.exact import ExactMatrix
from symformer.lazy import sympy
from symformer.notation import notation as stage_notation
from symformer.notation import where as stage_where
from symformer.notation_types import Notation
from symformer.ops.base import WorkedPart
from symformer.worked.evaluate import exact_value, has_rounded_leaves, reader_rounding
from symformer.worked.from_sympy import Converter
from symformer.worked.model import (
    APPROX,
    EQUALS,
    Add,
    Const,
    Item,
    Neg,
    Node,
    Num,
    Source,
    Step,
    Style,
    Sym,
    Vector,
    Worked,
)
from symformer.worked.numbers import integer_values, places, printed_values, terminating

#: At most this many more decimals than asked are tried for the operands.
MAX_EXTRA = 30
MASKED = "masked"


class Values:
    """Certified decimal strings of the derivation's stages, memoised per precision."""

    def __init__(self, short: bool = False) -> None:
        self._cache: dict[tuple[str, int], list[list[str]]] = {}
        self.short = short

    def text(self, stage: Stage, i: int, j: int, decimals: int) -> str:
        """Entry (i, j) as its table prints it: an integer for a stage of exact integers
        (``2``, not ``2.000``), else the certified decimal; with ``short`` (the notes,
        whose tables do the same) an exact short decimal in full (``0.3125``,
        :func:`~symformer.worked.numbers.printed_values`)."""
        key = (stage.name, decimals)
        if key not in self._cache:
            self._cache[key] = printed_values(stage, decimals) if self.short else \
                integer_values(stage, decimals) or stage.values(decimals=decimals)
        return self._cache[key][i][j]


def symbol(notation: Notation, index: tuple = ()) -> Sym:
    """A notation with 0-based indices as a tree leaf."""
    return Sym(notation.entry(*index), notation.entry(*index, fmt="text"), notation.text, index)


def _decimal(text: str, source: Source | None = None) -> Num:
    return Num(text, Fraction(text), source)


def reader_result(numeric: Node, decimals: int) -> Num | None:
    """What a reader gets from a printed expression: its correct rounding to
    ``decimals``; an exact tie (1.595 at two decimals) is rounded half to even, as
    NumPy and Python do and as the notes say, so that every result of a block has the
    block's decimals; None when undecidable."""
    r = reader_rounding(numeric, decimals)
    if r is None:
        value = exact_value(numeric)
        if value is None:
            return None
        r = round_fraction(value, decimals=decimals)  # ties to even
    return Num(r.fixed(), r.value())


class _Row:
    """One stage's row ``i``: its formulas, notation and operands."""

    def __init__(self, stage: Stage, i: int, style: Style, values: Values,
                 symbolic: bool, parts: bool) -> None:
        self.stage, self.i, self.style, self.values = stage, i, style, values
        self.symbolic, self.use_parts = symbolic, parts
        self.g = stage.derivation
        self.constants: dict[sympy.Symbol, tuple[Node, sympy.Expr]] = {}
        self.placeholders: dict[sympy.Symbol, tuple[Node, Node, tuple | None]] = {}
        self.formulas = self._formulas()
        self.masked = self._mask_operands()
        self.index = self._input_indices()

    # -- the formulas -------------------------------------------------------------
    def _formulas(self) -> list[sympy.Expr]:
        """Row i's local formulas, the operation's named constants as symbols, an input
        that is a known constant (dL/dL = 1) as its value."""
        known = {s: sympy.Integer(self.g[name].op.constant) for name in self.stage.inputs
                 if self.g[name].op.constant is not None for s in self.g.symbols(name)}
        return [f.xreplace(known) if known else f for f in self._named_formulas()]

    def _named_formulas(self) -> list[sympy.Expr]:
        """Row i's local formulas, the operation's named constants as symbols."""
        op = self.stage.op
        names = op.named_constants()
        if not names:
            return [self._decided(j, f) for j, f in enumerate(self.stage.local.row(self.i))]
        replace, zeros = {}, {}
        located = stage_where(self.stage)  # a head's weights: W_Q^{(2)}, as its equation
        for field, notation in names.items():
            value = getattr(op, field)
            if isinstance(value, (sympy.MatrixBase, ExactMatrix)):
                notation = notation.at(located)  # noqa: PLW2901
                replace[field] = sympy.Matrix(*value.shape, lambda k, j, f=field, n=notation,
                                              v=value: self._constant(f, n, v, k, j, zeros))
            elif value is not None:
                s = sympy.Symbol(f"const:{field}")
                self.constants[s] = (symbol(notation), sympy.sympify(value))
                replace[field] = s
        named_op = dataclasses.replace(op, **replace)
        inputs = [self.g.symbols(name) for name in self.stage.inputs]
        row = named_op.sympy(inputs).row(self.i)
        return [f.xreplace(zeros) for f in row]

    def _decided(self, j: int, f: sympy.Expr) -> sympy.Expr:
        """A step function (ReLU's derivative Heaviside(h, 0)) decided by the certified
        sign of its input: the worked line shows the branch taken (0 or the factor)."""
        if not f.has(sympy.Heaviside):
            return f
        return self.stage.op.resolve(f, lambda: self.g.sign(self.stage.inputs[0], self.i, j))

    def _constant(self, field: str, notation: Notation, value: sympy.Matrix, k: int, j: int,
                  zeros: dict) -> sympy.Symbol:
        """The symbol standing for entry (k, j) of a named constant matrix."""
        s = sympy.Symbol(f"const:{field}[{k},{j}]")
        index = (max(k, j),) if 1 in value.shape else (k, j)
        if "_" in notation.latex:  # (W_{Q})_{0,1}, and W_Q[0,1] in text
            leaf = symbol(Notation(f"({notation.latex})", notation.text, notation.title,
                                   where=notation.where), index)
            leaf = dataclasses.replace(leaf, text=f"{notation.text}[{','.join(map(str, index))}]")
        else:
            leaf = symbol(notation, index)
        self.constants[s] = (leaf, value[k, j])
        if value[k, j] == 0:
            zeros[s] = 0
        return s

    def _mask_operands(self) -> bool:
        """Replace masked (-inf) operands by -oo, so exp(-inf) = 0 leaves the formulas."""
        minus = {}
        for f in self.formulas:
            for s in f.free_symbols:
                if s not in self.constants and s not in minus:
                    name, r, c = self.g.owner(s)
                    if self.values.text(self.g[name], r, c, self.style.decimals) == "-inf":
                        minus[s] = -sympy.oo
        if minus:
            self.formulas = [f.xreplace(minus) for f in self.formulas]
        return bool(minus)

    def _input_indices(self, extra: list[sympy.Expr] = ()) -> dict[str, bool]:
        """Per input stage: whether its entries need a row index (other rows are read)."""
        other: dict[str, bool] = {}
        for f in [*self.formulas, *extra]:
            for s in f.free_symbols:
                if s not in self.constants:
                    name, r, _ = self.g.owner(s)
                    other[name] = other.get(name, False) or (
                        r != self.i and self.g[name].shape[0] > 1)
        return other

    # -- leaves -------------------------------------------------------------------
    def position(self, s: sympy.Symbol) -> tuple | None:
        if s in self.constants or s in self.placeholders:
            return self.placeholders.get(s, (None, None, None))[2]
        name, r, c = self.g.owner(s)
        return (self.stage.inputs.index(name), r, c)

    def notation_of(self, s: sympy.Symbol) -> Sym:
        name, r, c = self.g.owner(s)
        source = self.g[name]
        index = ((r,) if self.index.get(name) else ()) + ((c,) if source.shape[1] > 1 else ())
        return symbol(self._input_notation(source), index)

    def _input_notation(self, source: Stage) -> Notation:
        """The input's symbol, with the superscript saying where it sits (q^{(2)}:
        :func:`symformer.notation.notation`)."""
        return stage_notation(source)

    def number_of(self, s: sympy.Symbol, decimals: int) -> Node:
        name, r, c = self.g.owner(s)
        source = self.g[name]
        if self.style.exact:
            try:
                form = source.closed_form(r, c, max_ops=self.style.max_ops)
            except ClosedFormTooLarge:
                pass
            else:
                if form.is_finite is not False:
                    return Converter(_no_leaf, constants_first=True)(form)
        fixed = dict(self.style.given).get(name)
        return _decimal(self.values.text(source, r, c, decimals if fixed is None else fixed),
                        Source("stage", name, (r, c)))

    def symbolic_form(self, expr: sympy.Expr) -> Node:
        def leaf(s: sympy.Symbol) -> Node:
            if s in self.constants:
                return self.constants[s][0]
            if s in self.placeholders:
                return self.placeholders[s][0]
            return self.notation_of(s)
        return self._tree(expr, Converter(leaf, self.position))

    def numeric_form(self, expr: sympy.Expr, decimals: int) -> Node:
        def leaf(s: sympy.Symbol) -> Node:
            if s in self.constants:
                leaf, value = self.constants[s]
                where = Source("parameter", leaf.base, leaf.index)
                if value.is_Rational:
                    return Const(value, where) if value >= 0 else Neg(Const(-value, where))
                return Converter(_no_leaf, constants_first=True)(value)
            if s in self.placeholders:
                return self.placeholders[s][1]
            return self.number_of(s, decimals)
        return self._tree(expr, Converter(leaf, self.position), symbolic=False)

    def _rule_owner(self) -> Stage | None:
        """The consumer whose backward rule is a one-term gradient's formula (its
        weights are that stage's), else None."""
        terms = getattr(self.stage.op, "terms", ())
        if not self.stage.op.is_gradient or len(terms) != 1:
            return None
        return self.g[self.stage.inputs[terms[0].arity]]

    def _weight(self, owner: Stage, name: str, index: tuple, symbolic: bool) -> Node:
        """Entry ``index`` of ``owner``'s weight ``name``: its symbol (γ^{(1)}_{0}) or its
        exact value, sourced as the weight's entry."""
        from symformer.notation import parameter
        leaf = symbol(parameter(owner, name), index)
        if symbolic:
            return leaf
        weight = owner.op.parameters()[name]
        value = sympy.sympify(weight[index[0]] if len(index) == 1 else weight[index])
        where = Source("parameter", leaf.base, index)
        return Const(value, where) if value >= 0 else Neg(Const(-value, where))

    def _tree(self, expr: sympy.Expr, convert: Converter, symbolic: bool = True) -> Node:
        """The operation's textbook tree of an entry's formula, else SymPy's form."""
        owner = self._rule_owner()
        if owner is not None:
            convert.parameter = lambda name, index: self._weight(owner, name, index, symbolic)
        tree = self.stage.op.worked_tree(expr, convert)
        return convert(expr) if tree is None else tree

    # -- steps --------------------------------------------------------------------
    def lhs(self, j: int) -> Sym:
        return symbol(stage_notation(self.stage), (j,) if self.stage.shape[1] > 1 else ())

    def is_plain_row(self) -> bool:
        """Every entry a copy of an input entry or an exact rational: nothing to work out."""
        return all(f.is_Symbol or f.is_Rational for f in self.formulas)

    def row_step(self) -> Step:
        items = []
        for j, f in enumerate(self.formulas):
            if f.is_Rational:
                items.append(Const(f) if f >= 0 else Neg(Const(-f)))
            else:
                items.append(_decimal(self.values.text(self.stage, self.i, j,
                                                      self.style.decimals)))
        return Step(symbol(stage_notation(self.stage)), ((EQUALS, Vector(tuple(items))),),
                    stage=self.stage.name, row=self.i)

    def steps(self) -> list[Step]:
        """The row's steps, every operand read from an earlier stage printed at one
        precision (:meth:`block_decimals`): the reader's path."""
        parts = self.stage.op.worked_parts(self.stage, self.i, self.formulas) \
            if self.use_parts else []
        parts = [p for p in parts if self._printable(p)]
        self.index = self._input_indices([p.expr for p in parts])
        if self.is_plain_row():
            head = self._search(lambda k: self._attempt(parts, k, entries=False), "row") \
                if parts else []
            return [*head, self.row_step()]
        return self._search(lambda k: self._attempt(parts, k), "row")

    def block_decimals(self) -> int:
        """The decimals of the block's operands: the tables' own (what the reader sees),
        unless every operand that is not 0 would print as 0 there (a row of tiny
        gradients: the line would read 0 · 0 + 0); then enough for each of them to show
        two significant digits, the same for the whole block."""
        decimals = self.style.decimals
        given = dict(self.style.given)
        tiny = []
        for f in self.formulas:
            for s in f.free_symbols:
                if s in self.constants or s in self.placeholders:
                    continue
                name, r, c = self.g.owner(s)
                text = self.values.text(self.g[name], r, c, decimals)
                if name in given or text == "-inf":
                    continue
                if Fraction(text) != 0:
                    return decimals  # a number the reader can use: the tables' precision
                ball = self.g[name].balls(128)[r][c]
                if not ball.contains(0):
                    tiny.append((name, r, c))
        for extra in range(MAX_EXTRA):
            k = decimals + extra
            if all(Fraction(self.values.text(self.g[n], r, c, k)) != 0 for n, r, c in tiny):
                return k + 1 if extra else k  # the first digit that shows, and one more
        return decimals + MAX_EXTRA

    def _printable(self, part: WorkedPart) -> bool:
        """Whether a part's value prints sensibly at the style's decimals: below 10^6 in
        magnitude and, for a sum of rounded terms, not rounding to 0 (e^{223.6} or
        e^{-532.5} would need 97 digits or 230 decimals).  Otherwise the entries show
        the part inline, and no rounded part is printed."""
        env = {}
        for s in part.expr.free_symbols:
            name, r, c = self.g.owner(s)
            env[s] = self.g[name].balls(128)[r][c]
        with precision(128):
            value = sympy_to_arb(part.expr, env)
            large_enough = value > flint.arb(10) ** -self.style.decimals
        return bool(abs(value) < 10 ** 6 and (large_enough or not part.termwise))

    def _search(self, attempt, what: str):
        """The steps at the block's decimals; more only when a printed line's rounding
        cannot be decided (never expected: a tie prints the tie itself)."""
        start = self.block_decimals()
        for extra in range(MAX_EXTRA + 1):
            self.placeholders = {}
            found = attempt(start + extra)
            if found is not None:
                return found
        raise UndecidedError(f"the worked line of {self.stage.name} row {self.i} ({what}) "
                             f"is not recomputable with up to {MAX_EXTRA} more decimals")

    def _attempt(self, parts: list, k: int, entries: bool = True) -> list[Step] | None:
        """The row's steps with operands at ``k`` decimals, or None if one is not
        recomputable from what it prints."""
        steps: list[Step] = []
        formulas = self.formulas
        for n, part in enumerate(parts):
            found, replace = self._part(part, n, k)
            if found is None:
                return None
            steps.extend(found)
            formulas = [_put(f, replace, part.expr) for f in formulas]
        for j, f in enumerate(formulas if entries else ()):
            step = self._entry(j, f, k)
            if step is None:
                return None
            steps.append(step)
        return steps

    def _part(self, part, n: int, k: int) -> tuple[list[Step] | None, dict | None]:
        """A part's steps: for a sum of rounded terms (a softmax's denominator) one
        short step per term (``e^{s_0} = e^{1.66} ≈ 5.26``), then the sum of the printed
        terms, so that every result is what its own line's numbers give."""
        replace, steps = {}, []
        expr = part.expr
        lhs = symbol(part.notation)
        where = {"stage": self.stage.name, "row": self.i}
        chain = [(EQUALS, self.symbolic_form(expr))]
        if part.termwise and expr.is_Add:
            rounded = []
            terms = sorted(expr.args, key=lambda a: self._term_position(a) or (-1,))
            for t, term in enumerate(terms):
                sym, num = self.symbolic_form(term), self.numeric_form(term, k)
                found = reader_result(num, k)
                if found is None:
                    return None, None
                value = dataclasses.replace(found, source=Source("worked", _text(sym)))
                col = self._column(term)
                relation = EQUALS if exact_value(num) == value.value else APPROX
                steps.append(Step(sym, ((EQUALS, num), (relation, value)),
                                  (Item(self.stage.name, self.i, col, sym, num, value),),
                                  col=col, **where))
                holder = sympy.Symbol(f"part:{n}:{t}")
                self.placeholders[holder] = (sym, value, self._term_position(term))
                replace[term] = holder
                rounded.append(value)
            evaluated: Node = Add(tuple(rounded))
            chain.append((APPROX, evaluated))
        else:
            evaluated = self.numeric_form(expr, k)
            chain.append((EQUALS, evaluated))
        found = reader_result(evaluated, k)
        if found is None:
            return None, None
        result = dataclasses.replace(found, source=Source("worked", _text(lhs)))
        relation = EQUALS if exact_value(evaluated) == result.value else APPROX
        chain.append((relation, result))
        item = Item(self.stage.name, self.i, None, lhs, evaluated, result)
        steps.append(Step(lhs, tuple(chain), (item,), col=None, **where))
        holder = sympy.Symbol(f"part:{n}")
        self.placeholders[holder] = (lhs, result, None)
        replace = {expr: holder, **replace}
        return steps, replace

    def _column(self, term: sympy.Expr) -> int | None:
        cols = {self.g.owner(s)[2] for s in term.free_symbols if s not in self.constants}
        return cols.pop() if len(cols) == 1 else None

    def _term_position(self, term: sympy.Expr) -> tuple | None:
        found = [self.position(s) for s in term.free_symbols]
        found = [p for p in found if p is not None]
        return min(found) if found else None

    def _entry(self, j: int, f: sympy.Expr, k: int) -> Step | None:
        lhs, name, D = self.lhs(j), self.stage.name, self.style.decimals
        where = {"stage": name, "row": self.i, "col": j}
        if not f.free_symbols and (f.is_infinite or (self.masked and f.is_Rational)):
            node = self.numeric_form(f, k)
            return Step(lhs, ((EQUALS, node),), note=MASKED, **where)
        text = self.values.text(self.stage, self.i, j, D)
        result = _decimal(text)
        exact = self._exact_result(j)
        if exact is not None:
            result = exact
        symbolic = self.symbolic_form(f)
        numeric = self.numeric_form(f, k)
        chain = [(EQUALS, symbolic)] if self.symbolic or not f.free_symbols else []
        if f.free_symbols:
            chain.append((EQUALS, numeric))
        table = None
        if has_rounded_leaves(numeric):
            decimals = places(result.text)
            found = reader_result(numeric, decimals)
            if found is None:
                return None
            if found.value != result.value:  # the reader's path differs from the table
                result, table = found, result
        closed = self._closed(j, numeric)
        if closed is not None:
            chain.append((EQUALS, closed))
        relation = EQUALS if exact_value(numeric) == result.value else APPROX
        chain.append((relation, result))
        item = Item(name, self.i, j, lhs, numeric, result, table)
        return Step(lhs, tuple(chain), (item,), exact=table, **where)

    def _resolved(self, j: int) -> sympy.Expr:
        """Entry j's local formula, data-dependent branches (ReLU) decided."""
        stage = self.stage
        return stage.op.resolve(stage.local[self.i, j],
                                lambda: self.g.sign(stage.inputs[0], self.i, j))

    def _exact_result(self, j: int) -> Num | None:
        """An entry whose formula, data-dependent branches decided (ReLU), is an exact
        short decimal: that decimal (``max(0, -0.59) = 0``)."""
        resolved = self._resolved(j)
        if resolved.is_Rational:
            value = Fraction(int(resolved.p), int(resolved.q))
            text = terminating(value)
            if text is not None and places(text) <= self.style.decimals:
                return Num(text, value)
        return None

    def _closed(self, j: int, numeric: Node) -> Node | None:
        """With ``exact``: the entry's short closed form, unless the line already is it."""
        if not self.style.exact:
            return None
        try:
            form = self.stage.closed_form(self.i, j, max_ops=self.style.max_ops)
        except ClosedFormTooLarge:
            return None
        if form.is_Rational or form.is_finite is False:
            return None
        node = Converter(_no_leaf, constants_first=True)(form)
        return None if node == numeric else node


def _put(f: sympy.Expr, replace: dict, expr: sympy.Expr) -> sympy.Expr:
    """``f`` with a part (and its rounded terms) replaced by their placeholders.  A part
    that is a sum also replaces its terms inside a longer sum, or their negatives:
    -a_0 g_0 - a_1 g_1 + g_2 with the part a_0 g_0 + a_1 g_1 becomes g_2 - Σ."""
    f = f.xreplace(replace)
    if not expr.is_Add or expr not in replace:
        return f
    holder, terms = replace[expr], set(expr.args)
    negated = {-t for t in terms}

    def swap(e: sympy.Expr) -> sympy.Expr:
        args = set(e.args)
        if terms <= args:
            return holder + sympy.Add(*(args - terms))
        return -holder + sympy.Add(*(args - negated))
    return f.replace(lambda e: e.is_Add and (terms <= set(e.args) or negated <= set(e.args)),
                     swap)


def _text(node: Node) -> str:
    from symformer.worked.render_text import text

    return text(node)


def _no_leaf(s: sympy.Symbol) -> Node:
    raise TypeError(f"unexpected symbol {s} in a closed form")


def worked_steps(stage: Stage, row: int, style: Style | None = None,
                 values: Values | None = None, symbolic: bool = True,
                 parts: bool = True) -> Worked:
    """The worked lines of ``stage`` for the token in row ``row``."""
    builder = _Row(stage, row, style or Style(), values or Values(), symbolic, parts)
    return Worked(stage.name, row, tuple(builder.steps()))


def entry_steps(stage: Stage, row: int, decimals: int,
                values: Values | None = None, symbolic: bool = False) -> list[Step | None]:
    """Each entry's worked line, by default without its symbolic form (the trace's);
    None for an entry that is a copy or an exact constant (nothing to work out)."""
    builder = _Row(stage, row, Style(decimals), values or Values(), symbolic=symbolic,
                   parts=False)
    out: list[Step | None] = []
    for j, f in enumerate(builder.formulas):
        if f.is_Symbol or (f.is_Rational and not builder.masked):
            out.append(None)
        else:
            out.append(builder._search(lambda k, j=j, f=f: builder._entry(j, f, k),
                                       f"entry {j}"))
    return out
