"""What a template's names mean: stage names, token rows and entries, as plain data.

Names are the stage names (``symformer derive --list``), dots and all, so
``layer1.add_norm1`` is both a stage and the prefix of ``layer1.add_norm1.sum``.
Indexing a stage gives an entry (``[i, j]``, positions from 0, or token / column
names) or a token's row (``[i]``, ``["think"]``).  The values are frozen records of
a stage's name and positions: a template never holds a stage, a derivation or any
other live object.  Every mistake raises :class:`FillError`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from symformer.blocks.backward import is_backward_stage, stage_of
from symformer.blocks.requested_stages import not_asked
from symformer.blocks.side_stages import add_side_stage, unknown_message
from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.fill.syntax import FillError

#: How many stage names a message lists at most.
_LISTED = 8


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a stage."""

    stage: str
    i: int
    j: int

    @property
    def where(self) -> str:
        return f"{self.stage}[{self.i},{self.j}]"


@dataclass(frozen=True, slots=True)
class Row:
    """A token's row of a stage."""

    stage: str
    i: int


@dataclass(frozen=True, slots=True)
class Whole:
    """A whole stage."""

    stage: str


class Names:
    """The stage names of a derivation with their row and column labels."""

    def __init__(self, g: Derivation) -> None:
        self.g = g
        self._read(g)

    def _read(self, g: Derivation) -> None:
        self.order = tuple(s.name for s in g)
        self.labels = {s.name: (s.rows, s.cols) for s in g}
        self.prefixes = {n.rsplit(".", k)[0] for n in self.order
                         for k in range(1, n.count(".") + 1)}
        self.tops = {n.split(".")[0] for n in self.order}

    def stage(self, parts: tuple[str, ...]) -> Whole:
        """The stage named by ``parts``; an unknown name or a mere prefix is an error.

        A backward stage (``loss``, ``loss.per_position``, ``grad.*``) of an example with
        a ``[loss]`` appends the backward pass first (only then: a template of forward
        values costs what it did)."""
        if is_backward_stage(".".join(parts)) and "grad.loss" not in self.g \
                and self.g.example is not None and self.g.example.loss is not None:
            try:
                stage_of(self.g, "grad.loss")
            except InputError as exc:
                raise FillError(str(exc)) from None
            self._read(self.g)
        full = ".".join(parts)
        if full not in self.labels:  # a side stage's address (blocks/side_stages.py)
            try:
                added = add_side_stage(self.g, full)
            except InputError as exc:
                raise FillError(str(exc)) from None
            if added:
                self._read(self.g)
        if full not in self.labels and not_asked(full) is not None:
            raise FillError(not_asked(full))
        if full not in self.labels and full not in self.prefixes \
                and unknown_message(self.g, full) is not None:
            raise FillError(unknown_message(self.g, full))  # close to a side stage's
        for k in range(1, len(parts) + 1):
            name = ".".join(parts[:k])
            if name not in self.labels and name not in self.prefixes:
                raise FillError(unknown_stage(name, self.order))
        name = ".".join(parts)
        if name not in self.labels:
            below = [n for n in self.order if n.startswith(name + ".")]
            raise FillError(f"{name} is not a stage but a prefix of stage names: "
                            + ", ".join(below[:_LISTED])
                            + (", ..." if len(below) > _LISTED else ""))
        return Whole(name)

    def index(self, stage: str, keys: tuple[int | str, ...]) -> Entry | Row:
        """``stage[i]`` (a row) or ``stage[i, j]`` (an entry)."""
        rows, cols = self.labels[stage]
        i = _position(stage, keys[0], rows, "row", (len(rows), len(cols)))
        if len(keys) == 1:
            return Row(stage, i)
        return Entry(stage, i, _position(stage, keys[1], cols, "column",
                                         (len(rows), len(cols))))


def unknown_stage(name: str, names: tuple[str, ...]) -> str:
    """``unknown stage 'x'; did you mean ...``."""
    close = difflib.get_close_matches(name, sorted(names), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown stage {name!r}{hint} (`symformer derive --list` lists them)"


def _position(stage: str, key: int | str, labels: tuple[str, ...], what: str,
              shape: tuple[int, int]) -> int:
    if isinstance(key, str):
        if key in labels:
            return labels.index(key)
        raise FillError(f"{stage}: no {what} named {key!r}; the {what}s are "
                        + ", ".join(labels))
    if 0 <= key < len(labels):
        return key
    raise FillError(f"{stage}: {what} {key} is out of range; the stage is "
                    f"{shape[0]}x{shape[1]} (positions from 0)")
