"""pdflatex for real: every shipped example's notes, and a document with hostile token names."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources

import pytest

from symformer import derive, load_example, parse_example
from symformer.example.loader import builtin_text
from symformer.latex import Options, export_files
from symformer.latex.compile import compile_log

needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None,
                                    reason="pdflatex is not installed")
HOSTILE = ["a&b", "50%", "$x$", "#1_{}", "~^\\", "Ünïcødé", "αβ", "中"]
HOSTILE_TITLE = "Title with & % $ # _ { } ~ ^ \\ and “quotes”"


def hostile_example():
    """The built-in example with every token and the title made of LaTeX specials."""
    text = builtin_text().rsplit("\n[loss]", 1)[0]  # 8 tokens: not the loss's 4x4 target
    toml = lambda items: "[" + ", ".join(f"'''{t}'''" for t in items) + "]"  # noqa: E731
    text = re.sub(r'^title = .*$', f"title = '''{HOSTILE_TITLE}'''", text, flags=re.M)
    text = re.sub(r"^tokens = .*$", f"tokens = {toml(HOSTILE)}", text, flags=re.M)
    text = re.sub(r"^vocab = .*$", f"vocab = {toml(HOSTILE)}", text, flags=re.M)
    extra_rows = "    [1, 4, 0, 3],\n    [2, 1, 1, 0],\n    [0, 2, 2, 1],\n"  # 8 tokens
    text = text.replace("    [1, 4, 0, 3],  # cat\n", extra_rows)
    return parse_example(text)


def _pdftext(pdf: bytes, tmp_path) -> str:
    path = tmp_path / "out.pdf"
    path.write_bytes(pdf)
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def attention_only_with_loss():
    """``attention_only`` with a [loss] (it ships without one): its Backward part too."""
    text = (resources.files("symformer.examples") / "attention_only.toml").read_text("utf-8")
    return parse_example(text + "\n[loss]\nkind = \"mse\"\ntarget = [\n    [1, 0, -1],\n"
                         "    [0, 1, 0],\n    [-1, 0, 1],\n]\n")


#: Identifiers of the code that the notes' text must never show (pdftotext keeps an
#: underscore only where it was typeset as one: W_O written as text, not W_{O}).
INTERNAL = re.compile(r"W_[A-Za-z0-9]|b_\d|\bgamma\b|\bbeta\b|\beps\b|sqrt\(|U\+[0-9A-F]{4}|"
                      r"\bff\d|\bd\d\b|[a-z_]+\d+\.[a-z_]+\d*\.|Other stages|act\(g\)|"
                      r"source, target so far")


#: Every shipped example's notes, as a user exports them (the built-in one with closed
#: forms too), compiled once each.
NOTES = {
    "builtin": (lambda: load_example(), Options(exact=True)),
    "llama_style": (lambda: load_example("llama_style"), Options(decimals=3)),
    "gpt2_style": (lambda: load_example("gpt2_style"), Options(decimals=3)),
    "course_module": (lambda: load_example("course_module"), Options(decimals=3)),
    "encoder_decoder": (lambda: load_example("encoder_decoder"), Options(decimals=3)),
    "attention_only_loss": (attention_only_with_loss, Options(decimals=3)),
}


@needs_pdflatex
@pytest.mark.parametrize("name", list(NOTES))
def test_notes_compile_without_overfull_boxes(name, tmp_path):
    """No line of any shipped example's notes runs into the margin (one pdflatex pass:
    the layout does not depend on the references)."""
    example, options = NOTES[name]
    g = derive(example())
    files = export_files(g, options)
    pdf, log = compile_log(files, passes=1)
    assert pdf.startswith(b"%PDF")
    overfull = [line for line in log.splitlines() if line.startswith("Overfull \\hbox")]
    assert not overfull, overfull
    text = _pdftext(pdf, tmp_path)
    assert "this example\u2019s weight" in text.lower()  # the weights are printed
    if name == "builtin":
        assert "Variant: causal self-attention" in text and "Scaled scores" in text
    if name == "attention_only_loss":
        assert "Backward pass" in text
    # one notation, declared once: what a reader sees holds no identifier of the code
    leaks = INTERNAL.findall(text)
    assert not leaks, leaks
    decoder_only = name in ("gpt2_style", "llama_style")
    assert ("Encoder output" in text) is not decoder_only
    assert ("decoder-only" in text) is decoder_only
    assert "Notation: every symbol of these notes, once." in text
    if name == "llama_style":  # RoPE: a sentence, no all-zero table
        assert "rotary position embeddings (RoPE)" in text
        assert "Input: Positional encoding. Values" not in text


@needs_pdflatex
def test_hostile_names_compile_and_show_as_typed(tmp_path):
    g = derive(hostile_example())
    pdf, _ = compile_log(export_files(g, Options(stages=("input", "layer1.head1.weights"),
                                                 token=1)))
    text = _pdftext(pdf, tmp_path)
    for shown in ["a&b", "50%", "$x$", "#1_{}", "Ünïcødé", "αβ", "U+4E2D"]:
        assert shown in text, shown
    assert "~^\\" in text.replace("˜", "~").replace("ˆ", "^") or "~^\\" in text
    assert "Title with & % $ # _ { } ~ ^ \\ and" in text.replace("˜", "~").replace("ˆ", "^")
