"""What a sheet defines before it asks: every function and symbol its equations use.

A student solves a sheet from the sheet alone, so each asked step's equation is
followed nowhere by an undefined name: the head width ``d_k`` of a scaled score, ReLU,
SiLU (and a gated activation ``a_j = SiLU(g_j) h_j``), GELU, and RoPE's position ``m``,
frequencies ``theta_i = base^(-2i/d_k)`` and the rotation of each pair with its ``R``.
Each definition is a :class:`~symformer.latex.blocks.Prose` paragraph (text and inline
math), given once per sheet, in the order the asked steps first need it.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

from symformer.engine import Derivation
from symformer.latex.blocks import Math, Prose
from symformer.latex.equations import numbered_equation
from symformer.ops.rope import PAIR, POSITION, RoPE
from symformer.worked.render_text import constant_text


def activation_name(op: object) -> str:
    """How a sheet names an activation function, as the operation declares it: SiLU,
    GELU, ReLU (``act`` for an operation that names none)."""
    return getattr(op, "function_name", None) or "act"


def definition(op: object) -> Prose | None:
    """The operation's declared definition (text and inline math in turn) as a paragraph."""
    pieces = getattr(op, "definition", ())
    if not pieces:
        return None
    return Prose(tuple(Math(p) if k % 2 else p for k, p in enumerate(pieces)))


def _activation(op: object) -> list[Prose]:
    """The definitions of an activation (inside a gated product too)."""
    if getattr(op, "gates", False):
        inner = _activation(op.activation)
        name = activation_name(op.activation)
        return [*inner, Prose(("The gated activation multiplies the activated gate by the "
                               "hidden entry, entry by entry: ",
                               Math(rf"a_j = \operatorname{{{name}}}(g_j)\, h_j"), "."))]
    text = definition(op)
    return [] if text is None else [text]


def _rope(op: RoPE, x: str, rotated: str, equation: str) -> list[Prose]:
    """RoPE's position, frequencies and rotation, for this example's style and width
    (``x`` the input's symbol, ``rotated`` the output's), in the letters of the
    equation the sheet prints (``equation``: its LaTeX, whose position is ``pos`` and
    pair ``l``: :data:`symformer.ops.rope.POSITION`, :data:`~symformer.ops.rope.PAIR`):
    frequencies theta_l and the matrix R, or the angle written out with d = d_k."""
    count = op.d // 2
    p, c = POSITION.latex, PAIR.latex
    if r"\theta" not in equation:  # q_{pos,2l} cos(pos 10000^{-2l/d}) - ... sin(...)
        a, b = (f"2{c}", f"2{c}+1") if op.style == "interleaved" else (c, f"{c}+d/2")
        which = f"{c} = 0" if count == 1 else f"{c} = 0, \\dots, {count - 1}"
        return [Prose((
            "RoPE rotates each pair of dimensions ", Math(f"({x}_{{{p},{a}}}, {x}_{{{p},{b}}})"),
            ", ", Math(which), " (one pair)" if count == 1 else "",
            ", of the query or key of the token at position ", Math(p),
            " (counted from 0" + (f", plus {op.start}" if op.start else "") + ") by the "
            "angle ", Math(f"{p} \\cdot {op.base}^{{-2{c}/d}}"), ", with ",
            Math(f"d = d_k = {op.d}"), " the width of a query or key. Angles are in "
            "radians."))]
    a, b = (f"2{c}", f"2{c}+1") if op.style == "interleaved" else (c, f"{c}+{op.d // 2}")
    which = f"{c} = 0" if count == 1 else f"{c} = 0, \\dots, {count - 1}"
    start = (f" plus {op.start}" if op.start else "")
    thetas = ", ".join(rf"\theta_{{{i}}} = {op.base}^{{-{Fraction(2 * i, op.d)}}}" if i
                       else r"\theta_{0} = 1" for i in range(count))
    angle = rf"{p}\,\theta_{{{c}}}"
    return [Prose((
        "RoPE rotates each pair of dimensions ", Math(f"({x}_{{{a}}}, {x}_{{{b}}})"),
        ", ", Math(which), " (one pair)" if count == 1 else "",
        ", of a query or key at position ", Math(p),
        f" (the token's position, counted from 0{start}) by the angle ",
        Math(angle), ", with the frequencies ", Math(rf"\theta_{{{c}}} = b^{{-2{c}/d_k}}"),
        ", base ", Math(f"b = {op.base}"), " and ", Math(f"d_k = {op.d}"), ": here ",
        Math(thetas), ". Written out, ",
        Math(rf"{rotated}_{{{a}}} = {x}_{{{a}}} \cos({angle}) - {x}_{{{b}}} "
             rf"\sin({angle})"), " and ",
        Math(rf"{rotated}_{{{b}}} = {x}_{{{a}}} \sin({angle}) + {x}_{{{b}}} "
             rf"\cos({angle})"),
        ". In the equation ", Math("R"), " maps each pair ", Math(r"(a, b) \mapsto (-b, a)"),
        ", and cos and sin act entry by entry, each with the angle of its entry's pair. "
        "Angles are in radians."))]


