"""An author's symbols bound to an example: stages, weights, sizes and indices.

The table is the example's own notation (:mod:`symformer.notation`): every stage's
symbol (``q^{(1)}``, ``\\alpha``, ``\\sigma^2``, ``y'``), its matrix symbol (``Q``),
every weight's (``W_{Q}^{(1)}``, ``\\gamma'``), every gradient's (``\\partial
L/\\partial k^{(1)}``) and the glossary's sizes and constants (``n``, ``d``, ``d_k``,
``\\varepsilon``).  Each notation is read with the equation grammar itself, so an
author's ``W_Q`` and the notes' ``W_{Q}`` are one symbol.  A symbol written without
its layer/head superscript means the one nearest the claimed stage (most leading
name parts in common); two equally near are an error asking for ``where``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.notation import capital, glossary, notation, parameter_symbol, symbol, where
from symformer.verify.latex_math import GREEK, Parser, Sym, tokenize

_WHERE = re.compile(r"^(.*?)\((\d+(?:,\d+)*)\)$")
_ANY_LAYER = re.compile(r"^(?:\(([a-zA-Z])\)|\[([a-zA-Z])\]|<([a-zA-Z])>)$")


@dataclass(frozen=True)
class Target:
    """What a symbol stands for: a stage (``stage``), a weight of a stage's operation
    (``stage`` and ``parameter``), or a size/constant (``scalar``, its name)."""

    stage: str | None = None
    parameter: str | None = None
    scalar: str | None = None
    matrix: bool = False   # written as the whole matrix (Q, W_Q), not one row (q)
    #: a block of the matrix (``STAGE[0:2]``, ``STAGE[:, 0:2]``: FlashAttention's tile
    #: of keys): (first row, end row), (first column, end column), 0-based and
    #: half-open; None: every row (column)
    block: tuple[tuple[int, int] | None, tuple[int, int] | None] | None = None
    #: a constant array of an operation (token ids, a pooled position), exact rows
    constant: tuple | None = None

    @property
    def anchor(self) -> str:
        """The stage the symbol sits at (for nearness)."""
        return (self.stage or "").removeprefix("grad.")

    def describe(self) -> str:
        """For messages: the stage or ``stage's W_Q``."""
        if self.constant is not None:
            return "a constant of the stage's equation"
        if self.parameter:
            return f"{self.stage}'s {self.parameter}"
        return self.stage or self.scalar or "?"


#: A symbol's key: (base, subscript as a name, superscript as a name, primes, grad).
Key = tuple[str, str, str, int, bool]


def read_symbol(latex: str) -> Sym:
    """A notation's LaTeX (``W_{Q}^{(1)}``, ``\\partial L/\\partial z``) as a symbol."""
    parser = Parser(tokenize(latex))
    node = parser.factor()
    if not isinstance(node, Sym):
        raise InputError(f"cannot read the symbol {latex!r}")
    parser.skip_layout()
    if parser.peek() is not None:
        raise InputError(f"cannot read the symbol {latex!r}: "
                         f"{parser.peek().text} at column {parser.peek().col}")
    return node


def split_where(sym: Sym) -> tuple[str, str]:
    """(the superscript without a layer/head marker, the marker: ``1,2`` or '').  A
    marker in letters, ``W^{(l)}``, ``h^{[l]}`` (any layer), is the one nearest the
    claimed stage: no marker."""
    sup = sym.sup_text
    if _ANY_LAYER.match(sup):
        return "", ""
    m = _WHERE.match(sup)
    return (m.group(1), m.group(2)) if m else (sup, "")


def _matrix_symbols(stage) -> list[str]:
    """The whole stage's symbols before their superscript: ``Q`` for rows of ``q`` (the
    rule of :func:`symformer.notation.matrix_latex`, which adds the superscript); an
    FFN activation's ``\\tilde{H}`` as the notes print it, and ``A`` as authors wrote
    it before (the notes' A is the attention matrix, which ``where`` names)."""
    latex = symbol(stage).latex
    if not re.fullmatch(r"[a-z]", latex):
        return [latex]
    return list(dict.fromkeys((capital(stage, latex), latex.upper())))


