"""A SymPy symbol that prints as a stage entry's notation (:mod:`symformer.notation`).

Its own module because it subclasses ``sympy.Symbol``: importing it imports SymPy,
which :mod:`symformer.notation` (and ``derive``, which words its notes with it) does
not need.
"""

from __future__ import annotations

import sympy

from symformer.ops import Notation


class EntrySymbol(sympy.Symbol):
    """A SymPy symbol that prints as a notation with its subscript in every printer.

    ``α_2`` in text, ``\\alpha_{2}`` in LaTeX, ``<msub><mi>α</mi><mn>2</mn></msub>``
    in MathML: the left-hand side of a worked line.
    """

    notation: Notation
    index: int | None

    def __new__(cls, note: Notation, k: int | None = None) -> EntrySymbol:
        name = note.entry(*(() if k is None else (k,)), fmt="text")
        obj = super().__new__(cls, name)
        obj.notation, obj.index = note, k
        return obj

    def __getnewargs_ex__(self):
        return (self.notation, self.index), {}

    def _indices(self) -> tuple[int, ...]:
        return () if self.index is None else (self.index,)

    def _sympystr(self, printer) -> str:
        return self.notation.entry(*self._indices(), fmt="text")

    def _latex(self, printer) -> str:
        return self.notation.entry(*self._indices(), fmt="latex")

    def _mathml_presentation(self, printer):
        dom = printer.dom
        note = self.notation
        base = dom.createElement("mi")
        base.appendChild(dom.createTextNode(
            note.text.removesuffix(f"^({note.where})") if note.where else note.text))
        scripts = []
        if self.index is not None:
            scripts.append(dom.createElement("mn"))
            scripts[-1].appendChild(dom.createTextNode(str(self.index)))
        if note.where:
            scripts.append(dom.createElement("mtext"))
            scripts[-1].appendChild(dom.createTextNode(f"({note.where})"))
        if not scripts:
            return base
        tag = {(True, False): "msub", (False, True): "msup", (True, True): "msubsup"}[
            (self.index is not None, bool(note.where))]
        out = dom.createElement(tag)
        for child in (base, *scripts):
            out.appendChild(child)
        return out
