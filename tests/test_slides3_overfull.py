"""No frame of a shipped example's deck is overfull by more than 1 pt: the frames that
were, compiled together in one small document (one pdflatex pass, a few seconds; the
whole decks of the built-in example, gpt2_style and llama_style are compiled by
tests/test_slides.py, which finds no overfull box at all).

* decoder_only_block's cross-attention frames: their titles ran to three lines (the
  note on the table's rows and columns; 10.6 pt over), now in the table's legend;
* course_module with a loss: the FFN's backward frames, dL/dh's row vector (29 pt
  over) and dL/dW_1's 4 × 8 matrix (44 pt over), made narrow by
  :mod:`symformer.slides.fit`'s units and closer columns;
* gpt2_style with a loss: GELU's derivative rule (a bracketed sum, 43 pt over, now
  breakable), the embedding table's gradient, whose headings were planned too narrow
  (55 pt over), and the scaled scores' softmax rule, whose remark in words was set in
  maths (19 pt over).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.latex.compile import compile_log
from symformer.slides.beamer import document
from symformer.slides.deck import SlideOptions, StageFrame, frames

#: An overfull box and by how much.
OVERFULL = re.compile(r"Overfull \\[hv]box \(([\d.]+)pt too (?:wide|high)\)")


def _with_loss(tmp_path: Path, name: str, loss: str) -> str:
    text = Path(load_example(name).source).read_text(encoding="utf-8")
    path = tmp_path / f"{name}.toml"
    path.write_text(text + loss, encoding="utf-8")
    return str(path)


def _picked(g, stages: tuple[str, ...], backward: bool) -> list[StageFrame]:
    return [f for f in frames(g, SlideOptions(token=1, stages=stages))
            if isinstance(f, StageFrame) and f.stage.name.startswith("grad.") == backward
            and not f.stage.name.startswith("step")]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_frames_that_were_overfull_fit(tmp_path):
    zeros = "[" + ", ".join(["[0, 0, 0, 0]"] * 4) + "]"
    decoder = derive(load_example("decoder_only_block"))
    course = derive(load_example(_with_loss(tmp_path, "course_module",
                                            f'\n[loss]\nkind = "mse"\ntarget = {zeros}\n')))
    gpt2 = derive(load_example(_with_loss(tmp_path, "gpt2_style",
                                          '\n[loss]\nkind = "cross_entropy"\n'
                                          'targets = ["cat", "sat", "on"]\n')))
    picked = [*_picked(decoder, ("decoder.layer2.cross*",), False),
              *_picked(course, ("*layer1.[fW][f_][n1]*",), True),
              *_picked(gpt2, ("*layer2.ffn.hidden", "*embedding*", "*layer2.head1.scores"),
                       True)]
    names = {f.stage.name for f in picked}
    assert {"grad.layer1.W_1", "grad.layer2.ffn.hidden", "grad.embedding_table",
            "grad.layer2.head1.scores"} <= names
    assert any("Cross-attention" in f.title for f in picked)
    tex = document(decoder, SlideOptions(token=1), picked)
    _, log = compile_log({"slides.tex": tex}, "slides.tex", passes=1)
    over = [float(m[1]) for m in OVERFULL.finditer(log)]
    assert all(x <= 1.0 for x in over), over
    assert tex.count("\\begin{frame}") == len(picked) + 1
