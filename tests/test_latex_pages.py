"""The notes are a chapter: their length, their words, their notation table.

Every shipped example's notes, with a ``[loss]`` added where it has none (as a lecturer
would teach backpropagation on it), are compiled once each (pdflatex, one pass) and
read back (pdfinfo, pdftotext):

* page counts within the limits a chapter allows: the built-in block with its
  Backward part within 30 pages, every other example within 38;
* no word of the example file's format in the visible text ("[loss]", "example file");
* the notation table true for the example: no sentence that the scores are divided by
  the square root of d_k in a model that does not divide them, and every tau of the
  equations defined;
* a model without a positional table (RoPE, or none) prints no x = e + PE table;
* masked entries are not worked, and one sentence says they are masked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources

import pytest

from symformer import derive, load_example, parse_example
from symformer.latex import Options, export_files
from symformer.latex.compile import compile_log

needs_tools = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("pdftotext") is None
    or shutil.which("pdfinfo") is None, reason="pdflatex or poppler-utils missing")

#: Most pages of each shipped example's notes with a Backward part.
LIMITS = {"builtin": 30}
DEFAULT_LIMIT = 38
#: Words of the example file's format, never shown to a reader of the notes.
FILE_WORDS = re.compile(r"\[loss\]|\[decoder\]|\[lm_head\]|example file|\.toml|TOML")


def with_loss(name: str):
    """The shipped example, with a loss where it has none: the next token's
    cross-entropy for a language model, the target tokens' for a decoder, else a mean
    squared error against a fixed target of the output's shape."""
    if name == "builtin":
        return load_example()
    text = (resources.files("symformer.examples") / f"{name}.toml").read_text("utf-8")
    example = parse_example(text)
    if example.decoder is not None:
        targets = list(example.decoder.tokens[1:]) + [example.decoder.vocab[2]]
        return parse_example(text + '\n[loss]\nkind = "cross_entropy"\ntargets = ['
                             + ", ".join(f'"{t}"' for t in targets) + "]\n")
    if example.lm_head is not None:
        targets = [example.vocab[(i + 1) % len(example.vocab)]
                   for i in range(len(example.tokens))]
        return parse_example(text + '\n[loss]\nkind = "cross_entropy"\ntargets = ['
                             + ", ".join(f'"{t}"' for t in targets) + "]\n")
    rows, cols = derive(example)["output"].shape
    target = ",\n".join("    [" + ", ".join("0" if i == j else str((-1) ** (i + j))
                                             for j in range(cols)) + "]" for i in range(rows))
    return parse_example(text + f'\n[loss]\nkind = "mse"\ntarget = [\n{target},\n]\n')


#: Compiled in the suite (a few seconds each): the built-in block, the largest shipped
#: examples (RoPE, GQA, pre-norm; an encoder and a decoder) and an unscaled one without
#: positions; the others' page counts are measured by hand (docs/export.md lists them).
EXAMPLES = ["builtin", "llama_style", "attention_only", "encoder_decoder"]


@pytest.fixture(scope="module", params=EXAMPLES)
def notes(request, tmp_path_factory):
    """(name, derivation, pages, text) of an example's compiled notes, once each."""
    name = request.param
    g = derive(with_loss(name))
    assert g.example.loss is not None
    pdf, _ = compile_log(export_files(g, Options(decimals=2 if name == "builtin" else 3)),
                         passes=1)
    path = tmp_path_factory.mktemp(name) / "main.pdf"
    path.write_bytes(pdf)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True,
                          check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout
    return name, g, pages, text


@needs_tools
def test_notes_fit_a_chapter(notes):
    name, _, pages, text = notes
    assert "Backward pass" in text  # the limit holds with the backward part
    assert pages <= LIMITS.get(name, DEFAULT_LIMIT), (name, pages)


@needs_tools
def test_no_file_format_words(notes):
    name, _, _, text = notes
    found = FILE_WORDS.findall(text)
    assert not found, (name, found)
    assert "this example\u2019s weight" in text.lower()


@needs_tools
def test_notation_table_is_true_for_the_example(notes):
    name, g, _, text = notes
    scales = {s.op.scale for s in g if s.op.name == "scale_mask"}
    divided = "the scores are divided by its square root" in text.replace("\n", " ")
    assert divided == (None in scales), (name, scales)
    if any(c is not None for c in scales):  # the equations divide by tau: defined
        assert "Divisor of the scores" in text
    flat = " ".join(text.split())
    assert "Add & Norm" not in flat or not any(s.name.startswith("layer1.norm1")
                                               for s in g), name  # pre-norm: no Add & Norm


@needs_tools
def test_no_positional_table_without_positional_encoding(notes):
    name, g, _, text = notes
    kind = getattr(g["positional_encoding"].op, "kind", "")
    flat = " ".join(text.split())
    if kind in ("rope", "none"):
        assert "Input: Input row" not in flat and "Input: Positional encoding." not in flat
        assert "x = e" in flat.replace("𝑥", "x")


@needs_tools
def test_masked_entries_are_not_worked(notes):
    name, g, _, text = notes
    flat = " ".join(text.split())
    if g.causal or name == "builtin":  # the built-in block shows its causal variant too
        assert "the later keys are masked (their weight is exactly 0) and not worked" in flat
        assert "(masked)" not in flat, name


def test_no_file_format_words_in_the_trace_or_the_slides(tmp_path):
    """The step-through page and the deck say "the target", as the notes do."""
    from symformer.cli import main

    assert main(["trace", "--token", "1", "--backward", "--format", "html", "--out",
                 str(tmp_path / "t.html")]) == 0
    assert main(["slides", "--out", str(tmp_path / "deck"), "--quiet"]) == 0
    for path in (tmp_path / "t.html", tmp_path / "deck" / "slides.tex"):
        text = path.read_text(encoding="utf-8")
        assert "the target" in text, path
        assert not FILE_WORDS.findall(re.sub(r"<script.*?</script>", "", text, flags=re.S)), \
            path
