"""A symbol in every format: :class:`Notation` (LaTeX, text, a title) and named matrices.

A bottom-floor module (it imports only :mod:`symformer.math_scripts`): the operations
declare their symbols with it, and the equations, the worked lines and every renderer
read them, without reaching up into the operations.
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer import math_scripts as scripts


@dataclass(frozen=True)
class Notation:
    """How the token's vector at a step is written: one symbol, in every format.

    ``latex`` is the symbol in LaTeX (``\\alpha``), ``text`` in a terminal (``α``);
    indices are appended by :meth:`entry` (0-based, as positions and JSON rows
    are: ``α_2``).  ``title`` names the step for a reader ("Attention weights").
    ``bracket``: an entry is bracketed, the symbol having a subscript of its own
    (``(∂L/∂W_Q)_0``).
    """

    latex: str
    text: str
    title: str
    bracket: bool = False
    #: The superscript ``latex`` and ``text`` end with, saying where the quantity sits:
    #: its layer and head (``"1,2"``, set by :meth:`at`), empty when one of each.
    where: str = ""

    def at(self, where: str) -> Notation:
        """This symbol with the superscript ``(where)``: ``q`` -> ``q^{(2)}``; a power
        goes outside, ``\\sigma^2`` -> ``(\\sigma^{(1)})^{2}`` (:mod:`symformer.math_scripts`)."""
        if not where:
            return self
        return Notation(scripts.located(self.latex, where),
                        scripts.located_text(self.text, where), self.title, self.bracket,
                        where)

    def entry(self, *index: int | str, fmt: str = "latex") -> str:
        """The symbol with its subscript: ``\\alpha_{2}`` (latex) or ``α_2`` (text);
        a superscript ``where`` stands over it (``q^{(2)}_{0}``), a located power's
        subscript goes inside its parentheses (``(\\sigma^{(1)}_{0})^{2}``)."""
        if not index:
            return self.latex if fmt == "latex" else self.text
        sub = ",".join(str(i) for i in index)
        if self.bracket:
            return (rf"\left({self.latex}\right)_{{{sub}}}" if fmt == "latex"
                    else f"({self.text})_{sub}" if len(index) == 1
                    else f"({self.text})_({sub})")
        if fmt == "latex":
            return scripts.subscripted(self.latex, sub, bool(self.where))
        return scripts.subscripted_text(self.text, sub if len(index) == 1 else f"({sub})",
                                        bool(self.where))


def named(name: str, title: str = "") -> Notation:
    """The notation of a named matrix such as ``W_Q``, ``W_vocab`` or ``b_1``."""
    base, _, sub = name.partition("_")
    if not sub:
        return Notation(base, base, title)
    sub_latex = rf"\text{{{sub}}}" if len(sub) > 1 else sub
    return Notation(f"{base}_{{{sub_latex}}}", name, title)
