"""The block diagram names the parts each shipped example has and not those it lacks,
and a few of them compile standalone with pdflatex."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from symformer.blocks.encoder import derive
from symformer.example.loader import load_example, packaged_examples
from symformer.figures import diagram, tikz

#: (example, words the diagram has, words it must not have), read from the TOML files.
CASES = [
    (None, ["post-norm", "Sinusoidal", "ReLU", "Add \\& LayerNorm", "2 heads"],
     ["RoPE", "RMSNorm", "Gated", "GELU", "Learned", "Masked", "key/value"]),
    # its 2 key/value heads, as which query heads read each (issue 39)
    ("llama_style", ["RMSNorm", "RoPE", "SwiGLU", "heads 1\u20132 $\\to K,V$ 1",
                     "heads 3\u20134 $\\to K,V$ 2", "grouped-query",
                     "Masked", "untied", "Final RMSNorm", "\\times\\,2"],
     ["LayerNorm", "Sinusoidal", "Learned", "ReLU", "Add \\&"]),
    ("gpt2_style", ["Learned positional", "LayerNorm", "pre-norm", "GELU", "tied",
                    "Final LayerNorm"], ["RoPE", "RMSNorm", "Sinusoidal", "ReLU", "Gated"]),
    ("encoder_decoder", ["Cross-attention", "Masked multi-head", "Encoder \\\\ layer",
                         "Decoder \\\\ layer", "Linear $W_{\\mathrm{vocab}}$"], ["RoPE", "Gated"]),
    ("attention_only", ["Self-attention", "1 head", "not scaled"],
     ["LayerNorm", "Feed-forward", "Sinusoidal", "$+$"]),
]


def _tex(name):
    g = derive(load_example(packaged_examples()[name] if name else None))
    return diagram.figure_latex(g)


@pytest.mark.parametrize("name,has,lacks", CASES, ids=[c[0] or "builtin" for c in CASES])
def test_diagram_names_what_the_example_has(name, has, lacks):
    tex = _tex(name)
    for word in has:
        assert word in tex, word
    for word in lacks:
        assert word not in tex, word


def test_every_shipped_example_has_a_diagram():
    for name in packaged_examples():
        tex = _tex(name)
        assert "\\begin{tikzpicture}" in tex and "\\caption{" in tex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_diagrams_compile(tmp_path):
    body = "".join(_tex(n) for n in (None, "llama_style", "encoder_decoder"))
    (tmp_path / "d.tex").write_text(tikz.DOCUMENT % {"preamble": tikz.PREAMBLE, "body": body})
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "d.tex"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "Overfull" not in (tmp_path / "d.log").read_text(errors="replace")
    text = subprocess.run(["pdftotext", str(tmp_path / "d.pdf"), "-"], capture_output=True,
                          text=True).stdout
    for word in ("Sinusoidal positional", "RoPE", "SwiGLU", "Cross-attention"):
        assert word in text


def test_second_norm_figures_are_primed_and_png_math_is_italic():
    """The second sub-layer's LayerNorm figure is labelled r′ and y′, as the notes write
    them; PNG and PDF set mathematics in Computer Modern (italic letters), SVG keeps
    DejaVu Sans."""
    from symformer.figures import Options, figures, mpl

    g = derive(load_example(None))
    second = next(f for f in figures(g, Options()) if f.name.startswith("layer1-add_norm2"))
    assert [legend for legend, *_ in second.series] == ["input $r'$", "output $y'$"]
    assert "$r'$" in second.caption and "$y'$" in second.caption
    assert mpl.MATH_CM["mathtext.fontset"] == "cm" and mpl.STYLE["mathtext.fontset"] != "cm"
