"""The trace as a small intermediate representation: one dataclass per kind of step.

A step is one stage of the derivation seen from one token: the stage's general
formula, the token's row of numbers, and each number's local formula with the
numbers it was computed from substituted.  Renderers (``symformer.trace.render_*``)
dispatch on the step's class, so a new kind of step is one dataclass plus one
registration per format that wants to show it differently.  The whole trace
(:class:`~symformer.trace.result.Trace`) holds the steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from symformer.notation_types import Notation
from symformer.worked.model import Step as WorkedStep


@dataclass(frozen=True)
class General:
    """The formula of a whole step, over named vectors (``q = x W_Q``).

    The step's operation's declared index equation (:mod:`symformer.trace.general_formula`):
    ``text`` for terminals (with its remark), ``lhs``/``rhs`` in LaTeX, ``remark`` the
    operation's few plain words after it (``pairs c below d/2``), :meth:`mathml`
    converted from the LaTeX.
    """

    text: str
    lhs: str
    rhs: str
    remark: str = ""

    @property
    def full_rhs(self) -> str:
        """The right-hand side in LaTeX with the remark as text after it."""
        from symformer.latex.equations import remark_latex

        return f"{self.rhs} {remark_latex(self.remark)}" if self.remark else self.rhs

    @property
    def latex(self) -> str:
        """``lhs = rhs (remark)`` in LaTeX."""
        return f"{self.lhs} = {self.full_rhs}"

    def mathml(self) -> str:
        """``lhs = rhs`` as an inline ``<math>`` element in display style (from its LaTeX,
        through :func:`symformer.equations.render.mathml`); the remark is the page's
        text beside it, so a narrow page wraps it under the equation."""
        from symformer.equations.render import mathml

        return mathml(f"{self.lhs} = {self.rhs}").replace(
            '<math display="inline">', '<math displaystyle="true">', 1)


@dataclass(frozen=True)
class Entry:
    """One number of the token's row: its column label, value and worked formula.

    ``label`` is the stage's column label (as ``derive --json`` prints it: ``q1``,
    a key token); ``notation`` and ``index`` name the entry as every format writes
    it (``q_0``: the symbol with its 0-based subscript; no index for a whole-row
    quantity such as the mean).
    """

    label: str
    value: str
    worked: WorkedStep | None = None
    notation: Notation | None = None
    index: int | None = None

    def symbol(self, fmt: str = "text") -> str:
        """``q_0`` (text) or ``q_{0}`` (latex); the label when there is no notation."""
        if self.notation is None:
            return self.label
        return self.notation.entry(*(() if self.index is None else (self.index,)), fmt=fmt)


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
    notation: Notation | None = None  # the symbol of the token's vector at this step
    #: Worked parts the entries' lines use, shown before them (a softmax row's each
    #: e^{s_j} and their sum Σ, as the notes work it); each an entry with its line.
    parts: tuple[Entry, ...] = ()
    #: The weights the step's operation reads, exactly as the notes print them: each
    #: ``(name, rows)``, LaTeX (``W_{Q}^{(1)}``, rows of entries such as ``\frac{1}{2}``).
    weights: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = ()
    #: A backward step's matrix form, as the notes state it before its index form
    #: (:func:`symformer.latex.matrix_form.backward_lines`): ``(lhs, rhs)`` in LaTeX.
    matrix_form: tuple[tuple[str, str], ...] = ()

    @property
    def lines(self) -> tuple[Entry, ...]:
        """The parts, then the entries: every worked line in reading order."""
        return (*self.parts, *self.entries)

    @property
    def labels(self) -> list[str]:
        """Column labels of the token's row."""
        return [e.label for e in self.entries]

    @property
    def values(self) -> list[str]:
        """The token's row as certified decimals."""
        return [e.value for e in self.entries]

    def symbols(self, fmt: str = "text") -> list[str]:
        """Each entry's symbol with its 0-based subscript (``q_0``, ``q_1``)."""
        return [e.symbol(fmt) for e in self.entries]


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
    """LayerNorm of the token's vector.  The row's mean and variance are steps of their
    own before it (and before s = √(σ² + ε)); ``mean`` and ``variance`` repeat their
    entries for readers of the JSON trace."""

    mean: Entry = field(default=None)
    variance: Entry = field(default=None)


@dataclass(frozen=True)
class ActivationStep(Step):
    """The FFN's activation; ``clipped[j]`` marks entries the clipping activation (named
    ``function``, its operation's ``function_name``: ``ReLU``) set to zero, whose input
    ``hidden`` (the notation of the hidden layer, ``h``) is certified ≤ 0."""

    clipped: tuple[bool, ...] = ()
    hidden: Notation | None = None
    function: str = ""