def key_of(sym: Sym, sub: bool = True, sup: bool = True) -> Key:
    """The key of ``sym``, with or without its subscript and superscript as names."""
    sup_text, _ = split_where(sym)
    return (_canonical(sym.base), sym.sub_text if sub else "", sup_text if sup else "",
            sym.primes, sym.grad)


def _canonical(base: str) -> str:
    return "varepsilon" if base == "epsilon" else base


class SymbolTable:
    """Every symbol of a derivation's notation, what it stands for, where it sits."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self.entries: dict[Key, list[tuple[Target, str]]] = {}
        stages = list(g)
        for s in stages:
            grad = s.name.startswith("grad.")
            if grad and not s.op.is_gradient:
                continue
            self._add(notation(s).latex,  # a weight's gradient, a Jacobian: the matrix
                      Target(stage=s.name, matrix=s.op.of_weight or s.op.about_input),
                      grad)
            if grad and s.op.of_stage and s.name.removeprefix("grad.") in g.stages:
                source = g[s.name.removeprefix("grad.")]
                for matrix in _matrix_symbols(source):
                    self._add(matrix, Target(stage=s.name, matrix=True), True,
                              forced_where=where(source))
            if grad:
                continue
            if s.op.matrix_form == "product" and s.head:  # the paper's head_i (Concat's)
                self._add(rf"\mathrm{{head}}_{{{s.head}}}", Target(stage=s.name, matrix=True))
            for matrix in _matrix_symbols(s):
                if matrix != symbol(s).latex:
                    self._add(matrix, Target(stage=s.name, matrix=True),
                              forced_where=where(s))
            note = s.op.target_symbol  # the mse target, as its operation names it
            if note is not None:
                self._add(note.latex, Target(stage=s.name, parameter="target",
                                             matrix=True))
            for name in s.op.parameters():
                self._add(parameter_symbol(s, name).latex,
                          Target(stage=s.name, parameter=name, matrix=True),
                          forced_where=where(s))
        self.scalars: dict[Key, str] = {}
        for note in glossary([s for s in stages if not s.name.startswith("grad.")]):
            for part in note.latex.split(","):
                part = part.strip()
                try:
                    sym = read_symbol(part)
                except InputError:
                    continue
                if part in ("n", "d", "d_{k}", r"d_{\text{in}}", r"\varepsilon"):
                    self.scalars[key_of(sym)] = sym.show()
        # the glossary's d is the model's width; d_out and d_v as its d_in and d_k
        for sub, name in (("model", "d"), ("out", "d_{out}"), ("v", "d_{v}"),
                          ("ff", "d_{ff}")):
            self.scalars[("d", sub, "", 0, False)] = name
        if any(s.op.name in ("adam_step", "sgd_step") for s in stages):
            # a training run's: the learning rate, Adam's betas, the step t
            for key, name in ((("eta", ""), "lr"), (("beta", "1"), "beta1"),
                              (("beta", "2"), "beta2"), (("t", ""), "t")):
                self.scalars[(*key, "", 0, False)] = name

    def _add(self, latex: str, target: Target, grad: bool = False,
             forced_where: str | None = None) -> None:
        if latex in GREEK:  # an objective's parameter named theta: the author's \theta
            latex = "\\" + latex
        try:
            sym = read_symbol(latex)
        except InputError:
            return
        if grad and not sym.grad:
            sym = Sym(sym.base, sym.sub, sym.sup, sym.primes, True)
        sup, marker = split_where(sym)
        if forced_where is not None:
            marker = forced_where
        key = (_canonical(sym.base), sym.sub_text, sup, sym.primes, sym.grad)
        self.entries.setdefault(key, []).append((target, marker))

    def lookup(self, sym: Sym, near: str, named: bool | None = None
               ) -> tuple[Target, bool, bool] | None:
        """(target, subscript used as a name, superscript used as a name) of an
        author's symbol, nearest ``near`` (a stage name); None: not in the table.
        ``named``: only with the subscript as a name (True) or only without (False)."""
        _, marker = split_where(sym)
        for use_sub, use_sup in ((True, True), (True, False), (False, True), (False, False)):
            if (use_sub and not sym.sub) or (use_sup and not split_where(sym)[0]):
                continue
            if named is not None and use_sub != named:
                continue
            found = self.entries.get(key_of(sym, use_sub, use_sup))
            if not found:
                continue
            if marker:
                found = [f for f in found if f[1] == marker]
                if not found:
                    raise InputError(f"{sym.show()}: no such layer/head ({marker}) in "
                                     f"the example")
            return _nearest(sym, [t for t, _ in found], near), use_sub, use_sup
        sup, _ = split_where(sym)
        if sup and sup.isalnum() and named is not True:  # W^{Q}: the notation's W_Q
            moved = Sym(sym.base, sym.sup, None, sym.primes, sym.grad)
            found = self.entries.get(key_of(moved))
            if found:
                return _nearest(sym, [t for t, _ in found], near), False, True
        return None

    def scalar(self, sym: Sym, named: bool | None = None) -> str | None:
        """The glossary name of a size or constant (``d_k``, ``n``, ``ε``), or None
        (``named``: as :meth:`lookup`)."""
        for use_sub in (True, False):
            if named is not None and use_sub != named:
                continue
            if not use_sub and sym.sub:
                return None
            k = key_of(sym, use_sub, sup=False)  # a superscript is a power (β_1^t)
            if k in self.scalars:
                return self.scalars[k]
        return None


def _nearest(sym: Sym, targets: list[Target], near: str) -> Target:
    """The target sharing most leading name parts with ``near``."""
    unique = list({(t.stage, t.parameter): t for t in reversed(targets)}.values())[::-1]
    if len(unique) == 1:
        return unique[0]
    anchor = near.removeprefix("grad.").split(".")

    def common(t: Target) -> int:
        parts = t.anchor.split(".")
        k = 0
        while k < min(len(parts), len(anchor)) and parts[k] == anchor[k]:
            k += 1
        return k

    best = max(common(t) for t in unique)
    top = [t for t in unique if common(t) == best]
    if len(top) > 1:
        names = " or ".join(t.describe() for t in top[:3])
        raise InputError(f"{sym.show()} could be {names}; say which with "
                         f"where = {{ \"{sym.show()}\" = \"STAGE\" }}")
    return top[0]


def where_table(where: Mapping[str, str], g: Derivation, source: str,
                tile: int | None = None) -> dict[Key, Target | str]:
    """A claim's ``where``: author symbol -> a number (``D = "4"``: a size or
    constant), a size of the glossary (``N = "n"``, ``D = "d_model"``), a stage name or
    ``BLOCK.WEIGHT``
    (``layer1.head1.W_Q``, the weight's name as ``backward --list`` prints its
    gradient without ``grad.``), ``loss.target`` (the mse loss's target, a
    cross-entropy's one-hot targets) or ``S.mask`` (S a masked score stage: its additive
    mask, 0 or -inf, or the example's finite mask value)."""
    out: dict[Key, Target | str] = {}
    weights = _weights(g)
    if tile is not None:
        where = {**where, **tiles(where, g, tile)}
    for written, name in where.items():
        if not isinstance(name, str):
            raise InputError(f"{source}: where[{written!r}] must be a stage name")
        name, block = _block(name, f"{source}: where[{written!r}]")
        if len(written) > 200:
            raise InputError(f"{source}: a where key of {len(written):,} characters; a "
                             f"symbol is at most 200")
        if written in GREEK:  # mu = ...: the author means \mu
            raise InputError(f"{source}: where[{written!r}]: write the symbol as in the "
                             f"equation, \\{written}")
        sym = read_symbol(written)
        number = _number(name)
        if number is not None or name in _GLOSSARY_SIZES:  # D = "4", N = "n"
            out[key_of(sym)] = number if number is not None else _GLOSSARY_SIZES[name]
            continue
        if name.endswith(".target") and name.removesuffix(".target") in g.stages \
                and any(hasattr(g[name.removesuffix(".target")].op, a)
                        for a in ("target", "targets")):
            target = Target(stage=name.removesuffix(".target"), parameter="target",
                            matrix=True)
        elif name.endswith(".mask") and name.removesuffix(".mask") in g.stages \
                and g[name.removesuffix(".mask")].op.scales_and_masks:
            # the additive mask M of softmax(QK^T/sqrt(d_k) + M): 0, or -inf where masked
            target = Target(stage=name.removesuffix(".mask"), parameter="mask", matrix=True)
        elif name in g.stages:
            target = Target(stage=name, matrix=written[:1].isupper())
        elif name in weights:
            target = weights[name]
        else:  # a gradient, the loss, a side stage (an Adam step's m̂): added on demand
            from symformer.blocks.backward import stage_of
            stage_of(g, name)  # unknown: the message with the close names
            target = Target(stage=name, matrix=written[:1].isupper())
        if block is not None:  # a tile: its own matrix
            target = replace(target, block=block, matrix=True)
        out[key_of(sym)] = target
    return out


def tiles(where: Mapping[str, str], g: Derivation, tile: int) -> dict[str, str]:
    """FlashAttention's tiles of ``tile`` keys: each ``where`` symbol X (without a
    subscript of its own) bound to a stage also names X_1, X_2, ... its blocks of keys,
    from 1 as the paper numbers K_j and V_j -- columns of a stage whose columns are the
    keys (scores, attention weights), else rows (K, V)."""
    out = {}
    for written, name in where.items():
        if not isinstance(name, str) or name not in g.stages or "_" in written \
                or "[" in name:
            continue
        stage = g[name]
        by_keys = stage.op.columns == "keys" or any(
            g[s].op.columns == "keys" for s in stage.inputs if s in g.stages)
        count = stage.shape[1] if by_keys else stage.shape[0]
        for j, start in enumerate(range(0, count, tile), 1):
            span = f"{start}:{min(start + tile, count)}"
            out.setdefault(f"{written}_{j}", f"{name}[:, {span}]" if by_keys
                           else f"{name}[{span}]")
    return out


#: A block after a stage's or weight's name: ``[0:2]`` (rows), ``[:, 2:4]`` (columns),
#: ``[0:2, 1:3]``.
_BLOCK = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<rows>[^,\]]*)(?:,(?P<cols>[^,\]]*))?\]$")
_RANGE = re.compile(r"^\s*(?:(\d{1,6})\s*:\s*(\d{1,6})|:)\s*$")


