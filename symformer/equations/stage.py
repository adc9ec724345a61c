"""A stage's general equation: its operation's index equation bound to the stage.

The bind stage of :mod:`symformer.equations`' pipeline, and its entry point:
:func:`stage_equation` (bound lines) and :func:`equation_lines` (their printed form,
what every format shows) run parse, bind, transform and render for one stage.

A forward stage's equation is ``stage.op.equation()`` with its arrays bound to the
stage, its input stages and its operation's parameters.  A gradient stage dL/dS sums
one backward rule per consumer C of S (``C.op.backward_equation(wrt)``); with one
consumer the rule's left-hand side is dL/dS itself, with several each rule defines a
named contribution ``δ^{(C)}`` and a first line adds them up -- a path's
contribution is never written as the whole derivative.

:class:`Bound` keeps what the printers, the proofs and ``equations.json`` need: the
symbols (from the operations' :class:`~symformer.notation_types.Notation`), the exact
matrices (the stage symbols the local formula is written over, the weights) and the
stage or parameter each array name stands for.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from symformer.equations import render, transform
from symformer.equations.evaluate import entries
from symformer.equations.ir import IndexEquation, array_name
from symformer.equations.latex import entry_latex
from symformer.equations.symbols import FIXED, spell
from symformer.equations.text import entry_text
from symformer.lazy import sympy
from symformer.notation_types import Notation
from symformer.words import in_sentence

if TYPE_CHECKING:
    from symformer.ops.gradient import Term


@dataclass(frozen=True)
class Line:
    """One printed line: ``lhs = rhs`` in LaTeX, its text, its plain form, a remark."""

    lhs: str
    rhs: str
    text: str
    plain: str
    remark: str = ""

    @property
    def latex(self) -> str:
        """``lhs = rhs``."""
        return f"{self.lhs} = {self.rhs}"


@dataclass
class Bound:
    """An index equation bound to stages: symbols, exact matrices, what each name is.

    ``sources`` maps an array name to ``{"stage": name}`` or ``{"parameter": name,
    "stage": owner}`` (``{"term": k}`` for a named contribution of a gradient).
    """

    eq: IndexEquation
    symbols: dict[str, Notation]
    matrices: dict[str, sympy.Matrix]
    sources: dict[str, dict[str, Any]]
    shape: tuple[int, int]
    remark: str = ""
    sizes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for size, (array, axis) in self.eq.sizes.items():
            self.sizes[size] = self.matrices[array].shape[axis]
        for name in self.eq.scalars:
            self.symbols.setdefault(name, _EPS if name == "eps" else spell(name))
        for name, (latex, text) in self.eq.symbols.items():
            self.symbols[name] = Notation(latex, text, "")
        for name in self.eq.arrays:
            self.symbols.setdefault(name, spell(name))
        printed = self._renamed(self.eq.statements + self.eq.let_statements)
        count = len(self.eq.statements)
        #: The lines as printed (a named inner quantity by its name) and as evaluated
        #: and proved (the quantity read in: ``statements``).
        self.printed, self.where = printed[:count], printed[count:]
        definitions = {array_name(t): v for t, v in self.where}
        self.statements = [(t, transform.inline_lets(definitions, v))
                           for t, v in self.printed]

    def _renamed(self, statements: list[tuple[ast.expr, ast.expr]]
                 ) -> list[tuple[ast.expr, ast.expr]]:
        """The equation's trees with each array named as it prints and each sum's index
        off the symbols shown (:func:`~symformer.equations.transform.renamed`); the
        names are moved in the tables too."""
        arrays = transform.printed_names(self.eq, {name: self.symbols[name].text
                                                   for name in self.eq.arrays})
        for old, new in arrays.items():
            for table in (self.symbols, self.matrices, self.sources):
                if old in table:
                    table[new] = table.pop(old) if new != old else table[old]
        self.arrays = {arrays[n]: role for n, role in self.eq.arrays.items()}
        shown = {self.symbols[n].text for n in self.arrays} | set(arrays.values())
        return transform.renamed(statements, arrays, self.eq, shown)

    def lines(self, where: bool = True) -> list[Line]:
        """The printed lines (the remark on the last), then (``where``) the named inner
        quantities they use.  A line's plain form reads those quantities in, so that it
        is evaluated on its own."""
        out = []
        for k, (target, value) in enumerate(self.printed):
            remark = self.remark if k == len(self.printed) - 1 else ""
            out.append(self._line(target, value, self.statements[k][1], remark))
        if where:
            out.extend(self._line(t, v, v, remark)
                       for (t, v), (_, remark) in zip(self.where, self.eq.lets))
        return out

    def _line(self, target: ast.expr, value: ast.expr, evaluated: ast.expr,
              remark: str) -> Line:
        lhs, rhs = render.latex(target, self.symbols), render.latex(value, self.symbols)
        shown = f"{render.text(target, self.symbols)} = {render.text(value, self.symbols)}"
        return Line(lhs, rhs, f"{shown}  ({remark})" if remark else shown,
                    f"{render.plain(target)} = {render.plain(evaluated)}", remark)

    def values(self) -> dict[tuple[int, int], sympy.Expr]:
        """Every entry's exact value from the equation (over the bound matrices)."""
        found = entries(self.eq, self.matrices, self.sizes, self.shape, self.statements)
        return {key: value for key, (_, value) in found.items()}


