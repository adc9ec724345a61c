"""``symformer export --figures``: the TikZ/PGFPlots figures as a final part of main.tex."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from symformer.cli import main
from symformer.latex.refresh import EXPORTS

#: The figures of the built-in example (one encoder layer, two heads), written by hand
#: from docs/figures.md: the positional encoding, one map per head, the two LayerNorms
#: of token 1.
EXPECTED = ["positional_encoding", "layer1-head1-weights", "layer1-head2-weights",
            "layer1-add_norm1-token1", "layer1-add_norm2-token1"]

needs_pgfplots = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None
    or subprocess.run(["kpsewhich", "pgfplots.sty"], capture_output=True,
                      text=True).stdout.strip() == "",
    reason="pdflatex or pgfplots is not installed (Debian: texlive-pictures)")


def _export(out, *extra: str) -> None:
    assert main(["export", "--out", str(out), "--decimals", "2", *extra]) == 0


@pytest.fixture(scope="module")
def with_figures(tmp_path_factory):
    """``export --decimals 2 --figures`` of the built-in example, once for the file."""
    out = tmp_path_factory.mktemp("figures")
    _export(out, "--figures")
    return out


def test_figures_part_inputs_every_figure_with_its_label(with_figures):
    tmp_path = with_figures
    main_tex = (tmp_path / "main.tex").read_text()
    assert sorted(p.stem for p in (tmp_path / "figures").glob("*.tex")) == sorted(EXPECTED)
    figures_at = main_tex.index("\\section{Figures}")
    inputs = re.findall(r"\\input\{figures/([^}]+)\.tex\}", main_tex)
    assert inputs == EXPECTED  # in the order of the stages
    assert all(main_tex.index(f"figures/{n}.tex") > figures_at for n in EXPECTED)
    assert main_tex.rstrip().endswith("\\end{document}")
    for name in EXPECTED:
        text = (tmp_path / "figures" / f"{name}.tex").read_text()
        assert f"\\label{{fig:{name}}}" in text and "\\caption{" in text
    preamble = main_tex[:main_tex.index("\\begin{document}")]
    assert "\\usepackage{pgfplots}" in preamble and "\\usepackage{tikz}" in preamble


def test_default_export_is_the_committed_one(tmp_path):
    """Without --figures nothing changes: byte for byte the committed exports/."""
    _export(tmp_path)
    assert not (tmp_path / "figures").exists()
    assert (tmp_path / "main.tex").read_bytes() == (EXPORTS / "main.tex").read_bytes()
    for path in (EXPORTS / "fragments").glob("*.tex"):
        assert (tmp_path / "fragments" / path.name).read_bytes() == path.read_bytes()


def test_figures_only_add_to_the_default_export(with_figures):
    """With --figures the fragments are the committed ones and main.tex only gains lines."""
    tmp_path = with_figures
    for path in (EXPORTS / "fragments").glob("*.tex"):
        assert (tmp_path / "fragments" / path.name).read_bytes() == path.read_bytes()
    with_figures = (tmp_path / "main.tex").read_text()
    committed = (EXPORTS / "main.tex").read_text()
    preamble = ("\\usepackage{tikz}\n\\usetikzlibrary{patterns}\n"
                "\\usepackage{pgfplots}\n\\pgfplotsset{compat=1.18}\n")
    part = "\n\n\\section{Figures}" + "".join(f"\n\n\\input{{figures/{n}.tex}}"
                                                for n in EXPECTED)
    assert with_figures.replace(preamble, "", 1).replace(part, "", 1) == committed


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_figures_need_latex(tmp_path, capsys, fmt):
    out = tmp_path / "out"
    assert main(["export", "--out", str(out), "--format", fmt, "--figures"]) == 2
    err = capsys.readouterr().err
    assert "--figures needs --format latex" in err and "Traceback" not in err
    assert not out.exists()


@needs_pgfplots
@pytest.mark.parametrize("example", [None, "symformer/examples/encoder_decoder.toml"])
def test_export_with_figures_compiles(tmp_path, example):
    args = [example] if example else []
    assert main(["export", *args, "--out", str(tmp_path), "--figures", "--pdf"]) == 0
    assert (tmp_path / "main.pdf").read_bytes().startswith(b"%PDF")
    main_tex = (tmp_path / "main.tex").read_text()
    names = sorted(p.stem for p in (tmp_path / "figures").glob("*.tex"))
    assert names and sorted(re.findall(r"\\input\{figures/([^}]+)\.tex\}", main_tex)) == names
