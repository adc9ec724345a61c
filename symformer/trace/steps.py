"""The trace as a small intermediate representation: one dataclass per kind of step.

A step is one stage of the derivation seen from one token: the stage's general
formula, the token's row of numbers, and each number's local formula with the
numbers it was computed from substituted.  Renderers (``symformer.trace.render_*``)
dispatch on the step's class, so a new kind of step is one dataclass plus one
registration per format that wants to show it differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from symformer.worked.model import Step as WorkedStep


@dataclass(frozen=True)
class General:
    """The formula of a whole step, over named vectors (``q = x W_Q``).

    ``text`` is for terminals; ``expr`` (a SymPy ``Eq``) is printed as LaTeX and
    MathML.
    """

    text: str
    expr: object


@dataclass(frozen=True)
class Entry:
    """One number of the token's row: its column label, value and worked formula."""

    label: str
    value: str
    worked: WorkedStep | None = None


@dataclass(frozen=True)
class Step:
    """A stage of the derivation, seen from the traced token (a vector step)."""

    stage: str
    kind: str
    part: tuple[str, ...]  # where in the block: ("Layer 1", "Head 1")
    title: str
    general: tuple[General, ...]
    entries: tuple[Entry, ...]
    note: str = ""

    @property
    def labels(self) -> list[str]:
        """Column labels of the token's row."""
        return [e.label for e in self.entries]

    @property
    def values(self) -> list[str]:
        """The token's row as certified decimals."""
        return [e.value for e in self.entries]


@dataclass(frozen=True)
class VectorStep(Step):
    """The token's vector at a stage (embedding, q, k, v, residual sum, ...)."""


@dataclass(frozen=True)
class AttentionStep(Step):
    """The token's row of scores or weights: one entry per key token.

    ``heat`` asks renderers to colour the entries (attention weights in [0, 1]);
    ``matrix`` is then the whole weights matrix (every query's row), for a heat map
    with the token's row among the others.
    """

    heat: bool = False
    matrix: tuple[tuple[str, ...], ...] = ()
    query: int = 0  # the traced token's row of ``matrix``
    masked: tuple[bool, ...] = ()  # keys blocked by the causal mask


@dataclass(frozen=True)
class NormStep(Step):
    """LayerNorm of the token's vector, with the row's mean and variance."""

    mean: Entry = field(default=None)
    variance: Entry = field(default=None)


@dataclass(frozen=True)
class ActivationStep(Step):
    """The FFN's activation; ``clipped[j]`` marks entries ReLU set to zero."""

    clipped: tuple[bool, ...] = ()


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

    @property
    def token(self) -> str:
        """The traced token."""
        return self.tokens[self.position]

    def _repr_html_(self) -> str:
        from symformer.display import trace_html

        return trace_html(self)

    def _repr_markdown_(self) -> str:
        from symformer.trace.render_markdown import render_markdown

        return render_markdown(self)

    def _repr_latex_(self) -> str:
        from symformer.display import trace_latex

        return trace_latex(self)
