"""The document's intermediate representation: a few kinds of blocks.

Builders (tables, equations, worked examples, the document) produce these plain
dataclasses; renderers turn them into LaTeX (:mod:`symformer.latex.render`) or
Markdown (:mod:`symformer.latex.markdown`), one ``singledispatch`` registration
per kind.  Math is stored as LaTeX that both pdflatex and KaTeX read; prose is
stored unescaped and escaped by each renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Math:
    """Inline math inside prose."""

    latex: str


@dataclass(frozen=True)
class Heading:
    """A heading; ``level`` 0 = part, 1 = section, 2 = subsection, 3 = subsubsection."""

    text: str
    level: int = 1
    label: str | None = None


@dataclass(frozen=True)
class Prose:
    """A paragraph: plain text pieces and inline :class:`Math`."""

    parts: tuple[str | Math, ...]


@dataclass(frozen=True)
class Equation:
    """Numbered display equations, one ``(lhs, rhs)`` per line, aligned at ``=``."""

    lines: tuple[tuple[str, str], ...]
    label: str | None = None


@dataclass(frozen=True)
class Step:
    """One line of a worked example: ``lhs = formula = substituted ≈ result``."""

    lhs: str
    chain: tuple[tuple[str, str], ...]  # (relation, right-hand side), e.g. ("=", "...")


@dataclass(frozen=True)
class Worked:
    """A worked example: steps for one token, unnumbered, aligned at the relations.

    ``items`` are the recomputable roundings the steps print
    (:class:`symformer.worked.model.Item`), for ``export --format json``.
    """

    steps: tuple[Step, ...]
    items: tuple = ()


@dataclass(frozen=True)
class Cell:
    """A table entry: math, with optional emphasis and heat (0..100 percent)."""

    latex: str
    marks: frozenset[str] = frozenset()  # "clipped", "masked", "exact"
    heat: int | None = None


@dataclass(frozen=True)
class Table:
    """A stage as a table: tokens (with positions) down, labelled columns across."""

    caption: str
    label: str
    row_labels: tuple[tuple[int, str], ...]  # (position, token)
    col_labels: tuple[str, ...]  # math
    cells: tuple[tuple[Cell, ...], ...]
    highlight_row: int | None = None
    legend: tuple[str, ...] = ()
    row_header: tuple[str, str] = ("pos", "token")  # headers of the two label columns
    tall: bool = False  # tall entries (fractions, closed forms): rows need more room
    #: Row labels as math instead of the text labels (a weight gradient's rows: the
    #: input entry each row multiplies, ``a_{0}``; empty for a single row).
    row_math: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Glossary:
    """The notation table: one row per symbol, ``(math, meaning)``: the meaning in words,
    or a :class:`Prose` where it holds math (ε's value, ``10^{-6}``)."""

    caption: str
    rows: tuple[tuple[str, str | Prose], ...]


@dataclass(frozen=True)
class MatrixBlock:
    """A stage as ``name = [bmatrix]`` for use inside equations; with ``value``, as
    ``name = value`` (math: a gradient exactly 0, or equal to one printed before)."""

    lhs: str
    rows: tuple[tuple[str, ...], ...]
    value: str | None = None


@dataclass(frozen=True)
class Matrices:
    """Several ``name = [bmatrix]`` side by side in one display (a step's weights);
    ``lines`` groups them, one display line per group."""

    lines: tuple[tuple[MatrixBlock, ...], ...]


@dataclass
class Fragment:
    """A named piece of the document, also written on its own as ``NAME.tex``."""

    name: str
    blocks: list = field(default_factory=list)
