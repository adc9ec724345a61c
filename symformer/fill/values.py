"""The stages of a derivation as template values: ``layer1.head1.weights[1,3]``.

Names are the stage names (``symformer derive --list``), dots and all: each dot is
an attribute step, so ``layer1.add_norm1`` is both a stage and the prefix of
``layer1.add_norm1.sum``.  Indexing a stage gives an entry (``[i, j]``, positions
from 0, or token / column names) or a token's row (``[i]``, ``["think"]``).  Every
mistake raises :class:`FillError`, which the template layer turns into a message
naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass

from symformer.engine import Derivation, Stage


class FillError(Exception):
    """A placeholder that names no stage, entry or format (reported with its line)."""


class Node:
    """A dotted name: a stage, a prefix of stage names, or both."""

    def __init__(self, g: Derivation, prefix: str, names: frozenset[str]) -> None:
        self._g, self._prefix, self._names = g, prefix, names

    def _stage(self) -> Stage:
        if self._prefix not in self._g:
            below = sorted(n for n in self._names if n.startswith(self._prefix + "."))
            raise FillError(f"{self._prefix!r} is not a stage; stages under it: "
                            + ", ".join(below[:8]) + (", ..." if len(below) > 8 else ""))
        return self._g[self._prefix]

    def __getattr__(self, part: str) -> Node:
        if part.startswith("_"):
            raise AttributeError(part)
        name = f"{self._prefix}.{part}"
        if not any(n == name or n.startswith(name + ".") for n in self._names):
            raise FillError(unknown_stage(name, self._names))
        return Node(self._g, name, self._names)

    def __getitem__(self, key) -> Entry | Row:
        stage = self._stage()
        if isinstance(key, tuple):
            if len(key) != 2:
                raise FillError(f"{stage.name}[...]: give [row, column], found {len(key)} "
                                "indices")
            i = _index(stage, key[0], stage.rows, "row")
            return Entry(stage, i, _index(stage, key[1], stage.cols, "column"))
        return Row(stage, _index(stage, key, stage.rows, "row"))

    def __str__(self) -> str:
        raise FillError(f"{self._prefix} is a whole stage: add | table or | bmatrix, or "
                        f"name an entry {self._prefix}[i, j] or a row {self._prefix}[i]")


def unknown_stage(name: str, names: frozenset[str]) -> str:
    """``unknown stage 'x'; did you mean ...``."""
    import difflib

    close = difflib.get_close_matches(name, sorted(names), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown stage {name!r}{hint} (`symformer derive --list` lists them)"


def _index(stage: Stage, key, labels: tuple[str, ...], what: str) -> int:
    if isinstance(key, bool) or not isinstance(key, int | str):
        raise FillError(f"{stage.name}: a {what} is a position or a name, found {key!r}")
    if isinstance(key, str):
        if key in labels:
            return labels.index(key)
        raise FillError(f"{stage.name}: no {what} named {key!r}; the {what}s are "
                        + ", ".join(labels))
    if 0 <= key < len(labels):
        return key
    raise FillError(f"{stage.name}: {what} {key} is out of range; the stage is "
                    f"{stage.shape[0]}x{stage.shape[1]} (positions from 0)")


@dataclass(frozen=True)
class Entry:
    """One entry of a stage."""

    stage: Stage
    i: int
    j: int

    @property
    def where(self) -> str:
        return f"{self.stage.name}[{self.i},{self.j}]"


@dataclass(frozen=True)
class Row:
    """A token's row of a stage."""

    stage: Stage
    i: int


def namespace(g: Derivation) -> dict[str, Node]:
    """The template's top-level names: the first part of every stage name."""
    names = frozenset(s.name for s in g)
    return {top: Node(g, top, names) for top in sorted({n.split(".")[0] for n in names})}