def sizes(g: Derivation, asked: list[str], defined: str = "") -> list[Prose]:
    """The sizes the asked equations' sums run to (``d_in``, ``n``, ``E``), each with its
    value and what it counts, once (a size already in ``defined``, the LaTeX of the other
    definitions, is skipped: ``d_k``); a size whose value differs between steps (the
    input width of W_1 and of W_2) is given per step, by the step's title."""
    from symformer.equations.stage import forward
    from symformer.equations.symbols import spell
    from symformer.latex.document import caption
    from symformer.notation import notation

    def bare(latex: str) -> str:
        return latex.replace("{", "").replace("}", "")

    found: dict[str, dict[int, tuple[str, list[str], str]]] = {}
    for name in asked:
        bound = forward(g[name])
        if bound is None:
            continue
        for size, (array, axis) in bound.eq.sizes.items():
            letter = bound.eq.symbols.get(size, (spell(size).latex,))[0]
            if f"{bare(letter)} =" in bare(defined):
                continue
            role = bound.eq.arrays.get(array, "")
            counted = g[name] if role == "out" else g[g[name].inputs[int(role[2:])]] \
                if role.startswith("in") else None
            of = notation(counted).latex if counted is not None else array
            seen = found.setdefault(letter, {}).setdefault(
                bound.sizes[size], ("columns" if axis else "rows", [], caption(g[name])))
            if of not in seen[1]:
                seen[1].append(of)
    parts: list = []
    for letter, values in found.items():
        parts.append("; " if parts else "The sums run to these sizes: ")
        if len(values) == 1:
            (value, (what, of, _)), = values.items()
            parts += [Math(f"{letter} = {value}"), f", the number of {what} of "]
            for k, table in enumerate(of):
                parts += [*([" and "] if k else []), Math(table)]
        else:
            parts += [Math(letter), " depends on the step: " + ", ".join(
                f"{value} in {title}" for value, (_, _, title) in values.items())]
    return [Prose((*parts, "."))] if parts else []


def definitions(g: Derivation, asked: list[str]) -> list[Prose]:
    """The definitions the asked steps' equations need, each once, in asked order."""
    out: list[Prose] = []
    for name in asked:
        stage = g[name]
        op = stage.op
        found: list[Prose] = []
        if op.scales_and_masks and op.scale is None:
            root = isqrt(op.d_k)  # a perfect square's root is said: sqrt(4) = 2
            value = f" = {root}" if root * root == op.d_k else ""
            found = [Prose((Math(f"d_k = {op.d_k}"), " is the width of a query and of a key "
                            "(the head's dimension), so ", Math(rf"\sqrt{{d_k}} = "
                                                                rf"\sqrt{{{op.d_k}}}{value}"),
                            "."))]
        elif op.rotates:
            equation = numbered_equation(stage)
            found = _rope(op, g[stage.inputs[0]].op.symbol.latex, op.symbol.latex,
                          "".join(rhs for _, rhs in equation.lines) if equation else "")
        elif op.activates:
            found = _activation(op)
        if getattr(op, "eps", None) is not None:
            equation = numbered_equation(stage)
            shown = "".join(rhs for _, rhs in equation.lines) if equation else ""
            name = r"\mathrm{eps}" if r"\mathrm{eps}" in shown else r"\varepsilon"
            found = [*found, Prose((Math(rf"{name} = {constant_text(op.eps)}"),
                                    " is added under the square root, so that it never "
                                    "divides by 0."))]
        out += [p for p in found if p not in out]
    defined = "".join(part.latex for prose in out for part in prose.parts
                      if isinstance(part, Math))
    return out + sizes(g, asked, defined)
