"""Helper symbols an author defines beside the equation: ``, \\quad \\mathrm{RMS}(x) = ...``.

A line of a claimed equation whose left-hand side is used on another line's right is a
*definition*, not a claim about the stage: ``\\mathrm{RMS}(x) = \\sqrt{\\frac{1}{d}\\sum_i
x_i^2 + \\epsilon}`` beside ``\\bar{x}_i = \\frac{x_i}{\\mathrm{RMS}(x)} g_i``; Adam's
``\\hat{m}_t = m_t/(1-\\beta_1^t)`` above the update that divides by it.  Every use is
replaced by the definition's right-hand side (a function's parameters by the arguments
of the use), in the parsed tree — never in the text — and the lines left are judged.
A symbol used with other indices than its definition's, a definition that uses itself
or one nested deeper than :data:`MAX_EXPANSIONS`, is a one-line error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction

from symformer.errors import InputError
from symformer.verify import latex_math as lm

#: Definitions expanded inside one another at most this deep.
MAX_EXPANSIONS = 8

Key = tuple


@dataclasses.dataclass(frozen=True)
class Definition:
    """``name(params) = body`` or ``name = body`` (``params`` empty)."""

    key: Key
    params: tuple[lm.Sym, ...]
    body: lm.Node
    shown: str
    lhs: lm.Sym | None = None  # a symbol's definition (``g_i``): its left-hand side


def split_definitions(chains: list[lm.Chain],
                      claimed: Callable[[lm.Chain], bool] | None = None
                      ) -> tuple[list[lm.Chain], list[Definition]]:
    """The chains that claim something of the stage, and the definitions among them
    (``claimed``: a line that is a claim even when another uses its left-hand side --
    a training recurrence's ``m_t``, a stage of the run)."""
    uses = [_uses(rhs) for chain in chains for rhs in chain.rhs]
    claims, found = [], []
    for k, chain in enumerate(chains):
        definition = None if claimed is not None and claimed(chain) else _definition(chain)
        others = {_unindexed(key) for j, keys in enumerate(uses) if j != k for key in keys}
        if definition is not None and _unindexed(definition.key) in others \
                and len(chain.rhs) == 1:
            found.append(definition)
        else:
            claims.append(chain)
    if found and not claims:
        raise InputError("cannot read the equation: every line defines a symbol another "
                         "uses, and none is about the stage")
    return claims, found


def expand(chain: lm.Chain, definitions: list[Definition]) -> lm.Chain:
    """``chain`` with every use of a definition replaced by its body."""
    if not definitions:
        return chain
    table = {d.key: d for d in definitions}
    shared: dict[Key, lm.Node] = {}
    return dataclasses.replace(chain, rhs=tuple(_expand(r, table, 0, shared)
                                                for r in chain.rhs))


def _expand(node: lm.Node, table: dict[Key, Definition], depth: int,
            shared: dict[Key, lm.Node]) -> lm.Node:
    """``node`` with its uses expanded; a plain symbol's expansion is built once and
    shared by every use (a definition used 60 times in one used 60 times is one
    subtree, not 3,600 copies: :mod:`.equation_cost` counts its uses before any
    evaluation)."""
    def visit(n: lm.Node) -> lm.Node | None:
        regrouped = _applied(n, table)
        if regrouped is not None:  # a \mathrm{RMS}(x): f(x) after other factors
            return _expand(regrouped, table, depth, shared)
        found = _use(n, table)
        if found is None:
            return None
        definition, args, renamed = found
        if depth >= MAX_EXPANSIONS:
            raise InputError(f"cannot read the definition of {definition.shown}: it uses "
                             f"itself, or definitions nest more than {MAX_EXPANSIONS} deep")
        plain = not definition.params and not renamed
        if plain and definition.key in shared:
            return shared[definition.key]
        body = definition.body
        if definition.params:
            if len(args) != len(definition.params):
                raise InputError(f"cannot read {definition.shown} at column {n.col}: it "
                                 f"takes {len(definition.params)} arguments, not {len(args)}")
            mapping = {_sym_key(p): a for p, a in zip(definition.params, args)}
            body = _map(body, lambda m: _argument(m, mapping))
        elif renamed:
            body = _renamed(body, renamed, definition, n)
        out = _expand(body, table, depth + 1, shared)
        if plain:
            shared[definition.key] = out
        return out

    return _map(node, visit)


def _use(n: lm.Node, table: dict[Key, Definition]
         ) -> tuple[Definition, tuple, dict[str, lm.Token]] | None:
    """(the definition, the arguments, its index letters renamed) when ``n`` uses one:
    ``\\mathrm{M}(x + m)``, ``\\hat{m}``, ``g_j`` for ``g_i = ...`` (i read as j)."""
    if isinstance(n, lm.Binary) and n.op == "jux" and isinstance(n.left, lm.Sym):
        d = table.get(_sym_key(n.left))
        if d is not None and d.params:
            right = n.right
            return d, right.items if isinstance(right, lm.Arguments) else (right,), {}
    if isinstance(n, lm.Sym):
        key = _sym_key(n)
        d = table.get(key)
        if d is not None and not d.params:
            return d, (), {}
        other = next((d for k, d in table.items() if k[0] == key[0] and k[2:] == key[2:]
                      and k[1] != key[1] and not d.params), None)
        if d is None and other is not None:
            renamed = _index_renaming(other, n)
            if renamed is None:
                raise InputError(f"cannot read {n.show()} at column {n.col}: {other.shown} "
                                 f"is defined with other indices (a use may rename index "
                                 f"letters one for one: g_j for g_i)")
            return other, (), renamed
    return None


def _applied(n: lm.Node, table: dict[Key, Definition]) -> lm.Node | None:
    """A product written side by side in which a defined function is applied after
    other factors (``a\\,\\mathrm{GELU}'(h)`` parses as (a GELU') h): the same product
    with the function and its argument grouped, so that the use is expanded; None when
    there is none to regroup."""
    if not (isinstance(n, lm.Binary) and n.op == "jux"):
        return None
    factors = lm.juxtaposed(n)
    for k, f in enumerate(factors[:-1]):
        if k and isinstance(f, lm.Sym) and (d := table.get(_sym_key(f))) is not None \
                and d.params:
            grouped = lm.Binary("jux", f, factors[k + 1], col=f.col, grouped=True)
            items = [*factors[:k], grouped, *factors[k + 2:]]
            out = items[0]
            for item in items[1:]:
                out = lm.Binary("jux", out, item, col=n.col)
            return out
    return None


def _letters(sym: lm.Sym | None) -> list[lm.Token] | None:
    """A subscript of plain index letters or whole numbers (``i``, ``ij``, ``i,j``,
    ``0``), as its tokens; None for anything else (``2i+1``)."""
    if sym is None or not sym.sub:
        return None
    tokens = [t for t in sym.sub if not (t.kind == "char" and t.text in ",{}")]
    if not tokens or any(t.kind not in ("letter", "num") for t in tokens):
        return None
    return tokens


def _index_renaming(definition: Definition, use: lm.Sym) -> dict[str, lm.Token] | None:
    """The definition's index letters -> the use's (``g_i`` used as ``g_j``: i -> j)."""
    mine, theirs = _letters(definition.lhs), _letters(use)
    if mine is None or theirs is None or len(mine) != len(theirs) \
            or any(t.kind != "letter" for t in mine):
        return None
    return {a.text: b for a, b in zip(mine, theirs)}


def _renamed(body: lm.Node, renamed: dict[str, lm.Token], definition: Definition,
             use: lm.Sym) -> lm.Node:
    """``body`` with its index letters renamed (in subscripts and index expressions); a
    sum over a letter the renaming brings in is refused (it would capture it)."""
    brought = {t.text for t in renamed.values() if t.kind == "letter"}

    def tokens(sub: tuple[lm.Token, ...] | None) -> tuple[lm.Token, ...] | None:
        if sub is None:
            return None
        return tuple(lm.Token(renamed[t.text].kind, renamed[t.text].text, t.col, t.spaced)
                     if t.kind == "letter" and t.text in renamed else t for t in sub)

    def visit(m: lm.Node) -> lm.Node | None:
        if isinstance(m, lm.Reduce) and brought & set(m.indices):
            raise InputError(f"cannot read {use.show()} at column {use.col}: "
                             f"{definition.shown} sums over a letter of the use's index")
        if isinstance(m, lm.Sym):
            if not m.sub and not m.sup and m.base in renamed:
                t = renamed[m.base]
                return lm.Num(Fraction(t.text), col=m.col) if t.kind == "num" \
                    else lm.Sym(t.text, col=m.col)
            if m.sub:
                return dataclasses.replace(m, sub=tokens(m.sub))
        if isinstance(m, lm.Subscripted):
            return dataclasses.replace(m, operand=_map(m.operand, visit),
                                       sub=tokens(m.sub))
        return None

    return _map(body, visit)


def _argument(m: lm.Node, mapping: dict[Key, lm.Node]) -> lm.Node | None:
    """A function parameter's use in the body replaced by the argument: ``z`` by it,
    ``z_k`` by its entry (``x_k`` for a symbol ``x``, ``(x + m)_k`` for an expression)."""
    if not isinstance(m, lm.Sym):
        return None
    found = mapping.get(_sym_key(m))
    if found is not None or not m.sub:
        return found
    arg = mapping.get(_sym_key(dataclasses.replace(m, sub=None)))
    if arg is None:
        return None
    if isinstance(arg, lm.Sym) and not arg.sub and not arg.grad:
        return dataclasses.replace(arg, sub=m.sub, col=m.col)
    return lm.Subscripted(arg, m.sub, col=m.col)


def _definition(chain: lm.Chain) -> Definition | None:
    lhs = chain.lhs
    if isinstance(lhs, lm.Binary) and lhs.op == "jux" and isinstance(lhs.left, lm.Sym):
        args = lhs.right.items if isinstance(lhs.right, lm.Arguments) else (lhs.right,)
        if all(isinstance(a, lm.Sym) for a in args):
            return Definition(_sym_key(lhs.left), tuple(args), chain.rhs[0],
                              f"{lhs.left.show()}({', '.join(a.show() for a in args)})")
    if isinstance(lhs, lm.Sym) and not lhs.grad:
        return Definition(_sym_key(lhs), (), chain.rhs[0], lhs.show(), lhs)
    return None


def _uses(node: lm.Node) -> set[Key]:
    found: set[Key] = set()

    def visit(n: lm.Node) -> None:
        if isinstance(n, lm.Sym):
            found.add(_sym_key(n))
        return None

    _map(node, visit)
    return found


def _unindexed(key: Key) -> Key:
    return (key[0], *key[2:])


def _sym_key(sym: lm.Sym) -> Key:
    return (sym.base, sym.sub_text if sym.sub else None,
            sym.sup_text if sym.sup else None, sym.primes, sym.grad)


def _map(node: lm.Node, f: Callable[[lm.Node], lm.Node | None]) -> lm.Node:
    """``node`` rebuilt bottom-up where ``f`` returns a replacement (top-down: a node
    ``f`` replaces is not entered)."""
    replaced = f(node)
    if replaced is not None:
        return replaced
    changes = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if isinstance(value, lm.Node):
            new = _map(value, f)
            if new is not value:
                changes[field.name] = new
        elif isinstance(value, tuple) and any(isinstance(v, lm.Node) for v in value):
            new_items = tuple(_map(v, f) if isinstance(v, lm.Node) else _map_pair(v, f)
                              if isinstance(v, tuple) else v for v in value)
            if new_items != value:
                changes[field.name] = new_items
        elif isinstance(value, tuple) and any(isinstance(v, tuple) for v in value):
            new_items = tuple(_map_pair(v, f) if isinstance(v, tuple) else v for v in value)
            if new_items != value:
                changes[field.name] = new_items
    return dataclasses.replace(node, **changes) if changes else node


def _map_pair(items: tuple, f: Callable[[lm.Node], lm.Node | None]) -> tuple:
    """A tuple inside a field (a case distinction's (value, condition) rows)."""
    return tuple(_map(v, f) if isinstance(v, lm.Node) else v for v in items)


def rebuilt(node: lm.Node, f: Callable[[lm.Node], lm.Node | None]) -> lm.Node:
    """``node`` with every node ``f`` replaces replaced (top-down)."""
    return _map(node, f)
