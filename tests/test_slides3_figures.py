"""Figure files say what they show as the model has it (issue 39, item 7):

* the block diagram's standalone PDF/PNG/SVG has its heading drawn over it (the
  caption's first clause), as every other figure file has (the PDF's text, read back
  with poppler's ``pdftotext``);
* a next-token chart names its position as the model has it: a *target* position only
  in an encoder-decoder, a plain position in a decoder-only model.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from symformer import derive, load_example
from symformer.figures import diagram
from symformer.figures.data import FigureOptions, heading, probability_bars


@pytest.mark.skipif(shutil.which("pdflatex") is None or shutil.which("pdftotext") is None,
                    reason="pdflatex and poppler are not installed")
def test_standalone_diagram_has_its_heading(tmp_path):
    g = derive(load_example("llama_style"))
    pdf = tmp_path / "d.pdf"
    pdf.write_bytes(diagram.compiled(g, "pdf"))
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                                   text=True, check=True).stdout.split())
    assert "The architecture of this example, a decoder-only Transformer, bottom to top" \
        in text
    assert text.index("architecture") < text.index("RMSNorm")  # over the drawing


@pytest.mark.parametrize("name, want", [
    ("llama_style", "Next-token probabilities after position 1 (\u201ccat\u201d)"),
    ("encoder_decoder", "Next-token probabilities after target position 1 (\u201cje\u201d)")])
def test_next_token_chart_names_its_position_as_the_model_has_it(name, want):
    g = derive(load_example(name))
    assert heading(probability_bars(g["probabilities"], 1, FigureOptions())) == want
