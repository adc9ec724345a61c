"""How an identifier of an equation prints: LaTeX and text, from one table.

Part of the render stage (:mod:`symformer.equations.render`).  Identifiers are the
names an operation's index equation uses (``d_k``, ``pos``, ``gamma``, ``eps``).  A
table of :class:`~symformer.notation_types.Notation` gives the symbols of the arrays bound
to stages and parameters; :func:`spell` writes every other identifier the way a
textbook does: Greek names as letters, ``d_k`` with its subscript, ``d_model`` with a
word subscript, longer names upright.
"""

from __future__ import annotations

import unicodedata

from latexify.codegen import expression_rules

from symformer.notation_types import Notation

#: Identifiers with a fixed spelling.
FIXED = {
    "inf": Notation(r"\infty", "∞", ""),
    "max": Notation(r"\max", "max", ""),
    "pos": Notation(r"\mathit{pos}", "pos", ""),
    # a second index over the same range as a free one: j′ (the keys a sum runs over
    # where j is the equation's own column), i′ (the rows)
    "jp": Notation("j'", "j\u2032", ""),
    "ip": Notation("i'", "i\u2032", ""),
    # a feature index (a column of the rows a sum runs over: a projection's input, a
    # query's and a key's width), a letter of its own: no row, weight or position
    "lam": Notation(r"\lambda", "\u03bb", ""),
    # ε is written one way in every equation and worked line
    "epsilon": Notation(r"\varepsilon", "ε", ""),
    "varepsilon": Notation(r"\varepsilon", "ε", ""),
}


def _greek(name: str) -> str | None:
    base = name.removeprefix("var")
    try:
        return unicodedata.lookup(f"GREEK SMALL LETTER {base.upper()}")
    except KeyError:
        try:
            return unicodedata.lookup(f"GREEK CAPITAL LETTER {base.upper()}")
        except KeyError:
            return None


def spell(name: str) -> Notation:
    """The default spelling of an identifier (LaTeX and text)."""
    if name in FIXED:
        return FIXED[name]
    if name in expression_rules.MATH_SYMBOLS:
        return Notation("\\" + name, _greek(name) or name, "")
    if len(name) == 1:
        return Notation(name, name, "")
    base, _, sub = name.partition("_")
    if sub and len(base) == 1:
        latex_sub = sub if len(sub) == 1 else rf"\text{{{sub}}}"
        return Notation(f"{base}_{{{latex_sub}}}", f"{base}_{sub}", "")
    return Notation(rf"\mathrm{{{name}}}", name, "")