def _block(name: str, where: str) -> tuple[str, tuple | None]:
    """``"layer1.head1.V[0:2]"`` -> (the name, ((0, 2), None)): a block of rows and
    columns, 0-based and half-open as Python slices (``:`` every one); no brackets:
    (the name, None)."""
    m = _BLOCK.match(name.strip())
    if m is None:
        if "[" in name or "]" in name:
            raise InputError(f"{where}: cannot read the block in {name!r}: write "
                             f"STAGE[first:end] (rows) or STAGE[first:end, first:end]")
        return name, None
    ranges = []
    for text in (m["rows"], m["cols"] or ":"):
        r = _RANGE.match(text)
        if r is None or (r[1] is not None and int(r[1]) >= int(r[2])):
            raise InputError(f"{where}: cannot read the block {text.strip()!r}: write "
                             f"first:end with first < end (0-based, end excluded), or :")
        ranges.append(None if r[1] is None else (int(r[1]), int(r[2])))
    return m["name"].strip(), tuple(ranges)


#: Sizes ``where`` may name (``D = "d_model"``): the glossary's name for each.
_GLOSSARY_SIZES = {"n": "n", "d": "d", "d_model": "d", "d_k": "d_{k}", "d_v": "d_{v}",
                   "d_ff": "d_{ff}", "d_in": "d_{in}", "d_out": "d_{out}", "|V|": "|V|",
                   "vocab": "|V|", "t": "t"}


