"""Figures a lecturer uses as they are: the positional figure follows the encoding, SVG
text is the certified values in one font, labels never overlap, names drawn as typed.

References are independent of the engine: the example files read with ``tomllib`` and
the formulas evaluated with ``math``/``mpmath``, the float64 pass of
tests/float_reference.py, and hand-made bar heights for the layout.
"""

from __future__ import annotations

import math
import re
import tomllib
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer import derive, load_example, parse_example
from symformer.cli import main
from symformer.example import builtin_text
from symformer.figures import mpl, tikz
from symformer.figures.data import (
    Bars,
    Curves,
    FigureOptions,
    HeatMap,
    Rotations,
    attention_map,
    decimal_text,
    figures,
    nice_ticks,
    pe_curve,
    positional_figure,
)
from symformer.figures.layout import bar_box, place_labels
from symformer.latex.escape import latex_text
from tests.float_reference import float_forward
from tests.test_figures import far_from_tie, needs_pgfplots, rounded

EXAMPLES = Path(__file__).resolve().parents[1] / "symformer" / "examples"
#: repro/attack3/name_bs.toml: the built-in example with the tokens a\b, c$d, a\b, e.
NAME_BS = Path(__file__).resolve().parent / "data" / "repro" / "name_bs.toml"
SVG = "{http://www.w3.org/2000/svg}"
MINUS = "\u2212"


def _shipped() -> list[Path | None]:
    """The built-in example and every shipped example file (not the claims files)."""
    files = [p for p in sorted(EXAMPLES.glob("*.toml"))
             if "tokens" in tomllib.loads(p.read_text())]
    return [None, *files]


def _positional(path: Path | None):
    """(the example's own table, every positional stage with its figures)."""
    example = load_example(path)
    g = derive(example)
    return example, g, [(s, positional_figure(g, s, FigureOptions(decimals=3)))
                        for s in g if s.kind == "positional_encoding"]


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.stem if p else "builtin")
def test_positional_figure_follows_the_encoding(path):
    example, g, stages = _positional(path)
    kind = example.positional_encoding  # what the file says
    assert stages
    for stage, made in stages:
        if stage.side == "decoder":
            kind = example.decoder.positional_encoding
        if kind == "none":
            assert made == []
            continue
        (figure,) = made
        if kind == "sinusoidal":
            _check_sinusoids(figure, float(example.positional_encoding_base))
        elif kind == "learned":
            _check_learned(figure, example)
        else:
            assert kind == "rope"
            _check_rope(figure, g, float(example.positional_encoding_base))


def _check_sinusoids(c: Curves, base: float) -> None:
    """Each dot is sin/cos(pos / base^(2i/d)) (math), and the curve passes through it."""
    assert isinstance(c, Curves)
    n, d = len(c.tokens), c.d_model
    for dim in range(d):
        rate = base ** ((dim - dim % 2) / d)
        xs, ys = pe_curve(dim, d, max(n - 1, 1), c.base)
        for pos in range(n):
            expected = (math.sin if dim % 2 == 0 else math.cos)(pos / rate)
            assert abs(float(c.points[pos][dim]) - expected) < 1e-5
            at = [k for k, x in enumerate(xs) if abs(x - pos) < 1e-12]
            assert at and abs(ys[at[0]] - float(c.points[pos][dim])) < 1e-5
        assert ("sin" if dim % 2 == 0 else "cos") in c.panel_titles[dim]
    assert "10000" in c.caption or base != 10000


def _check_learned(h: HeatMap, example) -> None:
    """The learned table itself: its rows, on a scale symmetric about 0."""
    assert isinstance(h, HeatMap) and h.diverging
    table = example.positional_embeddings
    for i, row in enumerate(h.texts):
        for j, text in enumerate(row):
            x = Fraction(str(table[i, j]))
            if far_from_tie(float(x), 3):
                assert text == rounded(float(x), 3)
    low, high = h.scale
    assert low == -high and high > 0
    assert "learned" in h.caption and "sin" not in h.caption


def _check_rope(r: Rotations, g, base: float) -> None:
    """RoPE's angles p*theta_c, theta_c = base^(-2c/d_k), evaluated with mpmath, and each
    drawn key pair turned by its angle."""
    assert isinstance(r, Rotations)
    d_k = next(s for s in g if s.kind == "Q").shape[1]
    assert len(r.pairs) == d_k // 2
    mpmath.mp.dps = 30
    for i, title in enumerate(r.pairs):
        assert f"pair {i}" in title and "theta" in title and "sin" not in title
        for m, text in enumerate(r.texts[i]):
            angle = m * mpmath.power(base, mpmath.mpf(-2 * i) / d_k)
            assert text == rounded(float(angle), 3)
            c, s = r.points[i][m]
            assert abs(float(c) - float(mpmath.cos(angle))) < 1e-5
            assert abs(float(s) - float(mpmath.sin(angle))) < 1e-5
            # the solid arrow is the dashed one turned by the angle (the keys' own pairs)
            (x0, y0), (x1, y1) = r.before[i][m], r.after[i][m]
            cos, sin = float(mpmath.cos(angle)), float(mpmath.sin(angle))
            assert abs(float(x1) - (cos * float(x0) - sin * float(y0))) < 1e-4
            assert abs(float(y1) - (sin * float(x0) + cos * float(y0))) < 1e-4
    assert len(r.before[0]) == len(r.tokens) and any(x or y for x, y in r.before[0])
    assert "RoPE" in r.caption and "rotated" in r.caption and r"$\mathit{pos}" in r.caption


