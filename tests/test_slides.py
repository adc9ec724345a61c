"""``symformer slides``: a Beamer deck a lecturer teaches from unedited.

Each shipped example's deck is built once per session (one module-scoped fixture per
deck) and checked as a lecturer would see it: no word below 9 pt on a frame (word
heights from poppler's ``pdftotext -bbox``, outside the footline), no overfull box,
no internal identifier on screen (``pdftotext``), overlays that only add, in the
order equation, numbers, results, table; and the right numbers (compared with the
independent float64 pass, tests/float_reference.py, rounded with Python's decimal
module).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.cli import main
from symformer.latex.compile import compile_log
from symformer.slides import Options, frames, measure, page_count, slides_files
from symformer.slides.deck import StageFrame, _opened, stage_frames
from tests.float_reference import float_forward
from tests.test_figures import far_from_tie, needs_pgfplots, rounded

needs_poppler = pytest.mark.skipif(
    shutil.which("pdfinfo") is None or shutil.which("pdftotext") is None,
    reason="pdfinfo/pdftotext (poppler-utils) are not installed")
#: An overfull box (text past the frame) or an underfull line (words spaced out).
OVERFULL = re.compile(r"Overfull \\[hv]box|Underfull \\hbox")
#: The least height of a word on a frame, in PDF points at the frame's size (160 mm
#: wide), and the band at the foot of the page kept for the footline (frame number,
#: token followed).
LEAST_HEIGHT = 9.0
FOOTLINE = 16.0
#: Internal identifiers that must not reach a frame: stage names, names with an
#: underscore (``raw_scores``, ``W_O`` with a visible underscore), ASCII spellings.
INTERNAL = re.compile(r"layer\d+\.|head\d+\.|\b[A-Za-z]\w*_\w+|\bgamma\b|\beps\b|U\+[0-9A-F]{4}")


def run(*argv: str) -> int:
    return main(list(argv))


def pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    return int(re.search(r"^Pages:\s+(\d+)", info.stdout, re.MULTILINE).group(1))


def page_texts(pdf: Path) -> list[str]:
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout
    return text.split("\f")[:-1]


PAGE = re.compile(r'<page width="[\d.]+" height="([\d.]+)">(.*?)</page>', re.S)
WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">'
                  r'(.*?)</word>', re.S)


def small_words(pdf: Path) -> list[tuple[int, float, str]]:
    """(page, height, word) of every word with a letter or digit below LEAST_HEIGHT
    outside the footline; a delimiter's glyph (no letter, no digit) is no text.

    A word set vertically (an axis title) is measured across: its height is its width.
    It is known by its line: words sharing its x-range, one of them at least twice as
    tall as it is wide and of three characters or more (a word written upwards)."""
    xml = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True,
                         text=True, check=True).stdout
    out = []
    for k, page in enumerate(PAGE.finditer(xml), 1):
        height = float(page.group(1))
        words = [(float(a), float(b), float(c), float(d), t)
                 for a, b, c, d, t in WORD.findall(page.group(2))]
        upright = [(x0, x1) for x0, y0, x1, y1, t in words
                   if len(t) >= 3 and y1 - y0 > 2 * (x1 - x0)]
        for x0, y0, x1, y1, text in words:
            turned = any(abs(x0 - a) < 0.5 and abs(x1 - b) < 0.5 for a, b in upright)
            size = x1 - x0 if turned else y1 - y0
            if y0 < height - FOOTLINE and re.search(r"\w", text) and size < LEAST_HEIGHT:
                out.append((k, round(size, 2), text))
    return out


@functools.cache
def derived(name: str):
    """A shipped example's derivation, once per module: the decks and the tests of their
    frames share its certified values and proofs (the built-in one is ``block``)."""
    return derive(load_example(name))


def _build(tmp_path_factory, g):
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    options = Options(token=1, decimals=3)
    tex = slides_files(g, options)["slides.tex"]
    # one pass: a deck has no cross-reference, and its frames' layout (the boxes, the
    # words' sizes, the pages) is the first pass's; `slides --pdf` runs two
    pdf_bytes, log = compile_log({"slides.tex": tex}, "slides.tex", passes=1)
    pdf = tmp_path_factory.mktemp("slides") / "slides.pdf"
    pdf.write_bytes(pdf_bytes)
    return {"g": g, "tex": tex, "pdf": pdf, "log": log,
            "pages": page_count(frames(g, options))}


@pytest.fixture(scope="module")
def builtin_deck(tmp_path_factory, block):
    return _build(tmp_path_factory, block)


@pytest.fixture(scope="module")
def gpt2_deck(tmp_path_factory):
    return _build(tmp_path_factory, derived("gpt2_style"))


@pytest.fixture(scope="module")
def llama_deck(tmp_path_factory):
    return _build(tmp_path_factory, derived("llama_style"))


@pytest.fixture(params=["builtin_deck", "gpt2_deck", "llama_deck"])
def deck(request):
    return request.getfixturevalue(request.param)


@needs_pgfplots
@needs_poppler
def test_no_word_on_a_frame_is_below_9pt(deck):
    small = small_words(deck["pdf"])
    assert not small, small[:10]


@needs_pgfplots
def test_no_frame_is_overfull(deck):
    bad = [ln for ln in deck["log"].splitlines() if OVERFULL.search(ln)]
    assert not bad, bad
    assert "\\resizebox" not in deck["tex"] and "\\scalebox" not in deck["tex"]


@needs_pgfplots
@needs_poppler
def test_no_internal_identifier_on_screen(deck):
    found = [(k, m.group()) for k, text in enumerate(page_texts(deck["pdf"]), 1)
             for m in INTERNAL.finditer(text)]
    assert not found, found[:10]


@needs_pgfplots
@needs_poppler
def test_pages_are_the_planned_overlays(deck):
    assert pages(deck["pdf"]) == deck["pages"]


#: One reveal in the generated source: ``\uncover<n->`` (from step n on, never removed).
UNCOVER = re.compile(r"\\uncover<(\d+)->")


def frame_sources(tex: str) -> list[str]:
    return re.findall(r"\\begin\{frame\}\[t\].*?\\end\{frame\}", tex, re.S)


def test_overlays_only_add_in_the_order_equation_numbers_results_table(block):
    tex = slides_files(block, Options(token=1))["slides.tex"]
    # nothing is ever taken away: no \only, \alt, \temporal, no closed overlay range
    assert not re.search(r"\\only|\\alt<|\\temporal|\\onslide<\d+>|<\d+-\d+>|<\d+>", tex)
    checked = revealed = 0
    for source in frame_sources(tex):
        lines = [ln for ln in source.splitlines() if "\\symline" in ln]
        equation = [ln for ln in lines if "\\uncover" not in ln]
        worked = [ln for ln in lines if "\\uncover" in ln]
        if not worked:
            continue
        checked += 1
        assert equation, "the general equation comes first, shown from the start"
        assert source.index(equation[0]) < source.index(worked[0])
        steps = [[int(n) for n in UNCOVER.findall(ln.split("\\symline")[-1])]
                 for ln in worked]
        for s in steps:
            # the left-hand side comes with the line's first reveal, the substituted
            # numbers with it, the result with them or one keystroke later
            assert s[0] == s[1] and s == sorted(s) and s[-1] - s[0] <= 1, s
        revealed += any(s[-1] > s[0] for s in steps)
        assert min(s[0] for s in steps) == 1  # the numbers come with the equation
        result = max(max(s) for s in steps)
        if "tabular" in source:  # the table with the token's row, last, the working kept
            tables = [int(n) for n in re.findall(
                r"\\uncover<(\d+)->\{(?:\{\\centering|\\begin\{minipage\})", source)]
            assert all(t <= result for t in tables) and "\\rowcolor" in source
            assert not tables or max(tables) == result
    assert checked >= 15 and revealed >= 10


#: A table's row for position 1, "think", at the end of a line of ``pdftotext -layout``
#: (the working may stand left of the table).
ROW = re.compile(r"(?:^|\s{2})\s*1\s+think((?:\s+[-\u2212]?\d+\.\d+)+)\s*$")


def table_row(texts: list[str]) -> list[str]:
    """The numbers of the row of "think" in the first table of the pages ``texts``."""
    return next(m.group(1).split() for t in texts for line in t.splitlines()
                if (m := ROW.search(line)))


@needs_pgfplots
@needs_poppler
def test_slides_show_the_tokens_numbers_then_its_row(builtin_deck):
    texts = page_texts(builtin_deck["pdf"])
    ref = float_forward(load_example())
    weights = ref["layer1.head1.weights"][1]  # the token "think", position 1
    expected = [rounded(w, 3) for w in weights if far_from_tie(w, 3)]
    assert expected
    frame = [t for t in texts if "Layer 1, Head 1: Attention weights" in t]
    assert not any(e in frame[0] for e in expected)  # step 1: the general formula only
    assert all(any(e in t for t in frame) for e in expected)  # the results, step by step
    assert table_row(frame) == [rounded(w, 3) for w in weights]  # the table's row
    q = [rounded(v, 3) for v in ref["layer1.head1.Q"][1]]
    frame = [t for t in texts if "Layer 1, Head 1: Query" in t]
    assert not any(v in frame[0] for v in q)
    assert table_row(frame) == q


@needs_pgfplots
@needs_poppler
def test_the_fallback_theme_builds_alike(tmp_path, block):
    """Without metropolis (a TeX Live without latex-extra) the plain frame builds the
    same pages: nothing overfull, no word below 9 pt."""
    g = block
    options = Options(token=1, stages=("layer1.head1.Q", "layer1.head1.weights"))
    tex = slides_files(g, options)["slides.tex"]
    assert "\\IfFileExists{beamerthememetropolis.sty}" in tex
    tex = tex.replace("\\IfFileExists{beamerthememetropolis.sty}", "\\IfFileExists{no-such.sty}")
    pdf, log = compile_log({"slides.tex": tex}, "slides.tex")
    assert not OVERFULL.search(log) and "metropolis" not in log
    (tmp_path / "slides.pdf").write_bytes(pdf)
    assert pages(tmp_path / "slides.pdf") == page_count(frames(g, options))
    assert not small_words(tmp_path / "slides.pdf")


def test_long_working_is_split_never_shrunk():
    g = derived("llama_style")
    deck = frames(g, Options(token=1))
    parts = [f for f in deck if isinstance(f, StageFrame) and f.parts > 1]
    assert parts  # some stage takes more than one frame
    for f in parts:
        assert f.title == next(x for x in deck if isinstance(x, StageFrame)
                               and x.stage is f.stage).title


def test_repeated_steps_show_their_tables_and_say_so(block):
    """The second head repeats the first's equations: its stages show their tables
    (the token's row highlighted) under a sentence naming where they were worked, said
    on its first frame, and ``full`` works them too; a frame takes several stages where
    they fit."""
    g = block
    deck = [f for f in frames(g, Options(token=1)) if isinstance(f, StageFrame)]
    second = [f for f in deck if f.stage.name.startswith("layer1.head2.")]
    assert second and all(f.row and not any(i.lines for i in f.items) for f in second)
    assert all(i.table.highlight_row == 1 for f in second for i in f.items)
    assert "Worked as in Layer 1, Head 1," in second[0].note
    assert all(f.said == second[0].note and not f.note for f in second[1:])
    assert any(len(f.items) > 1 for f in deck)
    full = [f for f in frames(g, Options(token=1, full=True)) if isinstance(f, StageFrame)]
    assert all(any(i.lines for i in f.items) for f in full
               if f.stage.name == "layer1.head2.Q" and f.part == 1)
    assert page_count(deck) < page_count(full)


def test_a_bracketed_sum_too_wide_for_a_frame_may_break():
    """``\\left(``...``\\right)`` is one box TeX never breaks: the outermost round pair
    becomes ``\\Bigl(``...``\\Bigr)``; inner pairs and other delimiters stay."""
    wide = r"= \frac{1}{4} \left(\left(r_{0} - \mu\right)^{2} + \left(r_{1} - \mu\right)^{2}\right)"
    assert _opened(wide) == (r"= \frac{1}{4} \Bigl(\left(r_{0} - \mu\right)^{2}"
                             r" + \left(r_{1} - \mu\right)^{2}\Bigr)")
    assert _opened(r"\left[ a + b \right] + \left( c \right.") \
        == r"\left[ a + b \right] + \left( c \right."


#: Width, height and depth (pt) pdflatex gave these pieces in the deck's preamble
#: (``\setbox0\hbox{$\displaystyle{}...$}``, ``\wd0``, ``\ht0``, ``\dp0``).
SET_BY_PDFLATEX = {
    "q^{(1)}_{0}": (19.557, 14.633, 4.079),
    "q_{0}": (10.960, 5.167, 2.479),
    r"\mathrm{PE}_{p,2c}": (34.482, 8.384, 4.520),
    r"\sigma^2": (12.859, 11.567, 0.0),
    r"\tilde{\sigma}": (7.109, 7.557, 0.0),
    r"{}= \frac{\exp s^{(1)}_{i,j}}{\sum_{m = 0}^{n - 1} \exp s^{(1)}_{i,m}}":
        (95.636, 25.467, 19.467),
    r"{}= \sqrt{\sigma^2 + 0.000001}": (97.526, 15.023, 3.377),
    r"{}= \sum_{m = 0}^{d_{\text{in}} - 1} x_{i,m} \left(W_{Q}^{(1)}\right)_{m,j}":
        (129.792, 23.398, 14.279),
}


@pytest.mark.parametrize("latex", list(SET_BY_PDFLATEX))
def test_the_layout_model_sets_pieces_as_pdflatex(latex):
    """Scripts one over the other, a display fraction with a sum under it, a radical, a
    sum's limits, a sized bracket: as wide, tall and deep as pdflatex set them."""
    from symformer.slides import layout

    got = layout.box(latex)
    w, h, d = SET_BY_PDFLATEX[latex]
    assert abs(got.w - w) <= 0.02 * w + 0.5 and abs(got.h - h) <= 0.6 and abs(got.d - d) <= 0.6


def test_symbols_with_two_scripts_are_planned_taller_and_stacked():
    """A worked line ``q^{(1)}_{0} = ...`` is planned taller than ``q_{0} = ...`` (its
    scripts reach above the baseline skip), a table header ``a^{(2)}_{0}`` taller than
    ``a_{0}``; a sub- and superscript stand one over the other (as wide as the wider)."""
    from symformer.slides.deck import Column

    def worked(lhs, rhs):
        column = Column()
        column.depth = 3.0  # under a line of text
        column.paragraph(measure.worked_lines(lhs, (rhs,), measure.lhs_width(lhs)))
        return column.total
    assert worked("q^{(1)}_{0}", "= 1.660 + 2.3") - worked("q_{0}", "= 1.660 + 2.3") >= 3.5
    assert worked("e^{s^{(1)}_{0}}", "= e^{1.660}") - worked("e^{s_{0}}", "= e^{1.660}") >= 5.2
    rows = [("", "1")] * 3
    assert measure.tabular_height(("a^{(2)}_{0}",), rows) \
        - measure.tabular_height(("a_{0}",), rows) >= 3.5
    assert measure.width("W_{V}^{(1)}") == measure.width("W^{(1)}")


def test_zero_weight_terms_are_said_to_be_left_out(block):
    """The built-in example's Layer 1, Head 1 W_Q has entries exactly 0 (the example
    file: W_Q = [[0.25, 0], [0.25, 0], [0, 0.25], [0, 0.25]]): the query's worked lines
    leave those terms out (two terms of four) and the frame says so; the scaled scores
    have no weight matrix and no such sentence."""
    g = block
    (q,) = [i for f in stage_frames(g["layer1.head1.Q"], Options(token=1))
            for i in f.items if i.lines]
    assert "Terms with a weight of exactly 0 are left out." in q.note
    assert all(w.shown[0].count("+") == 1 for w in q.lines)
    (m,) = [i for f in stage_frames(g["layer1.head1.scores"], Options(token=1))
            for i in f.items if i.lines]
    assert m.note == ""


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


def test_slides_tex_for_a_stage_filter(tmp_path):
    assert run("slides", "--out", str(tmp_path), "--token", "think", "--stage",
               "layer1.head1.*") == 0
    tex = (tmp_path / "slides.tex").read_text(encoding="utf-8")
    assert tex.count("\\setbeamertemplate{frame footer}{token \u201cthink\u201d, position 1; "
                     "rounded to 3 decimals}")
    assert "\\begin{tikzpicture}" in tex  # the head's attention map
    assert "Layer 1, Head 1: Query" in tex and "Layer 1, Head 2" not in tex


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


def test_the_deck_starts_with_the_block_diagram(block):
    """The first frame after the title is the architecture's block diagram; an
    encoder-decoder too wide for one frame has one per side, each before the stages."""
    from symformer.slides.deck import DiagramFrame

    for g, sides in ((block, [None]), (derived("encoder_decoder"), ["encoder", "decoder"])):
        deck = frames(g, Options(token=1))
        kinds = [isinstance(f, DiagramFrame) for f in deck]
        first = kinds.index(False)
        assert not any(kinds[first:]) and first == len(sides)
        assert [f.diagram.extra.get("part") for f in deck[:first]] == sides


def test_general_equations_are_display_style_and_brackets_stay_whole():
    """A general equation is set in display style (limits under a sum, full fractions);
    a plain bracket of a worked line is one group TeX cannot break inside, where it fits;
    titles are never hyphenated; "causal mask" joins the title's own parenthesis."""
    from symformer.slides.deck import _kept
    from symformer.words import with_causal_mask

    g = derived("llama_style")
    tex = slides_files(g, Options(token=1, stages=("layer1.ffn.gate_activation",)))[
        "slides.tex"]
    assert "$\\displaystyle {}= \\frac{" in tex and "\\textstyle" not in tex
    assert "\\hyphenpenalty=10000" in tex
    assert _kept(r"= \frac{1}{4} \left((5.557 - 3.587)^{2} + 1\right)", 30) == \
        r"= \frac{1}{4} \left({(5.557 - 3.587)}^{2} + 1\right)"
    assert _kept(r"(1 + 2 + 3)", 0.5) == r"(1 + 2 + 3)"  # too wide: TeX may break it
    assert with_causal_mask("A model (RMSNorm, GQA)", True) == "A model (RMSNorm, GQA; causal mask)"
    assert with_causal_mask("A model", True) == "A model (causal mask)"


def test_a_deck_with_a_loss_ends_with_its_backward_section(block):
    """The built-in example has a [loss]: after the forward stages a Backward section
    opens, then the loss and every gradient's table (dL/dL = 1 left out); without a loss,
    or with ``backward=False``, there is none."""
    from symformer.slides.deck import SectionFrame

    g = block
    deck = frames(g, Options(token=1))
    (k,) = [i for i, f in enumerate(deck) if isinstance(f, SectionFrame)]
    assert deck[k].title == "Backward pass"
    after = [f for f in deck[k + 1:] if isinstance(f, StageFrame)]
    names = [f.stage.name for f in after]
    assert names[0] == "loss" and "grad.loss" not in names
    assert "grad.output" in names and "grad.layer1.head1.W_Q" in names
    assert all(f.stage.name in ("loss",) or f.stage.name.startswith("grad.") for f in after)
    assert not any(isinstance(f, SectionFrame) for f in frames(g, Options(backward=False)))
    gpt2 = derived("gpt2_style")
    assert not any(isinstance(f, SectionFrame) for f in frames(gpt2, Options(token=1)))


def test_each_weight_is_shown_once_where_it_is_first_used(tmp_path, block):
    """As the notes do: every weight of the built-in block as a matrix, once, on a frame
    before the first stage that uses it."""
    from symformer.cli import main
    from symformer.notation import parameter

    assert main(["slides", "--out", str(tmp_path / "deck"), "--quiet"]) == 0
    tex = (tmp_path / "deck" / "slides.tex").read_text(encoding="utf-8")
    g = block
    shown = set()
    for stage in g:
        for name, value in stage.op.parameters().items():
            lhs = parameter(stage, name).latex
            if value is None or lhs in shown:
                continue
            shown.add(lhs)
            assert tex.count(f"{lhs} = \\left[") == 1, lhs
            before = tex.index(f"{lhs} = \\left[")
            assert "This example" in tex[:before].rsplit("\\begin{frame}", 1)[1], lhs
    assert len(shown) >= 10
