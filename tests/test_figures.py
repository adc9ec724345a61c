"""``symformer figures``: TikZ that compiles, SVG/PNG whose values are the right ones.

Values are compared with the independent float64 pass (tests/float_reference.py),
rounded with Python's decimal module, never with the engine's own output.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symformer.cli import main
from symformer.colors import diverging, luminance, sequential, text_colour
from symformer.example import load_example
from tests.float_reference import float_forward

EXAMPLES = Path(__file__).resolve().parents[1] / "symformer" / "examples"
SVG = "{http://www.w3.org/2000/svg}"

needs_pgfplots = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None
    or subprocess.run(["kpsewhich", "pgfplots.sty"], capture_output=True,
                      text=True).stdout.strip() == "",
    reason="pdflatex or pgfplots is not installed (Debian: texlive-pictures; .ci/run installs it)")


def rounded(x: float, decimals: int) -> str:
    """A float rounded half-even to ``decimals`` places, as text (``-0.00`` -> ``0.00``)."""
    text = str(Decimal(float(x)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_EVEN))
    return text[1:] if text.startswith("-") and set(text[1:]) <= set("0.") else text


def far_from_tie(x: float, decimals: int) -> bool:
    scaled = abs(x) * 10 ** decimals
    return abs(scaled - int(scaled) - 0.5) > 1e-6


def run(*argv: str) -> int:
    return main(list(argv))


@needs_pgfplots
@pytest.mark.parametrize("example", [None, "encoder_decoder.toml"])
def test_tikz_figures_compile_with_pdflatex(tmp_path, example):
    args = [] if example is None else [str(EXAMPLES / example)]
    assert run("figures", *args, "--out", str(tmp_path), "--quiet") == 0
    figures = sorted(p for p in tmp_path.glob("*.tex") if p.name != "main.tex")
    for tex in figures:
        text = tex.read_text()
        assert "\\caption{" in text and f"\\label{{fig:{tex.stem}}}" in text
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "main.tex"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "main.pdf").stat().st_size > 10_000
    log = (tmp_path / "main.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", "main.pdf", "-"], cwd=tmp_path,
                              capture_output=True, text=True).stdout
        assert f"Figure {len(figures)}:" in text


def test_svg_cell_values_are_the_float_reference_rounded(tmp_path):
    assert run("figures", "--out", str(tmp_path), "--format", "svg", "--quiet",
               "--decimals", "3") == 0
    ref = float_forward(load_example(None))
    for head in (1, 2):
        root = ET.parse(tmp_path / f"layer1-head{head}-weights.svg").getroot()
        title = root.find(f"{SVG}title")
        assert title is not None and f"Head {head}" in title.text
        cells = {g.get("id"): g.find(f"{SVG}text").text
                 for g in root.iter(f"{SVG}g") if (g.get("id") or "").startswith("cell-")}
        w = ref[f"layer1.head{head}.weights"]
        assert len(cells) == w.size
        for (i, j), x in np.ndenumerate(w):
            if far_from_tie(x, 3):
                assert cells[f"cell-{i}-{j}"] == rounded(x, 3), (head, i, j)


def test_tikz_marks_are_certified_positional_encoding(tmp_path):
    assert run("figures", "--out", str(tmp_path), "--quiet") == 0
    text = (tmp_path / "positional_encoding.tex").read_text()
    marks = re.findall(r"only marks.*?coordinates \{(.*?)\};", text)
    pe = float_forward(load_example(None))["positional_encoding"]
    assert len(marks) == pe.shape[1]
    for dim, coords in enumerate(marks):
        points = [tuple(map(float, p.split(","))) for p in re.findall(r"\(([^)]*)\)", coords)]
        assert [p[0] for p in points] == list(range(pe.shape[0]))
        for pos, (_, y) in enumerate(points):
            assert abs(y - pe[pos, dim]) < 1e-5


def test_masked_cells_are_hatched_and_probabilities_drawn(tmp_path):
    assert run("figures", str(EXAMPLES / "encoder_decoder.toml"), "--out", str(tmp_path),
               "--quiet") == 0
    masked = (tmp_path / "decoder-layer1-self-head1-weights.tex").read_text()
    assert masked.count("pattern=north east lines") == 1  # 2 target tokens: one future cell
    assert "Hatched cells are masked" in masked
    cross = (tmp_path / "decoder-layer1-cross-head1-weights.tex").read_text()
    assert "pattern=" not in cross
    probs = (tmp_path / "probabilities-position1.tex").read_text()
    labels = re.findall(r"\\node\[inner sep=0pt\] at \(axis cs:[^)]*\) \{\$([0-9.]+)\$\}", probs)
    assert len(labels) == 5 and abs(sum(Fraction(v) for v in labels) - 1) <= Fraction(5, 200)


def _png_chunks(data: bytes) -> dict[bytes, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        chunks.setdefault(kind, data[at + 8:at + 8 + length])
        at += 12 + length
    return chunks


def test_png_is_200_dpi_and_sharp(tmp_path):
    assert run("figures", "--out", str(tmp_path), "--format", "png", "--quiet") == 0
    data = (tmp_path / "layer1-head1-weights.png").read_bytes()
    chunks = _png_chunks(data)
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    x_ppm, y_ppm, unit = struct.unpack(">IIB", chunks[b"pHYs"])
    assert unit == 1 and round(x_ppm * 0.0254) == 200 == round(y_ppm * 0.0254)
    # a 4x4 map is at least about 5 x 2.5 inches (cells 0.42 inch tall, 10 pt text):
    # >= 1000 x 500 pixels at 200 dpi
    assert width >= 1000 and height >= 500


def test_pdf_format_writes_one_pdf_per_figure(tmp_path):
    assert run("figures", "--out", str(tmp_path), "--format", "pdf", "--quiet") == 0
    pdfs = sorted(p.name for p in tmp_path.iterdir())
    assert "layer1-head1-weights.pdf" in pdfs and all(p.endswith(".pdf") for p in pdfs)
    assert (tmp_path / "layer1-head1-weights.pdf").read_bytes()[:5] == b"%PDF-"


def test_cell_text_contrast_and_greyscale_order():
    levels = [Fraction(k, 100) for k in range(101)]
    for paint in (sequential, diverging):
        for t in levels:
            fill = paint(t)
            ink = text_colour(fill)
            lighter, darker = sorted((luminance(fill), luminance(ink)), reverse=True)
            assert (lighter + 0.05) / (darker + 0.05) >= 4.5  # WCAG AA for normal text
    # sequential: darker is larger, so the map stays ordered in greyscale
    lum = [luminance(sequential(t)) for t in levels]
    assert all(a > b for a, b in zip(lum, lum[1:]))
    # diverging: lightest at zero (t = 1/2), darker the further from it on either side
    lum = [luminance(diverging(t)) for t in levels]
    assert all(a < b for a, b in zip(lum[:50], lum[1:51]))
    assert all(a > b for a, b in zip(lum[50:], lum[51:]))


@pytest.mark.parametrize("argv, message", [
    (["--format", "jpg"], "invalid choice: 'jpg'"),
    (["--token", "9"], "token position 9 is out of range"),
    (["--token", "nope"], "unknown token 'nope'"),
])
def test_bad_input_exit_2_nothing_written(tmp_path, capsys, argv, message):
    out = tmp_path / "figs"
    with pytest.raises(SystemExit) if argv[0] == "--format" else _nothing():
        status = run("figures", "--out", str(out), *argv)
        assert status == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_out_is_a_regular_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("keep")
    assert run("figures", "--out", str(target), "--quiet") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a regular file" in err[0]
    assert target.read_text() == "keep"


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("command", [
    ["figures", "--format", "tikz"], ["figures", "--format", "svg"], ["slides"],
    ["export", "--figures"]])
def test_a_weight_near_exp_minus_1e9_is_drawn_at_0_quickly(tmp_path, command):
    """--causal --mask -1e9: the masked weights are about e^-1e9 (10^-434,294,482); their
    positions are drawn at 0 and never made exact fractions (no answer in 120 s before).
    The texts are float64's (3 decimals: the masked weights print as 0.000)."""
    import time

    start = time.process_time()
    assert main([*command, "--causal", "--mask", "-1e9", "--out", str(tmp_path / "o")]) == 0
    assert time.process_time() - start < 20
    written = "".join(p.read_text() for p in (tmp_path / "o").rglob("*")
                      if p.suffix in (".tex", ".svg") and "weights" in p.name)
    if command[0] == "figures":
        ref = float_forward(load_example(), causal=True)["layer1.head1.weights"]
        assert ref[0, 1] == 0.0 and "0.000" in written  # float64's e^-1e9 underflows
        for value in ref[1:, :2].flat:
            assert rounded(value, 3) in written
