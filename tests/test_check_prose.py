"""``symformer check NOTES``: hand-typed numbers in prose, tied to entries by
``symformer:`` annotations, flagged with their line once the example changes.

Expected values come from the independent float64 pass (tests/float_reference.py),
rounded with Python's decimal module.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.cli import main
from symformer.example import load_example
from symformer.verify.prose import prose_numbers
from tests.float_reference import float_forward
from tests.test_figures import far_from_tie, rounded

BUILTIN = Path(__file__).resolve().parents[1] / "symformer" / "example" / "builtin.toml"


def run(*argv: str) -> int:
    return main(list(argv))


def percent(x: float, decimals: int = 0) -> str:
    return rounded(100 * x, decimals)


def notes(ref) -> str:
    """LaTeX notes typed by hand from the float64 values of ``ref``."""
    w2 = ref["layer1.head2.weights"]
    w1 = ref["layer1.head1.weights"]
    q = ref["layer1.head1.Q"]
    return "\n".join([
        r"\section{Attention}",
        f"The word think puts {percent(w2[1, 3])}\\% of its attention on understand."
        " % symformer: layer1.head2.weights[1,3]",
        f"In head 1, $\\alpha_{{1,3}} = {rounded(w1[1, 3], 2)}$."
        " % symformer: layer1.head1.weights[\"think\", \"understand\"]",
        f"Its query starts $q_0 = {rounded(q[1, 0], 3)}$ and $q_1 = {rounded(q[1, 1], 3)}$.",
        "% symformer: layer1.head1.Q[1,0], layer1.head1.Q[1,1]",
        "",
    ])


def test_matching_numbers_pass(tmp_path, capsys):
    ref = float_forward(load_example())
    assert far_from_tie(100 * ref["layer1.head2.weights"][1, 3], 0)
    doc = tmp_path / "notes.tex"
    doc.write_text(notes(ref))
    assert "44\\%" in doc.read_text()  # the sentence: 44% on "understand"
    assert run("check", str(doc)) == 0
    assert "4 of 4 numbers correct" in capsys.readouterr().out


def changed_example(tmp_path: Path) -> Path:
    """The built-in example with the embedding of "think" changed."""
    text = BUILTIN.read_text()
    new = text.replace("[4, 1, 0, 2],  # think", "[3, 1, 1, 2],  # think")
    assert new != text
    path = tmp_path / "changed.toml"
    path.write_text(new)
    return path


def test_stale_numbers_are_flagged_with_their_line(tmp_path, capsys):
    old = float_forward(load_example())
    doc = tmp_path / "notes.tex"
    doc.write_text(notes(old))
    changed = changed_example(tmp_path)
    new = float_forward(load_example(str(changed)))
    # which printed numbers no longer hold, from the float64 values alone:
    # (line, stage, row, column, scale, decimals) as notes() prints them
    entries = [(2, "layer1.head2.weights", 1, 3, 100, 0),
               (3, "layer1.head1.weights", 1, 3, 1, 2),
               (4, "layer1.head1.Q", 1, 0, 1, 3),
               (4, "layer1.head1.Q", 1, 1, 1, 3)]
    stale = []
    for line, stage, i, j, scale, decimals in entries:
        x, y = scale * old[stage][i, j], scale * new[stage][i, j]
        assert far_from_tie(y, decimals)
        if rounded(x, decimals) != rounded(y, decimals):
            stale.append(line)
    assert stale  # the change makes some hand-typed number wrong
    assert run("check", str(doc), "--example", str(changed)) == 1
    out = capsys.readouterr().out
    flagged = {int(m) for m in re.findall(r"^line (\d+) -> .*wrong$", out, re.MULTILINE)}
    assert flagged == set(stale)
    assert f"{len(entries) - len(stale)} of {len(entries)} numbers correct" in out


def test_markdown_annotations(tmp_path, capsys):
    ref = float_forward(load_example())
    w = ref["layer1.head2.weights"][1, 3]
    doc = tmp_path / "post.md"
    doc.write_text(f"Think puts {percent(w, 1)}% of its attention on understand "
                   "<!-- symformer: layer1.head2.weights['think', 'understand'] -->\n"
                   f"and {rounded(ref['layer1.head1.weights'][1, 1], 3)} on itself.\n"
                   "<!-- symformer: layer1.head1.weights[1, 1] -->\n")
    assert run("check", str(doc)) == 0
    assert "2 of 2 numbers correct" in capsys.readouterr().out


@pytest.mark.parametrize("line, message", [
    ("0.5 % symformer: layer1.head1.weightz[1,1]", "line 1: unknown stage"),
    ("0.5 % symformer: layer1.head1.weights[1,9]", "line 1: layer1.head1.weights has 4 columns"),
    ("0.5 % symformer: layer1.head1.weights['you', 1]", "no row 'you'"),
    ("no number % symformer: layer1.head1.weights[1,1]", "line 1: the annotation names 1"),
    ("0.5 % symformer: weights", "line 1: expected an annotation"),
])
def test_bad_annotations_exit_2_naming_the_line(tmp_path, capsys, line, message):
    doc = tmp_path / "notes.tex"
    doc.write_text(line + "\n")
    assert run("check", str(doc)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


STAGES = {"s": (("a", "b"), ("c", "d"))}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(0, 6), st.booleans(), st.booleans())
def test_claimed_text_is_the_printed_number(units, places, negative, as_percent):
    whole, part = divmod(units, 10 ** places)
    printed = str(units) if places == 0 else f"{whole}.{part:0{places}d}"
    sign = "\u2212" if negative else ""
    mark = "\\%" if as_percent else ""
    (number,) = prose_numbers(f"x_{{1,2}} = {sign}{printed}{mark} % symformer: s[1, 'c']",
                              "n.tex", STAGES)
    expected = Decimal(("-" if negative else "") + printed) / (100 if as_percent else 1)
    assert Decimal(number.text) == expected
    assert (number.line, number.row, number.col) == (1, 1, 0)
    decimals = places + (2 if as_percent else 0)
    assert len(number.text.partition(".")[2]) == decimals
