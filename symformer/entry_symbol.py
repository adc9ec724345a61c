"""A SymPy symbol that prints as a stage entry's notation (:mod:`symformer.notation`).

Its own module because it subclasses ``sympy.Symbol``: importing it imports SymPy,
which :mod:`symformer.notation` (and ``derive``, which words its notes with it) does
not need.
"""

from __future__ import annotations

import re

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
        text, power, prefix = note.text, "", ""
        if note.where:
            text = text.removesuffix(f"^({note.where})")
            m = re.fullmatch(rf"(∂L/∂)?\((.*)\^\({re.escape(note.where)}\)\)([²³])", text)
            if m:  # (σ^(1))²: the scripts inside the parentheses, the power outside
                prefix, text, power = m.group(1) or "", m.group(2), {"²": "2", "³": "3"}[
                    m.group(3)]
        base = dom.createElement("mi")
        base.appendChild(dom.createTextNode(text))
        scripts_ = []
        if self.index is not None:
            scripts_.append(dom.createElement("mn"))
            scripts_[-1].appendChild(dom.createTextNode(str(self.index)))
        if note.where:
            scripts_.append(dom.createElement("mtext"))
            scripts_[-1].appendChild(dom.createTextNode(f"({note.where})"))
        if not scripts_:
            return base
        tag = {(True, False): "msub", (False, True): "msup", (True, True): "msubsup"}[
            (self.index is not None, bool(note.where))]
        out = dom.createElement(tag)
        for child in (base, *scripts_):
            out.appendChild(child)
        if not power:
            return out
        row = dom.createElement("mrow")
        for part in ("(", out, ")"):
            if isinstance(part, str):
                mo = dom.createElement("mo")
                mo.appendChild(dom.createTextNode(part))
                part = mo  # noqa: PLW2901
            row.appendChild(part)
        sup = dom.createElement("msup")
        sup.appendChild(row)
        exponent = dom.createElement("mn")
        exponent.appendChild(dom.createTextNode(power))
        sup.appendChild(exponent)
        if not prefix:
            return sup
        whole = dom.createElement("mrow")
        head = dom.createElement("mi")
        head.appendChild(dom.createTextNode(prefix))
        whole.appendChild(head)
        whole.appendChild(sup)
        return whole
