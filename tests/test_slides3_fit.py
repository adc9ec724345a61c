"""Wide tables and matrices on slides keep their digits (issue 39, the slides' fit).

* :func:`symformer.slides.fit.scalings`: every unit tried moves the decimal point only
  (Decimal arithmetic here, not fit's), the standard unit first, then narrower ones;
* llama_style's concatenation gradient (8 columns), once cut to 2 significant digits
  while its worked line printed 4, keeps 4 in a unit its key names, each entry the
  gradient's 128-bit ball rounded to 4 significant digits with Python's decimal
  module, and the footer says the digits its table has;
* a weight's gradient matrix too wide for a frame (course_module's ∂L/∂W_1, 4 × 8) and a
  worked line's row vector are made narrow enough by the same means: the layout
  model's width (checked against pdflatex by tests/test_slides_fill.py) within the
  frame, every entry kept.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.slides import fit, layout
from symformer.slides.beamer import stage_frame
from symformer.slides.deck import SlideOptions, StageFrame, frames, matrix_width

CE = '\n[loss]\nkind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n'


def _entry(mantissa: int, exponent: int) -> str:
    """A decimal with 4 significant digits, as the tables print one."""
    return format(Decimal(mantissa).scaleb(exponent - 3), "f")


@given(st.lists(st.lists(st.tuples(st.integers(-9999, 9999).filter(lambda m: abs(m) >= 1000),
                                   st.integers(-9, -1)), min_size=3, max_size=3),
                min_size=1, max_size=3))
def test_every_unit_moves_the_decimal_point_only(cells):
    rows = [[_entry(m, e) for m, e in row] for row in cells]
    found = fit.scalings(rows)
    largest = max(abs(Decimal(t)) for row in rows for t in row)
    assert found, rows
    if largest < fit.SCALE_BELOW:  # the standard unit first: the largest as d.ddd
        assert found[0][0] == largest.adjusted()
    for k, (exponent, out) in enumerate(found):
        for a, b in zip(rows, out):
            for x, y in zip(a, b):
                assert Decimal(y).scaleb(exponent) == Decimal(x)
        if k or largest >= fit.SCALE_BELOW:
            assert fit.chars(out) < fit.chars(rows)


def test_no_unit_for_large_or_non_numbers():
    assert fit.scalings([["1.5", "0.25"]]) == []
    assert fit.scalings([["0.5", r"-\infty"]]) == []
    assert fit.scalings([["0", "0"]]) == []


def _with_loss(tmp_path: Path, name: str, loss: str | None) -> Path:
    example = load_example(name)
    text = Path(example.source).read_text(encoding="utf-8")
    if loss is None:  # mse towards 0 at the output (an example without a vocabulary)
        rows, cols = list(derive(example))[-1].shape
        zeros = "[" + ", ".join(["[" + ", ".join(["0"] * cols) + "]"] * rows) + "]"
        loss = f'\n[loss]\nkind = "mse"\ntarget = {zeros}\n'
    path = tmp_path / f"{name}.toml"
    path.write_text(text + loss, encoding="utf-8")
    return path


_UNIT = re.compile(r"Entries in units of \$10\^\{(-?\d+)\}\$")


def _significant(text: str) -> int:
    return len(text.lstrip("-").replace(".", "").lstrip("0"))


def _rounded(ball) -> Decimal:
    """A ball's midpoint correctly rounded to 4 significant digits (decimal module)."""
    value = Decimal(ball.mid().str(40, radius=False))
    return value.quantize(Decimal(1).scaleb(value.adjusted() - 3))


def test_concatenation_gradient_keeps_four_digits(tmp_path):
    from symformer.blocks.backward import with_gradients

    path = _with_loss(tmp_path, "llama_style", CE)
    g = derive(load_example(str(path)))
    deck = [f for f in frames(g, SlideOptions(token=1, stages=("*layer2.attention.concat",)))
            if isinstance(f, StageFrame) and f.stage.name.startswith("grad.")]
    tables = [(f, i) for f in deck for i in f.items if i.table is not None]
    assert len(tables) == 1
    frame, item = tables[0]
    exponent = int(_UNIT.search(item.key)[1])
    balls = with_gradients(g)["grad.layer2.attention.concat"].balls(128)
    for i, row in enumerate(item.table.cells):
        for j, cell in enumerate(row):
            assert _significant(cell.latex) == 4, cell.latex
            assert Decimal(cell.latex).scaleb(exponent) == _rounded(balls[i][j])
    assert "rounded to 4 significant digits" in stage_frame(frame)
    assert "significant digits." not in " ".join(item.table.legend)  # the footer says it


def test_a_wide_gradient_matrix_and_row_fit_the_frame(tmp_path):
    path = _with_loss(tmp_path, "course_module", None)
    g = derive(load_example(str(path)))
    # the FFN's stages and W_1 (a glob matches a forward stage too)
    deck = [f for f in frames(g, SlideOptions(token=1, stages=("*layer1.[fW][f_][n1]*",)))
            if isinstance(f, StageFrame) and f.stage.name.startswith("grad.")]
    matrices = [e for f in deck for i in f.items for e in i.equation if "bmatrix" in e.rhs]
    rows = [(w.lhs, p) for f in deck for i in f.items for w in i.lines
            for p in (*w.shown, w.result) if "bmatrix" in p]
    assert matrices and rows
    for line in matrices:
        assert matrix_width(line.lhs, "{}= " + line.rhs, line.compact) <= layout.TEXT_WIDTH
    for lhs, piece in rows:
        assert matrix_width(lhs, piece) <= layout.TEXT_WIDTH
    wide = [p for _, p in rows if p.count("&") >= 7]  # ∂L/∂h, 8 entries: 434 pt unscaled
    assert wide and all(r"\times" not in p for p in wide)  # one power of ten taken out


def test_a_title_of_three_lines_leaves_two_lines_less_room():
    """encoder_decoder's gradient titles run to three lines (pdflatex set one such frame
    8.5 pt over); the room under a title counts each of its lines."""
    from symformer.slides import measure

    one = "Layer 1, Head 1: Query $q$"
    two = "Layer 1, Add \\& Norm 2: Gradient of the loss at the scale of the normalisation"
    three = ("Decoder, Layer 1, Cross-attention head 1: Gradient of the loss at the dot "
             "products with every key (second sub-layer), in the decoder $u$")
    assert [measure.title_overflow(t) for t in (one, two, three)] == [
        0.0, measure.TITLE_LINE, 2 * measure.TITLE_LINE]


def test_words_at_the_end_of_an_equation_are_its_remark():
    """Words in maths never break (gpt2's softmax rule with its rowsum remark, 19 pt
    over): a trailing ``\\quad \\text{(...)}`` of words only becomes the line's remark,
    set as text; one with maths in it stays."""
    from symformer.slides.deck import display

    line = display("L", r"A \odot B \quad \text{(rowsum: a row's sum, taken from each)}")
    assert (line.rhs, line.remark) == (r"A \odot B", "rowsum: a row's sum, taken from each")
    mixed = r"\Pi^{\top} E \quad \text{(}\Pi\text{: the tokens one-hot)}"
    assert display("L", mixed).rhs == mixed
