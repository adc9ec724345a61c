"""``symformer slides``: a Beamer deck that compiles, has the promised pages, the right
numbers on them and no overfull box.

Numbers are compared with the independent float64 pass (tests/float_reference.py),
rounded with Python's decimal module; pages are counted with poppler's ``pdfinfo`` and
read with ``pdftotext``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.cli import main
from symformer.figures.data import Options as FigureOptions
from symformer.figures.data import figures
from symformer.latex.document import renames
from tests.float_reference import float_forward
from tests.test_figures import far_from_tie, needs_pgfplots, rounded

needs_poppler = pytest.mark.skipif(
    shutil.which("pdfinfo") is None or shutil.which("pdftotext") is None,
    reason="pdfinfo/pdftotext (poppler-utils) are not installed")
OVERFULL = re.compile(r"Overfull \\[hv]box")


def run(*argv: str) -> int:
    return main(list(argv))


def pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    return int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.MULTILINE).group(1))


@functools.cache
def _page_texts(pdf: Path) -> tuple[str, ...]:
    """Every page's text, from one pdftotext run (pages end with a form feed)."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout
    return tuple(text.split("\f"))


def page_text(pdf: Path, k: int) -> str:
    """The text of page ``k`` (1-based)."""
    return _page_texts(pdf)[k - 1]


def promised_pages(g) -> int:
    """The design: a title page, 3 overlays per stage (renaming stages have none), one
    page per figure."""
    stages = [s for s in g if not renames(s)]
    return 1 + 3 * len(stages) + len(figures(g, FigureOptions(token=1, decimals=3)))


@pytest.fixture(scope="module")
def builtin_deck(tmp_path_factory) -> Path:
    """The built-in example's deck, compiled once for the file (``../stderr.txt``: what the
    command wrote on stderr, where it reports the log's overfull boxes)."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    out = tmp_path_factory.mktemp("slides") / "deck"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert run("slides", "--out", str(out), "--pdf", "--quiet") == 0
    (out.parent / "stderr.txt").write_text(err.getvalue(), encoding="utf-8")
    return out


def first_pass_log(tex: str, tmp_path: Path) -> str:
    """pdflatex's log of one pass over ``tex``.  The deck reads nothing back from its
    .aux (no \\ref or \\label; only the footline's frame total, in a box that cannot
    overflow), so the second pass sets every line as the first did: one pass suffices
    to find overfull boxes."""
    (tmp_path / "slides.tex").write_text(tex, encoding="utf-8")
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-draftmode",
                    "slides.tex"], cwd=tmp_path, capture_output=True, check=True, timeout=300)
    return (tmp_path / "slides.log").read_text(encoding="utf-8", errors="replace")


@needs_pgfplots
@needs_poppler
def test_slides_pdf_has_one_page_per_overlay_step(builtin_deck):
    pdf = builtin_deck / "slides.pdf"
    g = derive(load_example())
    assert pages(pdf) == promised_pages(g) == 1 + 3 * 37 + 5  # 2 heads, PE, 2 LayerNorms
    # every stage's frame is three consecutive pages, in the order of the stages
    seen = []
    for k in range(2, pages(pdf) + 1):
        head = page_text(pdf, k).splitlines()[1:2]
        name = head[0].split("\u2014")[0].strip() if head and "\u2014" in head[0] else None
        if name is not None:
            seen.append(name)
    assert seen == [s.name for s in g for _ in range(3)]


@needs_pgfplots
@needs_poppler
def test_slides_show_the_tokens_numbers_then_its_row(builtin_deck):
    pdf = builtin_deck / "slides.pdf"
    ref = float_forward(load_example())
    start = next(k for k in range(2, pages(pdf) + 1)
                 if "layer1.head1.weights \u2014" in page_text(pdf, k))
    equation, worked, result = (page_text(pdf, start + k) for k in range(3))
    weights = ref["layer1.head1.weights"][1]  # the token "think", position 1
    expected = [rounded(w, 3) for w in weights if far_from_tie(w, 3)]
    assert expected
    assert not any(e in equation for e in expected)  # overlay 1: the general formula only
    for text in expected:
        assert text in worked  # overlay 2: the worked lines end with the results
        assert text in result  # overlay 3: the table
    row = next(line for line in result.splitlines() if re.match(r"\s*1\s+think\b", line))
    assert row.split()[2:] == [rounded(w, 3) for w in weights]
    # the Q frame: the token's query row, substituted and in the table
    start = next(k for k in range(2, pages(pdf) + 1)
                 if "layer1.head1.Q \u2014" in page_text(pdf, k))
    q = [rounded(v, 3) for v in ref["layer1.head1.Q"][1]]
    assert all(v in page_text(pdf, start + 1) for v in q)
    row = next(line for line in page_text(pdf, start + 2).splitlines()
               if re.match(r"\s*1\s+think\b", line))
    assert row.split()[2:] == q


@needs_pgfplots
def test_builtin_slides_have_no_overfull_box(builtin_deck):
    """The built-in deck (compiled by ``slides --pdf``, which warns of each overfull
    box of the log on stderr)."""
    err = (builtin_deck.parent / "stderr.txt").read_text(encoding="utf-8")
    assert not OVERFULL.findall(err), err
    tex = (builtin_deck / "slides.tex").read_text(encoding="utf-8")
    assert "\\rowcolor" in tex  # the followed token's row is highlighted


@needs_pgfplots
@pytest.mark.parametrize("example", ["gpt2_style", "llama_style"])
def test_slides_have_no_overfull_box(tmp_path, example):
    assert run("slides", example, "--out", str(tmp_path / "deck"), "--quiet") == 0
    tex = (tmp_path / "deck" / "slides.tex").read_text(encoding="utf-8")
    log = first_pass_log(tex, tmp_path)
    assert not OVERFULL.findall(log), [ln for ln in log.splitlines() if OVERFULL.search(ln)]
    assert "\\rowcolor" in tex  # the followed token's row is highlighted


def test_slides_tex_marks_three_overlays_per_stage(tmp_path):
    assert run("slides", "--out", str(tmp_path), "--token", "think", "--stage",
               "layer1.head1.*") == 0
    tex = (tmp_path / "slides.tex").read_text(encoding="utf-8")
    assert tex.count("\\only<2>") == tex.count("\\only<3>") == 7
    assert "\\begin{tikzpicture}" in tex  # the head's attention map
    assert "token \u201cthink\u201d, position 1" in tex


@pytest.mark.parametrize("argv, message", [
    (["--token", "9"], "token position 9 is out of range"),
    (["--token", "banana"], "unknown token 'banana'"),
    (["--stage", "nope.*"], "no stage matches"),
    (["--token", "-1"], "token position -1 is out of range"),
])
def test_slides_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    out = tmp_path / "deck"
    assert run("slides", "--out", str(out), *argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_slides_out_that_is_a_file_or_unwritable(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("keep")
    assert run("slides", "--out", str(target)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a regular file" in err[0]
    assert target.read_text() == "keep"
    if os.geteuid() == 0:
        return  # root writes anywhere
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert run("slides", "--out", str(locked / "deck")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot" in err[0]
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)
