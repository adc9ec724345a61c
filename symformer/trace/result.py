"""The trace of one token: every step of the derivation from its view, and its displays.

Jupyter calls ``_repr_html_``/``_repr_markdown_``/``_repr_latex_`` on a cell's
value; a :class:`Trace` shows every step's card, the Markdown page, or its worked
formulas as one display.
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.notation_types import Notation
from symformer.trace.render_html import notebook_html
from symformer.trace.render_latex import notebook_latex
from symformer.trace.render_markdown import render_markdown
from symformer.trace.steps import Step
from symformer.worked.significant import DEFAULT_DIGITS


@dataclass(frozen=True)
class Trace:
    """One token followed through every step of the derivation."""

    title: str
    tokens: tuple[str, ...]
    position: int
    causal: bool
    side: str
    decimals: int
    steps: tuple[Step, ...]
    #: The symbols the steps use (the legend stated at the start of every format).
    notation: tuple[Notation, ...] = ()
    #: True for ``trace --backward``: the loss and the token's gradients.
    backward: bool = False

    @property
    def direction(self) -> str:
        """A sentence saying what a backward trace shows (empty for the forward one)."""
        return (" Backward pass: the loss, then the token's gradients \u2202L/\u2202x, "
                "from the loss back to the embeddings." if self.backward else "")

    @property
    def precision(self) -> str:
        """How the numbers are rounded: ``3 decimals``, or the backward trace's
        ``4 significant digits``."""
        if self.backward:
            return f"{DEFAULT_DIGITS} significant digits"
        return f"{self.decimals} decimal" + ("" if self.decimals == 1 else "s")

    @property
    def token(self) -> str:
        """The traced token."""
        return self.tokens[self.position]

    @property
    def positions(self) -> str:
        """The range of positions, counted from 0: ``0–3``."""
        return f"0\u2013{len(self.tokens) - 1}" if len(self.tokens) > 1 else "0"

    def _repr_html_(self) -> str:
        return notebook_html(self)

    def _repr_markdown_(self) -> str:
        return render_markdown(self)

    def _repr_latex_(self) -> str:
        return notebook_latex(self)