#: ε, written one way in every equation.
_EPS = FIXED["epsilon"]


class Symbols:
    """Where an equation's symbols come from: by default each operation's
    :class:`~symformer.notation_types.Notation` (a stage's ``op.symbol``, several heads'
    outputs with ``^(k)``, a parameter's ``parameter_notation``).  A per-example
    notation table (one symbol per quantity, layer and head superscripts) is a
    subclass passed to :func:`stage_equation`; every format then prints its symbols."""

    def stage(self, stage: Any) -> Notation:
        """The symbol of a stage, with its layer and head superscript."""
        from symformer.notation import notation
        return notation(stage)

    def inputs(self, stage: Any) -> list[Notation]:
        """The symbols of a stage's inputs, as its equation writes them."""
        from symformer.notation import notation
        return [notation(stage.derivation[name]) for name in stage.inputs]

    def parameter(self, stage: Any, name: str) -> Notation:
        """The symbol of the parameter ``name`` of a stage's operation (``W_Q^{(2)}``)."""
        from symformer.notation import parameter
        return parameter(stage, name)


#: The operations' own notation.
OPERATION_SYMBOLS = Symbols()


def _constant(op: Any, role: str, shape: tuple[int, int]) -> tuple[sympy.Matrix, Any]:
    """A constant array the operation holds (``const:ATTR``): its exact matrix and the
    JSON-able value.  Token ids are a column; masked entries a 0/1 matrix of ``shape``."""
    value = getattr(op, role.removeprefix("const:"))
    if callable(value):
        value = value()
    if isinstance(value, frozenset):
        m = sympy.Matrix(*shape, lambda i, j: int((i, j) in value))
    elif isinstance(value, (tuple, list)):
        m = sympy.Matrix([[v] for v in value])
    else:
        m = sympy.Matrix(value)
    return m, [[str(v) for v in m.row(i)] for i in range(m.rows)]


def _bind(eq: IndexEquation, owner: Any, stages: dict[str, tuple[Notation, Any]],
          names: Symbols) -> tuple[dict[str, Notation], dict[str, sympy.Matrix],
                                   dict[str, dict[str, Any]]]:
    """Symbols, matrices and sources of ``eq``'s arrays: a stage role (``out``, ``in0``,
    ``grad``, ``result``) from ``stages`` (role -> its notation and stage), the rest
    from ``owner``, the stage whose operation holds the parameters and constants."""
    g = owner.derivation
    symbols: dict[str, Notation] = {}
    matrices: dict[str, sympy.Matrix] = {}
    sources: dict[str, dict[str, Any]] = {}
    for name, role in eq.arrays.items():
        if role in stages:
            symbols[name], stage = stages[role]
            matrices[name] = g.symbols(stage.name)
            sources[name] = {"stage": stage.name}
        elif role == "let":  # a named inner quantity: read into the lines it is used in
            continue
        elif role.startswith("const:"):
            matrices[name], value = _constant(owner.op, role, owner.shape)
            sources[name] = {"constant": value}
        else:
            parameter = role.removeprefix("param:")
            matrices[name] = owner.op.parameters()[parameter]
            symbols[name] = names.parameter(owner, parameter)
            sources[name] = {"parameter": parameter, "stage": owner.name}
    return symbols, matrices, sources


def _inputs(stage: Any, names: Symbols) -> dict[str, tuple[Notation, Any]]:
    g = stage.derivation
    return {f"in{k}": (notation, g[name]) for k, (notation, name) in
            enumerate(zip(names.inputs(stage), stage.inputs))}