@pytest.mark.parametrize("base", ["100", "7/2"])
def test_sinusoids_use_the_examples_base(base):
    """Another base: the dots (certified) and the curves still agree with math.sin/cos."""
    text = builtin_text().replace('positional_encoding = "sinusoidal"',
                                  f'positional_encoding = "sinusoidal"\n'
                                  f'positional_encoding_base = "{base}"', 1)
    assert f'positional_encoding_base = "{base}"' in text
    g = derive(parse_example(text))
    (figure,) = positional_figure(g, g["positional_encoding"], FigureOptions())
    _check_sinusoids(figure, float(Fraction(base)))


def test_no_positional_figure_and_no_file_without_positions(tmp_path):
    assert main(["figures", str(EXAMPLES / "attention_only.toml"), "--out", str(tmp_path),
                 "--quiet"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not [n for n in names if n.startswith("positional")]
    assert "positional_encoding" not in (tmp_path / "main.tex").read_text()


# -- SVG text: certified values, one title, one font family, true minus signs --------
@pytest.fixture(scope="module")
def builtin_figures():
    g = derive(load_example(None))
    return g, {f.name: f for f in figures(g, FigureOptions(decimals=3))}


@pytest.fixture(scope="module")
def layer_norm_svg(builtin_figures):
    _, chosen = builtin_figures
    return mpl.render(chosen["layer1-add_norm1-token1"], "svg")


@pytest.fixture(scope="module")
def heat_map_svg(builtin_figures):
    _, chosen = builtin_figures
    return mpl.render(chosen["layer1-head1-weights"], "svg")


def _texts(svg: bytes) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{SVG}text"))


@pytest.mark.parametrize("which", ["layer_norm_svg", "heat_map_svg"])
def test_svg_one_title_one_font_family(request, which):
    svg = request.getfixturevalue(which)
    root = ET.fromstring(svg)
    titles = list(root.iter(f"{SVG}title"))
    assert len(titles) == 1 and root[0] is titles[0] and titles[0].text.strip()
    assert b"cmr" not in svg.lower() and b"cmmi" not in svg.lower()
    styled = [t.get("style") for t in root.iter()
              if t.tag in (f"{SVG}text", f"{SVG}tspan") and t.get("style")]
    assert styled
    families = {re.search(r"font-family: ([^;]*)", style).group(1) for style in styled}
    assert families == {"'DejaVu Sans', sans-serif"}
    for style in styled:  # legible: at least 9 pt (matplotlib writes pt as px)
        assert float(re.search(r"font-size: ([0-9.]+)px", style).group(1)) >= 9
    width = float(root.get("width").removesuffix("pt"))
    assert width <= mpl.MAX_WIDTH * 72 + 15  # within a slide's or page's text width


def test_svg_bar_labels_are_the_float_reference_with_minus_signs(layer_norm_svg):
    ref = float_forward(load_example(None))
    texts = [t.text for t in _texts(layer_norm_svg) if t.text]
    wanted = []
    for name in ("layer1.add_norm1.sum", "layer1.add_norm1"):
        for x in ref[name][1]:
            if far_from_tie(x, 3):
                wanted.append(rounded(x, 3).replace("-", MINUS))
    assert any(w.startswith(MINUS) for w in wanted)
    for w in wanted:
        assert w in texts
    assert not [t for t in texts if re.search(r"-\d", t)]  # no hyphen for a minus
    title = ET.fromstring(layer_norm_svg)[0].text
    assert "add_norm" not in title and "Layer 1, Add & Norm 1" in title


def test_heat_map_scale_colour_bar_and_labels(builtin_figures, heat_map_svg):
    g, chosen = builtin_figures
    w = float_forward(load_example(None))["layer1.head1.weights"]
    h = chosen["layer1-head1-weights"]
    low, high = h.scale
    assert abs(float(low) - w.min()) < 1e-5 and abs(float(high) - w.max()) < 1e-5
    flat = [s for row in h.shades for s in row]
    assert min(flat) == 0 and max(flat) == 1  # the whole colour range is used
    absolute = attention_map(g, g["layer1.head1.weights"], FigureOptions(absolute_scale=True))
    assert absolute.scale == (0, 1)
    texts = [t.text for t in _texts(heat_map_svg)]
    assert "attention weight" in texts
    root = ET.fromstring(heat_map_svg)

    def ticks(axis: str) -> list[str]:
        return ["\n".join(t.text for t in g.iter(f"{SVG}text")) for g in root.iter(f"{SVG}g")
                if re.fullmatch(f"{axis}tick_\\d+", g.get("id") or "")]

    keys, queries = ticks("x"), ticks("y")
    tokens = [f"{t}\n({k})" for k, t in enumerate(load_example(None).tokens)]
    assert keys[:4] == tokens and queries[:4] == tokens  # the same form on both axes


def test_backslash_and_dollar_names_drawn_as_typed(tmp_path):
    example = load_example(NAME_BS)
    g = derive(example)
    h = attention_map(g, g["layer1.head1.weights"], FigureOptions())
    svg = mpl.render(h, "svg")
    texts = {t.text for t in _texts(svg)}
    assert "a\\b (0)" in texts and "c$d (1)" in texts
    assert not [t for t in texts if t and "\\\\" in t]
    code = tikz.draw(h)
    assert latex_text("a\\b") in code and "a\\\\b" not in code and "a\\b" not in code


# -- label layout ---------------------------------------------------------------------
bar_sets = st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=1, max_size=8)


@settings(max_examples=40)
@given(bar_sets, st.floats(0.3, 1.5), st.floats(0.05, 0.6))
def test_labels_overlap_no_label_and_no_bar(pairs, label_width, label_height):
    bars = [(x + s * 0.4 - 0.2, 0.4, v) for x, pair in enumerate(pairs)
            for s, v in enumerate(pair)]
    boxes = place_labels(bars, [label_width] * len(bars), label_height, 0.02)
    rects = [bar_box(x, w, v) for x, w, v in bars]
    for k, box in enumerate(boxes):
        assert not any(box.overlaps(r) for r in rects)  # not on any bar
        assert not any(box.overlaps(o) for o in boxes[:k])
        value = bars[k][2]  # outside its own bar's end, on the outward side
        assert box.y0 >= value if value >= 0 else box.y1 <= value


def test_drawn_bar_labels_do_not_overlap():
    """input ~ output and negative values, measured on the drawn figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    heights = ((Fraction(1221, 1000), Fraction(-205, 1000), Fraction(-1384, 1000)),
               (Fraction(1121, 1000), Fraction(-305, 1000), Fraction(-1484, 1000)))
    series = tuple((f"s{k}", f"s{k}", hs, tuple(f"{float(h):.3f}" for h in hs))
                   for k, hs in enumerate(heights))
    b = Bars(name="b", caption="c", title="t", categories=("0", "1", "2"),
             category_title="dimension", series=series, value_title="value")
    with matplotlib.rc_context(mpl.STYLE):
        fig = mpl.draw(plt, b)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = [t.get_window_extent(renderer) for t in ax.texts]
        bars = [p.get_window_extent(renderer) for p in ax.patches]
        drawn = [t.get_text() for t in ax.texts]
        plt.close(fig)
    assert sorted(drawn) == sorted(t.replace("-", MINUS) for *_, ts in series for t in ts)
    for k, box in enumerate(labels):
        assert not any(box.overlaps(o) for o in labels[:k])
        assert not any(box.overlaps(bar) for bar in bars)


# -- legible at the size used ---------------------------------------------------------
@pytest.mark.parametrize("path", [None, EXAMPLES / "llama_style.toml",
                                  EXAMPLES / "gpt2_style.toml"],
                         ids=["builtin", "llama_style", "gpt2_style"])
def test_tikz_text_is_at_least_nine_points(path):
    g = derive(load_example(path))
    for canvas in (tikz.NOTES, tikz.SLIDES):
        assert canvas.em >= 9 / 72.27 * 2.54 - 1e-9
        for figure in figures(g, FigureOptions()):
            code = tikz.draw(figure, canvas)
            assert "\\scriptsize" not in code and "\\tiny" not in code
            assert "\\resizebox" not in code and "\\scalebox" not in code
            assert f"font={canvas.font}" in code


def test_slides_set_figures_at_their_size(builtin_figures):
    from symformer.slides.beamer import figure_frame
    from symformer.slides.deck import FigureFrame

    _, chosen = builtin_figures
    frame = figure_frame(FigureFrame(figure=chosen["layer1-head1-weights"]))
    assert "\\symfit" not in frame and "\\resizebox" not in frame
    assert f"font={tikz.SLIDES.font}" in frame
    assert "layer1" not in frame.split("\n")[0]  # the frame title speaks the notes' words


@pytest.mark.parametrize("canvas", [tikz.NOTES, tikz.SLIDES], ids=["notes", "slides"])
def test_tikz_bar_labels_fit_the_axis(builtin_figures, canvas):
    _, chosen = builtin_figures
    b = chosen["layer1-add_norm2-token1"]  # input ~ output in every dimension
    _, _, boxes, (low, high) = tikz.bar_layout(b, canvas)
    values = [float(v) for *_, vs, _ in b.series for v in vs]
    assert low <= min(values) and high >= max(values)
    for k, box in enumerate(boxes):
        assert low <= box.y0 and box.y1 <= high
        assert not any(box.overlaps(o) for o in boxes[:k])


@settings(max_examples=40)
@given(st.fractions(-10**9, 10**9, max_denominator=10**6),
       st.fractions(Fraction(1, 10**6), 10**9, max_denominator=10**6))
def test_colour_bar_ticks_are_round_values_inside_the_range(low, span):
    high = low + span
    ticks = nice_ticks(low, high)
    assert 3 <= len(ticks) <= 6 and list(ticks) == sorted(ticks)
    assert 2 <= len(nice_ticks(low, high, 3)) <= 3
    assert low <= ticks[0] and ticks[-1] <= high
    for t in ticks:  # a short terminating decimal, written exactly
        assert Fraction(decimal_text(t)) == t


def test_long_names_fall_back_to_positions_on_both_axes():
    """repro/latex_long_token_1000.toml: a 1000-character word would make the map wider
    than the page; both axes then show positions and the words are listed under it."""
    g = derive(load_example(Path(__file__).resolve().parent / "data" / "repro"
                            / "latex_long_token_1000.toml"))
    h = attention_map(g, g["layer1.head1.weights"], FigureOptions())
    for canvas in (tikz.NOTES, tikz.SLIDES):
        code = tikz.draw(h, canvas)
        assert "\\shortstack" not in code and "positions: 0 " in code
        assert "(0)" not in code  # both axes by position alone
    root = ET.fromstring(mpl.render(h, "svg"))
    assert float(root.get("width").removesuffix("pt")) <= mpl.MAX_WIDTH * 72 + 15


def _word_heights(pdf: Path, page: int) -> list[tuple[float, float, str]]:
    """(height, top, word) of every word on a page, from ``pdftotext -bbox``."""
    import subprocess

    html = subprocess.run(["pdftotext", "-bbox", "-f", str(page), "-l", str(page), str(pdf),
                           "-"], capture_output=True, text=True, check=True).stdout
    words = re.findall(r'yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">([^<]*)</word>', html)
    return [(float(y1) - float(y0), float(y0), w) for y0, y1, w in words]


@needs_pgfplots
@pytest.mark.parametrize("path", [None, EXAMPLES / "llama_style.toml"],
                         ids=["builtin", "llama_style"])
def test_slide_figures_are_legible(tmp_path, path):
    """Every text word of every figure frame (the block diagram's too) is at least as tall
    as 9 pt text in the
    same font (a reference word on a frame of its own), outside the footline; the
    frames compile unscaled and without an overfull box.  (Numbers are set in the math
    font, whose heights pdftotext measures on another scale: the TikZ source test above
    checks their size switch.)"""
    import subprocess

    from symformer.figures import diagram
    from symformer.slides.beamer import document
    from symformer.slides.deck import DiagramFrame, FigureFrame, SlideOptions

    g = derive(load_example(path))
    whole = diagram.plan(g.example, g, g.causal)
    frames = [DiagramFrame(p) for p in diagram.parts(whole, diagram.SLIDES,
                                                      diagram.SLIDES_LAYOUT)]
    frames += [FigureFrame(figure=f) for f in figures(g, FigureOptions())]
    reference = "\\begin{frame}{Reference}\\fontsize{9}{11}\\selectfont Xyzzyx\\end{frame}\n"
    text = document(g, SlideOptions(), frames).replace("\\end{document}",
                                                       reference + "\\end{document}")
    (tmp_path / "s.tex").write_text(text)
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "s.tex"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "Overfull" not in (tmp_path / "s.log").read_text(errors="replace")
    pdf = tmp_path / "s.pdf"
    pages = len(frames) + 2  # the title, the diagram and the figures, the reference
    (nine,) = [h for h, _, w in _word_heights(pdf, pages) if w == "Xyzzyx"]
    for page in range(2, pages):
        words = [(h, w) for h, top, w in _word_heights(pdf, page)
                 if top < 240 and re.fullmatch(r"[A-Za-z]{3,}", w)  # text, not footline
                 and w not in ("pos", "sin", "cos")]  # set in math
        assert words
        small = [(round(h, 2), w) for h, w in words if h < nine - 0.01]
        assert not small, (page, small)
