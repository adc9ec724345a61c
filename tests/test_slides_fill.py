"""Frames are filled: the deck's planned heights are the heights pdflatex sets.

The stage frames of the built-in deck (with its Backward section) are compiled with a
position marker at the top of each frame's body, one after its content and one at the
bottom of the frame's box (``\\pdfsavepos``), and each frame's planned height
(:func:`symformer.slides.deck.height`, the layout model of
:mod:`symformer.slides.layout`) is compared with the height pdflatex set.  A plan within
a few points of the measured height fills a frame up to the last line that fits, and
never past it.
"""

from __future__ import annotations

import re
import shutil

import pytest

from symformer import derive, load_example
from symformer.latex.compile import compile_log
from symformer.slides import Options, frames, measure
from symformer.slides.beamer import document
from symformer.slides.deck import StageFrame, height
from symformer.slides.deck import room as deck_room

#: Most points a worked frame's plan may be off (almost every one), and any frame's.
TOLERANCE = 4.0
WORST = 20.0
TOP = "\n\\raggedright\\setlength{\\symlhs}{0pt}"


def _marked(tex: str) -> str:
    """The deck's source with the three markers in every stage frame."""
    parts = tex.split("\\begin{frame}[t]")
    out = [parts[0]]
    for k, part in enumerate(parts[1:]):
        head, sep, rest = part.partition(TOP)
        line, nl, rest = rest.partition("\n")
        mark = f"\\pdfsavepos\\write-1{{SYMPOS {k} %s \\the\\pdflastypos}}"
        part = head + sep + line + mark % "T" + nl + rest
        part = part.replace("\\par\\end{frame}", "\\par" + mark % "B"
                            + "\\vskip 0pt plus 1filll" + mark % "E" + "\\end{frame}", 1)
        out.append(part)
    return "\\begin{frame}[t]".join(out)


@pytest.fixture(scope="module")
def measured():
    """(frame, planned height, measured height, room) of every stage frame."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    g = derive(load_example())
    options = Options(token=1, decimals=3)
    planned = [f for f in frames(g, options) if isinstance(f, StageFrame)]
    _, log = compile_log({"slides.tex": _marked(document(g, options, planned))},
                         "slides.tex", passes=1)
    pos: dict[int, dict[str, float]] = {}
    for k, where, value in re.findall(r"SYMPOS (\d+) ([TBE]) (-?\d+)", log):
        pos.setdefault(int(k), {}).setdefault(where, int(value) / 65536)
    assert len(pos) == len(planned)
    return [(f, height(f), pos[k]["T"] - pos[k]["B"], pos[k]["T"] - pos[k]["E"])
            for k, f in enumerate(planned)]


#: The room under a title on one line and on two (pt, measured).
ROOMS = {1: 187.2, 2: 166.5}


def test_the_room_is_what_pdflatex_gives(measured):
    """The plan never counts on more room than pdflatex leaves under the title."""
    rooms = {round(room, 1) for f, _, _, room in measured}
    assert rooms <= set(ROOMS.values()), rooms
    assert measure.ROOM <= ROOMS[1]
    short = [(f.title, round(room, 1)) for f, _, _, room in measured
             if deck_room(f.title) > room + 0.01]
    assert not short, short


def test_worked_frames_are_planned_at_their_measured_height(measured):
    worked = [(f.title, est, got) for f, est, got, _ in measured if not f.row]
    off = [(t, round(est, 1), round(got, 1)) for t, est, got in worked
           if abs(est - got) > TOLERANCE]
    assert len(off) <= len(worked) // 20, off
    assert all(abs(est - got) <= WORST for _, est, got in worked), off


def test_tables_frames_are_planned_at_their_measured_height(measured):
    tables = [(f.title, est, got) for f, est, got, _ in measured if f.row]
    off = [(t, round(est, 1), round(got, 1)) for t, est, got in tables
           if abs(est - got) > 2 * TOLERANCE]
    assert len(off) <= len(tables) // 10, off
    assert all(abs(est - got) <= WORST for _, est, got in tables), off


def test_no_frame_is_taller_than_its_room(measured):
    """A frame planned to fit is measured to fit."""
    assert all(got <= room + 0.01 for _, _, got, room in measured)


def test_a_weight_gradient_too_tall_for_a_frame_is_split_by_rows():
    """llama_style with a loss: W_O's gradient (8 rows, taller than a frame) is set as
    matrices, as the weight is (no column headings to widen it, never split by
    columns), four rows a frame; every part fits, the parts cover every row once, in
    order, each saying which rows, and the footer says the values are at 4 significant
    digits (gradients span magnitudes)."""
    from symformer.slides.beamer import stage_frame
    from symformer.slides.deck import fits
    from tests.test_latex_pages import with_loss

    g = derive(with_loss("llama_style"))
    deck = [f for f in frames(g, Options(token=1, decimals=3)) if isinstance(f, StageFrame)
            and f.stage.name == "grad.layer1.W_O"]
    parts = [f.items[0] for f in deck]
    assert len(parts) == 2 and all(p.table is None for p in parts)
    shown = [p.equation[-1].rhs for p in parts]
    assert "rows 0\\textendash3 of 8" in shown[0] and "rows 4\\textendash7 of 8" in shown[1]
    assert [r.count(r"\\") + 1 for r in shown] == [4, 4]  # 8 rows, once each, in order
    assert all(fits(f) for f in deck)
    footer = stage_frame(deck[0]).split("\n")[0]
    assert "rounded to 4 significant digits" in footer