def forward(stage: Any, names: Symbols = OPERATION_SYMBOLS) -> Bound | None:
    """The stage's forward equation bound to it (None: its operation declares none)."""
    g = stage.derivation
    eq = stage.op.equation([g[name].shape for name in stage.inputs])
    if eq is None:
        return None
    roles = {"out": (names.stage(stage), stage), **_inputs(stage, names)}
    return Bound(eq, *_bind(eq, stage, roles, names), stage.shape, eq.remark)


def rule(stage: Any, consumer: Any, grad: Any, wrt: int | str,
         result: Notation | None = None, remark: str = "",
         names: Symbols = OPERATION_SYMBOLS) -> Bound | None:
    """The backward rule of ``consumer`` for ``wrt`` bound to the gradient ``stage``
    (``result``: the left-hand side's symbol, default the gradient's own)."""
    g = stage.derivation
    eq = consumer.op.backward_equation(wrt, [g[name].shape for name in consumer.inputs])
    if eq is None:
        return None
    if grad.op.constant is not None:  # dL/dL = 1: the loss's own gradient, as a number
        eq = transform.constant_grad(eq, grad.op.constant)
    roles = {"result": (result or names.stage(stage), stage),
             "out": (names.stage(consumer), consumer), "grad": (names.stage(grad), grad),
             **_inputs(consumer, names)}
    return Bound(eq, *_bind(eq, consumer, roles, names), stage.shape, remark or eq.remark)


@dataclass(frozen=True)
class StageEquation:
    """Everything printed for one stage: its lines and the bound equations behind them.

    ``total`` is the first line of a gradient with several contributions (their sum);
    ``parts`` the bound equations, one per operation rule.
    """

    stage: Any
    parts: tuple[Bound, ...]
    total: Line | None = None

    def lines(self) -> list[Line]:
        """Every printed line, in order."""
        head = [self.total] if self.total is not None else []
        return head + [line for part in self.parts for line in part.lines()]


@dataclass(frozen=True)
class Rule:
    """One term of a gradient stage: the consumer stage, its gradient stage, the term."""

    consumer: Any
    grad: Any
    term: Term


def rules(stage: Any) -> list[Rule]:
    """The terms of a gradient stage with the stages they read, in order."""
    g, k, out = stage.derivation, 0, []
    for term in stage.op.terms:
        consumer = g[stage.inputs[k + term.arity]]
        grad = g[stage.inputs[k + term.arity + 1]]
        out.append(Rule(consumer, grad, term))
        k += term.arity + 2
    return out



def _index_names(shape: tuple[int, int], per_row: bool) -> list[str]:
    if shape == (1, 1):
        return []
    if shape[1] == 1:
        return ["i"]
    return ["j"] if shape[0] == 1 and not per_row else ["i", "j"]


def _align_indices(bound: Bound, wanted: list[str]) -> None:
    """A contribution's lines written with the free indices ``wanted`` of the sum it is
    a term of (:func:`~symformer.equations.transform.index_swap`)."""
    if bound.eq.ranges or not bound.printed:
        return
    arrays = set(bound.arrays)
    swap = transform.index_swap(bound.printed[0][0], bound.eq, arrays, wanted)
    if swap is None:
        return
    bound.printed, bound.where, bound.statements = (  # copies: the lists share trees
        transform.rename_indices(trees, swap, arrays)
        for trees in (bound.printed, bound.where, bound.statements))


def _contribution(k: int, consumer: Any, unique: bool, names: Symbols) -> Notation:
    symbol = names.stage(consumer)
    mark = symbol if unique else Notation(str(k + 1), str(k + 1), "")
    return Notation(rf"\delta^{{({mark.latex})}}", f"δ^({mark.text})",
                    f"the term through {in_sentence(symbol.title)}")


#: The width of a head's query, key or value, by the stage's kind: what a size of a
#: contribution through it is written as when the contributions' sizes differ.
_HEAD_WIDTHS = {"Q": ("d_{k}", "d_k"), "K": ("d_{k}", "d_k"), "V": ("d_{v}", "d_v")}


