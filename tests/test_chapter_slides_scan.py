"""Scans for issue 39 over shipped examples' decks and diagrams (no pdflatex here):

* every backward stage worked first has a display equation on its first frame and a
  worked line (a gradient exactly 0 says why instead), the loss is a scalar;
* no table is split by columns: no "columns a–b of c" footer, every table fits the
  frame's width (abbreviated, closer, scaled: :mod:`symformer.slides.fit`);
* the block diagram's layer frame holds every box of the block that repeats (one
  outline around a block cut over columns), on the notes' page and on a slide;
* grouped-query attention's mapping is in the diagram's attention box;
* a decoder without self-attention is not said to have "0 heads".
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.example.loader import packaged_examples
from symformer.latex.blocks import Cell, Table
from symformer.slides import fit
from symformer.slides.beamer import stage_frame
from symformer.slides.deck import SectionFrame, StageFrame, frames, table_width
from symformer.slides.deck import SlideOptions as Options

CE = '\n[loss]\nkind = "cross_entropy"\ntargets = {}\n'


def _with_loss(tmp_path: Path, name: str, targets: str | None) -> Path:
    """A shipped example with the lecturer's loss added (cross-entropy where it has a
    vocabulary head, mse towards 0 otherwise)."""
    source = Path(load_example(name).source)
    text = source.read_text(encoding="utf-8")
    if targets is not None:
        text += CE.format(targets)
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _backward(deck: list) -> list[StageFrame]:
    start = next(k for k, f in enumerate(deck) if isinstance(f, SectionFrame)
                 and f.title == "Backward pass")
    return [f for f in deck[start:] if isinstance(f, StageFrame)]


@pytest.mark.parametrize("name, targets, stages", [
    ("course_module", None, ("*layer1.ffn.*", "*layer1.head2.*")),  # 8 and 4 wide
    ("attention_only", None, None),
    # its concatenation's gradient, 8 columns, was split "columns 4-7 of 8"
    ("llama_style", '["cat", "sat", "on"]', ("*attention.concat", "*logits")),
])
def test_backward_frames_work_and_no_table_is_split(tmp_path, name, targets, stages):
    path = _with_loss(tmp_path, name, targets) if targets else None
    example = load_example(str(path)) if path else load_example(name)
    if example.loss is None:  # attention_only: mse towards 0 at its output
        g0 = derive(example)
        rows, cols = list(g0)[-1].shape
        zeros = "[" + ", ".join(["[" + ", ".join(["0"] * cols) + "]"] * rows) + "]"
        path = tmp_path / f"{name}.toml"
        path.write_text(Path(example.source).read_text(encoding="utf-8")
                        + f'\n[loss]\nkind = "mse"\ntarget = {zeros}\n', encoding="utf-8")
        example = load_example(str(path))
    deck = frames(derive(example), Options(token=1, decimals=3, stages=stages))
    back = _backward(deck)
    assert back
    firsts: dict[str, StageFrame] = {}
    for f in back:
        if not f.said.startswith("Computed by"):
            firsts.setdefault(f.stage.name, f)
    for stage, first in firsts.items():
        assert any(i.equation for i in first.items), stage
        mine = [i for f in back if f.stage.name == stage for i in f.items]
        assert any(i.lines for i in mine) or first.said.startswith("This gradient is "
                                                                   "exactly 0"), stage
    loss = [f for f in back if f.stage.name == "loss"]
    assert stages or loss
    assert all(i.table is None for f in loss for i in f.items)
    text = "\n".join(stage_frame(f) for f in deck if isinstance(f, StageFrame))
    assert not re.search(r"columns? \d+(\u2013\d+)? of \d+", text)
    for f in deck:
        if isinstance(f, StageFrame):
            for i in f.items:
                if i.table is not None:
                    assert table_width(i.table, i.compact) <= 33.19 * 1.05, (f.title, i.key)


def _table(cells: list[list[str]], labels: tuple[str, ...]) -> Table:
    return Table("c", "t", tuple((k, f"t{k}") for k in range(len(cells))), labels,
                 tuple(tuple(Cell(c) for c in row) for row in cells))


def test_fit_scales_exactly_and_abbreviates():
    """Hand-made table: the scaled entries are the printed decimals times 10^6 exactly
    (Decimal arithmetic here, not fit's), headings cut to the index, the key says both."""
    cells = [["0.0000013", "-0.00000020", "0"], ["0.000004", "0.0000009999", "-0.0000050"]]
    table = _table(cells, tuple(rf"\partial L/\partial h_{{{j}}}" for j in range(3)))
    form = fit.fitted(table, lambda f: f.table.cells[0][0].latex == "1.3")
    assert form.short and form.compact and form.table.col_labels == ("0", "1", "2")
    got = [[c.latex for c in row] for row in form.table.cells]
    assert got == [["1.3", "-0.20", "0"], ["4", "0.9999", "-5.0"]]
    for row, out in zip(cells, got):
        for a, b in zip(row, out):
            assert Decimal(a) * 10**6 == Decimal(b)
    assert r"$\partial L/\partial h_{j}$" in form.key and "$10^{-6}$" in form.key
    # a weight gradient's matrix: the same power of ten taken out, digits kept
    assert fit.scaled_rows([["0.000001116", "-0.00000002092"]]) == (
        -6, [["1.116", "-0.02092"]])
    # large entries are never scaled; a table that fits is left alone
    big = _table([["0.5", "-0.25"]], ("a_{0}", "a_{1}"))
    assert fit.scaled(fit.Fitted(big)) is None
    assert fit.fitted(big, lambda f: True) == fit.Fitted(big)


def _inside(point, polygon) -> bool:
    """Ray casting, strict inside."""
    x, y = point
    inside = False
    for (x1, y1), (x2, y2) in zip(polygon, polygon[1:] + polygon[:1]):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def test_layer_frame_holds_everything_that_repeats():
    """Every shipped example's diagram, on the notes' page and on a slide: every box of
    a repeated block lies inside its block's one frame."""
    from symformer.figures import diagram

    checked = 0
    for name in packaged_examples():
        example = load_example(name)
        if not getattr(example, "layers", None):
            continue
        d = diagram.plan(example, None, False)
        for canvas, lay in ((diagram.NOTES, diagram.NOTES_LAYOUT),
                            (diagram.SLIDES, diagram.SLIDES_LAYOUT)):
            for part in diagram.parts(d, canvas, lay):
                for centre, polygon in diagram.framed(part, canvas, lay):
                    assert _inside(centre, list(polygon)), (name, canvas, centre)
                    checked += 1
    assert checked > 50


def test_pre_norm_slide_diagram_one_frame_around_the_layer():
    """llama_style on a slide: its layer is cut over two columns and one outline (not
    two frames) holds both sub-layers; the ×2 label once."""
    from symformer.figures import diagram

    d = diagram.plan(load_example("llama_style"), None, False)
    tikz = diagram.draw(d, diagram.SLIDES, diagram.SLIDES_LAYOUT)
    frames_drawn = [ln for ln in tikz.splitlines() if ln.startswith(r"\draw[black!50")]
    assert len(frames_drawn) == 1 and "cycle" in frames_drawn[0]
    assert tikz.count(r"\times\,2") == 1
    # the grouped-query mapping, in the attention box
    assert "heads 1\u20132 $\\to K,V$ 1" in tikz and "heads 3\u20134 $\\to K,V$ 2" in tikz


def test_cross_only_decoder_is_not_said_to_have_0_heads():
    from symformer.latex.document import architecture

    said = architecture(derive(load_example("cross_attention_decoder")))
    assert "0 heads" not in said and "(cross-attention of 1 head)" in said
    said = architecture(derive(load_example("decoder_only_block")))
    assert "0 heads" not in said and "layer 2: cross-attention of 1 head" in said
