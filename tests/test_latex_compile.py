"""pdflatex for real: the full document, and a document with hostile token names."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from symformer import derive, parse_example
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


@needs_pdflatex
def test_full_document_compiles_without_overfull_boxes(block, tmp_path):
    pdf, log = compile_log(export_files(block, Options(exact=True)))
    assert pdf.startswith(b"%PDF")
    assert "Overfull \\hbox" not in log
    text = _pdftext(pdf, tmp_path)
    assert "Causal self-attention" in text and "Scaled scores" in text


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