def _distinct_sizes(parts: list[Bound], consumers: list[Any]) -> None:
    """A size two contributions name alike but that differs between them (``d_out``: the
    width of q through W_Q, of v through W_V) is written as each consumer's width,
    ``d_{k}`` and ``d_{v}``, so that the printed sum reads one size per symbol (and
    ``check`` reads it back).  Only a head's q, k and v have such names: any other
    clash prints as it did."""
    for name in {n for part in parts for n in part.sizes}:
        clashing = [(part, consumer) for part, consumer in zip(parts, consumers)
                    if name in part.sizes]
        if len({part.sizes[name] for part, _ in clashing}) < 2 \
                or any(c.kind not in _HEAD_WIDTHS for _, c in clashing):
            continue
        for part, consumer in clashing:
            latex, text = _HEAD_WIDTHS[consumer.kind]
            part.symbols[name] = Notation(latex, text, "")


def gradient(stage: Any, names: Symbols = OPERATION_SYMBOLS) -> StageEquation | None:
    """A gradient stage's equation: its consumers' rules (None when one has no rule)."""
    found = rules(stage)
    if len(found) == 1:
        (r,) = found
        bound = rule(stage, r.consumer, r.grad, r.term.wrt, names=names)
        return None if bound is None else StageEquation(stage, (bound,))
    marks = [names.stage(c.consumer).latex for c in found]
    unique = len(set(marks)) == len(marks)
    parts, terms = [], []
    for k, r in enumerate(found):
        mark = _contribution(k, r.consumer, unique, names)
        bound = rule(stage, r.consumer, r.grad, r.term.wrt, result=mark, remark=mark.title,
                     names=names)
        if bound is None:
            return None
        _align_indices(bound, _index_names(stage.shape, False))
        parts.append(bound)
        terms.append(mark)
    _distinct_sizes(parts, [r.consumer for r in found])
    index = _index_names(stage.shape, False)
    symbol = names.stage(stage)
    lhs = entry_latex(symbol.latex, index)
    lhs_text = entry_text(symbol.text, index)
    rhs = " + ".join(entry_latex(n.latex, index) for n in terms)
    rhs_text = " + ".join(entry_text(n.text, index) for n in terms)
    sub = f"[{', '.join(index)}]" if index else ""
    plain = f"d{sub} = " + " + ".join(f"t{k}{sub}" for k in range(len(terms)))
    return StageEquation(stage, tuple(parts),
                         Line(lhs, rhs, f"{lhs_text} = {rhs_text}", plain,
                              "a sum over the paths from the loss"))


def stage_equation(stage: Any, names: Symbols = OPERATION_SYMBOLS) -> StageEquation | None:
    """The general equation of any stage (None: its operation declares none), with the
    symbols ``names`` gives (default: the operations' own notation).

    The whole pipeline: the operation's declared lines are parsed
    (:attr:`IndexEquation.statements <symformer.equations.ir.IndexEquation.statements>`),
    bound to the stage (:func:`forward`, or :func:`gradient`'s rules), transformed
    (:class:`Bound`, :mod:`symformer.equations.transform`) and, by
    :meth:`StageEquation.lines`, rendered (:mod:`symformer.equations.render`)."""
    if stage.op.sums_paths:
        return gradient(stage, names)
    bound = forward(stage, names)
    return None if bound is None else StageEquation(stage, (bound,))


def equation_sizes(stages: Iterable[Any]) -> set[str]:
    """The size names (``d_v``) the stages' printed equations use, as the operations
    declare them (:attr:`IndexEquation.sizes <symformer.equations.ir.IndexEquation.sizes>`):
    what a document's notation table must define
    (:func:`symformer.notation.glossary`'s ``sizes``)."""
    found: set[str] = set()
    for stage in stages:
        try:
            equation = stage_equation(stage)
        except NotImplementedError:
            continue
        for part in equation.parts if equation is not None else ():
            found.update(part.eq.sizes)
    return found


def equation_lines(stage: Any) -> tuple[Line, ...]:
    """The general equation of any stage as printed everywhere (the export, the trace,
    slides, exercise sheets): :func:`stage_equation`'s lines; a gradient's lines are its
    consumers' backward rules, each path's contribution named, and their sum.  Raises
    NotImplementedError for an operation that declares no equation."""
    found = stage_equation(stage)
    if found is None:
        raise NotImplementedError(f"{stage.name}: the operation {stage.op.name!r} declares "
                                  f"no equation (Operation.equation/backward_equation)")
    return tuple(found.lines())


def result_name(bound: Bound) -> str:
    """The array name on the left-hand side of a bound equation's lines."""
    return array_name(bound.statements[0][0])