def _number(text: str) -> str | None:
    """``"4"`` -> ``#4`` (a size), ``"1/2"`` or ``"0.5"`` -> ``=1/2`` (a constant); None
    for anything else (a stage name)."""
    if not re.fullmatch(r"-?\d{1,30}(?:\.\d{1,30})?(?:/\d{1,30})?", text.strip()):
        return None
    value = Fraction(text.strip())
    return f"#{value}" if value.denominator == 1 and value >= 0 else f"={value}"


def _weights(g: Derivation) -> dict[str, Target]:
    """``layer1.head1.W_Q`` -> the weight (the address of its gradient, without grad.)."""
    from symformer.blocks.backward import parameter_names
    names = parameter_names(g, {s.name for s in g if not s.name.startswith("grad.")},
                            contributions=False)
    return {address.removeprefix("grad."): Target(stage=stage, parameter=parameter,
                                                  matrix=True)
            for (stage, parameter), address in names.items()}


#: The most entries (the stage's and its inputs') whose own equation is bound for its
#: symbols (a large imported model's stage is read through the notation alone).
_OWN_ENTRIES = 20_000


def own_symbols(g: Derivation, stage: str) -> dict:
    """The symbols of the stage's own general equation, as ``export`` prints it: each
    array's printed symbol -> the stage, weight or constant it stands for, each size's
    -> ``#VALUE``, each scalar's -> ``=VALUE`` (RoPE's ``d``: the head's width, not
    d_model; a cross-attention key's ``z``: the encoder's output).  A symbol two rules
    of a gradient bind differently is left out (none: {})."""
    from symformer.equations.stage import stage_equation
    from symformer.equations.symbols import spell
    found: dict = {}
    clashes: set = set()
    stages = [g[stage], *(g[i] for i in g[stage].inputs if i in g.stages)]
    if sum(s.shape[0] * s.shape[1] for s in stages) > _OWN_ENTRIES:
        return {}  # binding its arrays builds their symbols: not for a large stage
    try:
        equation = stage_equation(g[stage])
    except Exception:  # noqa: BLE001 (an operation without a printable equation)
        equation = None

    def add(latex: str, value: object) -> None:
        try:
            key = key_of(read_symbol(latex))
        except InputError:
            return
        if key in found and found[key] != value:
            clashes.add(key)
        found[key] = value

    for part in equation.parts if equation is not None else ():
        for name, source in part.sources.items():
            notation = part.symbols.get(name)
            if notation is None or "contribution" in source or "term" in source:
                continue
            if "constant" in source:
                rows = part.matrices[name].tolist()
                add(notation.latex, Target(constant=tuple(
                    tuple(Fraction(int(v.p), int(v.q)) for v in row) for row in rows),
                    matrix=True))
            elif "parameter" in source:
                add(notation.latex, Target(stage=source["stage"],
                                           parameter=source["parameter"], matrix=True))
            elif "stage" in source:
                add(notation.latex, Target(stage=source["stage"],
                                           matrix=notation.latex[:1].isupper()))
        for name, value in part.sizes.items():
            notation = part.symbols.get(name) or spell(name)
            add(notation.latex, f"#{int(value)}")
        for name, value in part.eq.scalars.items():
            notation = part.symbols.get(name) or spell(name)
            try:
                exact = Fraction(str(value))
            except (ValueError, TypeError):
                continue
            add(notation.latex, f"={exact}")
    return {k: v for k, v in found.items() if k not in clashes}
