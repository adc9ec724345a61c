"""One token's path: the entries of the asked stages a student computes for one token.

A teaching assistant's sheet asks for one token's way through the asked steps, not
every entry of every table: the query of "think", every key and value it attends to,
its row of scores and weights, its output.  The asked entries are found from the
stages' local formulas, never from their names: start from the token's row of every
asked stage that no other asked stage reads (the last steps), and add every entry of
an asked stage that an asked entry's formula reads.  A masked score (−∞) and its weight
(0) are not asked (the sheet prints them), nor the keys and values behind them.

:class:`Asked` is the list of asked stage names (in derivation order) carrying these
entries; every constraint, the sheets, the key and ``grade`` look only at them
(:func:`entries_of`).  A plain list means every entry of every asked stage.
"""

from __future__ import annotations

from collections.abc import Iterable

from symformer.engine import Derivation
from symformer.engine.arbmath import NEG_INF
from symformer.errors import InputError

Cells = frozenset[tuple[int, int]]


class Asked(list):
    """The asked stage names, with the entries asked of each (``cells``)."""

    cells: dict[str, Cells]

    def __init__(self, names: Iterable[str], cells: dict[str, Cells]) -> None:
        super().__init__(names)
        self.cells = cells


def entries_of(asked: list[str], name: str, shape: tuple[int, int]) -> Cells:
    """The asked entries (row, column) of asked stage ``name`` of ``shape``."""
    cells = getattr(asked, "cells", None)
    if cells is not None and name in cells:
        return cells[name]
    return frozenset((i, j) for i in range(shape[0]) for j in range(shape[1]))


def asked_rows(asked: list[str], name: str, shape: tuple[int, int]) -> list[int]:
    """The rows of ``name`` with an asked entry, in order."""
    return sorted({i for i, _ in entries_of(asked, name, shape)})


def check_rows(g: Derivation, names: list[str], token: int, source: str) -> None:
    """Refuse, in one line naming the stage and its kind, an asked stage whose rows are
    not the sentence's positions (the next token's choice, one row for the last
    position; a decision over the vocabulary): a sheet follows token ``token``'s row
    through every asked step."""
    for n in names:
        stage = g[n]
        if stage.op.picks_token or stage.shape[0] <= token:
            raise InputError(
                f"{source}: --ask {n}: the stage's rows ({', '.join(map(str, stage.rows))}) "
                f"are not the sentence's positions (operation {stage.op.name!r}), so a sheet "
                f"cannot follow token {token} through it; ask the stages before it "
                f"(e.g. the probabilities)")


def check_work(g: Derivation, asked: list[str], source: str) -> None:
    """Refuse (one line) an asked stage whose every asked entry is 0 whatever the drawn
    numbers (a dropout mask's dropped row: the sheet would ask what the given mask
    already says).  Only a step holding no weight is judged: its local formulas read its
    inputs as symbols, so a 0 there is the step's own; a projection's 0 may be the
    template's weights (decoding_lesson's W_V = 0), which a variant draws anew."""
    for n in asked:
        if g[n].op.parameters():  # its weights are drawn: the template's zeros may go
            continue
        local = g.local(n)
        cells = entries_of(asked, n, g[n].shape)
        if cells and all(local[i, j] == 0 for i, j in cells):
            rows = sorted({i for i, _ in cells})
            raise InputError(
                f"{source}: --ask {n}: every asked entry (row {', '.join(map(str, rows))}) "
                f"is 0 whatever the numbers (operation {g[n].op.name!r}): nothing to compute; "
                f"follow another token (--token)")


def token_path(g: Derivation, names: list[str], token: int) -> Asked:
    """The asked stages ``names`` with the entries of token ``token``'s path."""
    names = list(names)
    read = {i for n in names for i in g[n].inputs}
    found: dict[str, set[tuple[int, int]]] = {n: set() for n in names}
    masked, zero = _masked(g, names)
    off = masked | zero  # known from the mask: printed, never asked
    for n in names:
        if n not in read:
            found[n] |= {(token, j) for j in range(g[n].shape[1])
                         if (n, token, j) not in off}
    for n in reversed(names):
        if not found[n]:
            continue
        local = g.local(n)
        for i, j in sorted(found[n]):
            if (n, i, j) in masked or (n, i, j) in zero:
                continue
            formula = local[i, j]
            zeros = {s: 0 for s in formula.free_symbols if not str(s).startswith("const:")
                     and g.owner(s) in zero}
            for s in (formula.xreplace(zeros) if zeros else formula).free_symbols:
                if str(s).startswith("const:"):
                    continue
                source, r, c = g.owner(s)
                if source in found and (source, r, c) not in off:
                    found[source].add((r, c))
    return Asked(names, {n: frozenset(c) for n, c in found.items()})


def _masked(g: Derivation, names: list[str]
            ) -> tuple[set[tuple[str, int, int]], set[tuple[str, int, int]]]:
    """The entries that are -inf (masked scores), and the softmax weights that are 0
    because their score is masked (a value behind them is not needed)."""
    needed = set(names).union(*(g.ancestors(n) for n in names))
    every = g.evaluate(192)
    balls = {n: every[n] for n in needed}
    masked = {(n, i, j) for n in balls for i, row in enumerate(balls[n])
              for j, b in enumerate(row) if b is NEG_INF}
    zero = {(n, i, j) for n in balls if g[n].op.weighs_keys
            for (s, i, j) in masked if s == g[n].inputs[0]}
    return masked, zero


#: The most entries the default sheet asks (one token's path, a TA's exercise).
MAX_ENTRIES = 40


def count(asked: Asked) -> int:
    """How many entries ``asked`` asks."""
    return sum(len(c) for c in asked.cells.values())


def short_path(g: Derivation, names: list[str], token: int, limit: int = MAX_ENTRIES
               ) -> Asked:
    """:func:`token_path`, within ``limit`` entries: while it asks more, the last asked
    stage computed from given tables alone (the values V, of the three projections) is
    given instead of asked (it is then printed with the given tables)."""
    names = list(names)
    while True:
        path = token_path(g, names, token)
        if count(path) <= limit:
            return path
        chosen = set(names)
        starts = [n for n in names if not chosen.intersection(g[n].inputs)
                  and any(n in g[m].inputs for m in names)]
        if len(starts) < 2:
            return path  # nothing left to give: the path starts there
        names.remove(starts[-1])
