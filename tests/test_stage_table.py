"""docs/stages.md is the one table of stage names: every name of every shipped example
(``derive --list --all`` with and without a loss, and a one-step training run) matches
exactly one of its patterns, and every pattern matches some name, so the table cannot
go stale."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from symformer import Request, load_example, prepare
from symformer.blocks.side_stages import add_side_stage, side_addresses
from symformer.blocks.train import learning_rate, options, train
from symformer.example.loader import CLAIMS_ONLY, packaged_files, parse_example

TABLE = Path(__file__).resolve().parent.parent / "docs" / "stages.md"
#: The placeholders of a pattern: a number, or a name of the kind said.
NUMBERS = {"L": r"[1-9][0-9]*", "H": r"[1-9][0-9]*", "G": r"[1-9][0-9]*",
           "N": r"[1-9][0-9]*", "T": r"[0-9]+", "R": r"[0-9]+"}
LABELS = ["built-in"] + sorted(n for n in packaged_files() if n not in CLAIMS_ONLY)


def rows() -> dict[str, tuple[str, ...]]:
    """The table's rows: each pattern (the first column, backticked) with its kinds (the
    fifth column: ``()`` when it says "as S")."""
    found = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert len(cells) == 6 and re.fullmatch(r"`[^`]+`", cells[0]), line
        assert cells[0][1:-1] not in found, f"pattern twice: {cells[0]}"
        found[cells[0][1:-1]] = () if cells[4].startswith("as ") else tuple(
            cells[4].split(", "))
    return found


def _regex(pattern: str, names: dict[str, str]) -> str:
    """``pattern`` as a regular expression, its placeholders replaced."""
    out, pos = [], 0
    for m in re.finditer(r"\{([A-Z])\}", pattern):
        out.append(re.escape(pattern[pos:m.start()]))
        out.append(f"(?:{NUMBERS[m[1]] if m[1] in NUMBERS else names[m[1]]})")
        pos = m.end()
    return "".join(out) + re.escape(pattern[pos:])


@functools.cache
def compiled() -> dict[str, re.Pattern]:
    """Each pattern as a regular expression: {L} {H} {G} {N} {T} {R} are numbers; {S}
    and {C} a name of the model (a row without {S}, {W}, {C} or {A}, or a decoder row);
    {W} a name of a ``parameter`` row; {A} the part after ``layer{L}.`` of an attention
    row, ``attention.`` dropped (the decoder's ``self.concat``).  In an address of the
    terms (``{S}.exp``, ``grad.{S}.via.{C}``) S and C may be a training step's stage."""
    table = rows()
    plain = [p for p in table if not re.search(r"\{[SWCA]\}", p)]
    base = "|".join(_regex(p, {}) for p in plain)
    attention = "|".join(
        _regex(p.removeprefix("layer{L}.").removeprefix("attention."), {})
        for p in plain if p.startswith(("layer{L}.head{H}.", "layer{L}.attention.",
                                        "layer{L}.W_O", "layer{L}.b_O")))
    decoder = "|".join(_regex(p, {"S": base, "A": attention})
                       for p in table if p.startswith("decoder."))
    names = {"S": f"{base}|{decoder}", "C": f"{base}|{decoder}", "A": attention,
             "W": "|".join(_regex(p, {}) for p in plain if table[p] == ("parameter",))}
    model = names["S"]
    # an address of the terms is one of a step's stage too (step1.layer1.head1.weights.exp)
    steps = {"S": f"{model}|{_regex('step{T}.', {})}(?:{model})"}
    steps["C"] = steps["S"]

    def compile_(p: str) -> re.Pattern:
        if p.startswith("decoder."):
            return re.compile(_regex(p, {**names, "S": base}))
        return re.compile(_regex(p, {**names, **steps} if p.startswith("{S}.")
                                 or ".via." in p else names))
    return {p: compile_(p) for p in table}


def with_loss(name: str | None, kind: str) -> object | None:
    """The example with a ``[loss]`` of ``kind`` added (mse: a zero target shaped like
    its output; cross_entropy: its first vocabulary token at every position), or None
    when it has one or cannot take that kind."""
    example = load_example(name)
    if example.loss is not None or example.objective is not None:
        return None
    g = prepare(example, Request(max_work=0)).derivation
    if kind == "mse":
        out = g["output"]
        table = f'kind = "mse"\ntarget = {[[0] * out.shape[1]] * out.shape[0]}'
    elif "probabilities" in g:
        p = g["probabilities"]
        table = f'kind = "cross_entropy"\ntargets = {[p.cols[0]] * p.shape[0]}'
    else:
        return None
    text = Path(example.source).read_text(encoding="utf-8")
    return parse_example(f"{text}\n[loss]\n{table.replace(chr(39), chr(34))}\n",
                         example.source)


def listed(example) -> dict[str, str]:
    """``derive --list --all``'s names and kinds (the backward pass with a loss)."""
    p = prepare(example, Request(command="derive", side_stages=True, every_side_stage=True,
                                 backward=example.loss is not None, max_work=0))
    return {s.stage.name: s.stage.kind for s in p.shown}


def trained(example, optimizer: str = "sgd") -> dict[str, str]:
    """The stages of a one-step training run (``train --steps 1``) and their addresses
    (the Adam terms), with their kinds."""
    g = prepare(example, Request(command="train", max_work=0)).derivation
    run = train(g, learning_rate("1/10"), 1, optimizer,
                settings=options(optimizer, where="--"))
    for address in list(side_addresses(run.graph)):
        if address.startswith("step"):
            assert add_side_stage(run.graph, address)
    return {s.name: s.kind for s in run.graph}


@functools.cache
def names_of(label: str) -> dict[str, str]:
    """Every stage name of a shipped example (``built-in``: the built-in one) with its
    kind: as it is, trained when it has a loss, with an mse and a cross-entropy loss
    added (and trained) when it has none; the built-in example trained with AdamW too."""
    name = None if label == "built-in" else label
    example = load_example(name)
    found = listed(example)
    if example.loss is not None or example.objective is not None:
        found |= trained(example)
    for kind in ("mse", "cross_entropy"):
        other = with_loss(name, kind)
        if other is not None:
            found |= listed(other) | trained(other)
    if name is None:
        found |= trained(example, "adamw")
    return found


def test_the_table_has_its_rows():
    table = rows()
    assert len(table) > 80 and {"input", "grad.{S}", "step{T}.{S}"} <= set(table)


@pytest.mark.parametrize("example", LABELS)
def test_every_stage_name_matches_exactly_one_pattern(example):
    table, kinds = compiled(), rows()
    names = names_of(example)
    assert names
    matches = {n: [p for p, r in table.items() if r.fullmatch(n)] for n in names}
    wrong = {n: found for n, found in matches.items() if len(found) != 1}
    assert not wrong, f"names matching no row or several rows of docs/stages.md: {wrong}"
    unlike = {n: (names[n], found[0]) for n, found in matches.items()
              if kinds[found[0]] and names[n] not in kinds[found[0]]}
    assert not unlike, f"a kind the table does not say (kind, row): {unlike}"


def test_every_pattern_matches_a_name():
    names = {n for label in LABELS for n in names_of(label)}
    unused = [p for p, r in compiled().items() if not any(r.fullmatch(n) for n in names)]
    assert not unused, f"rows of docs/stages.md no shipped example has: {unused}"


def test_the_placeholders_are_strict():
    table = compiled()
    assert table["layer{L}.head{H}.Q"].fullmatch("layer12.head3.Q")
    assert not table["layer{L}.head{H}.Q"].fullmatch("layer0.head1.Q")
    assert table["grad.{S}"].fullmatch("grad.decoder.layer1.cross.head1.K")
    assert not table["grad.{S}"].fullmatch("grad.layer1.head1.Q.via.layer1.head1.raw_scores")
    assert table["step{T}.adam_m.{W}"].fullmatch("step1.adam_m.layer1.head1.W_Q")
    assert not table["step{T}.adam_m.{W}"].fullmatch("step1.adam_m.layer1.head1.Q")
