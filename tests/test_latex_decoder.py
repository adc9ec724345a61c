"""The decoder in the LaTeX/Markdown export: pdflatex, cross-attention tables, next token,
greedy generation against an independent float64 decoder, KaTeX."""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction

import numpy as np
import pytest
from test_decoder import EXAMPLE, with_decoder
from test_decoder_float import float_decoder
from test_latex_compile import _pdftext, needs_pdflatex
from test_latex_markdown import katex_errors, math_snippets

from symformer import derive, load_example, parse_example
from symformer.cli import main
from symformer.latex import Options, export_files
from symformer.latex.compile import compile_log

STEPS = 3
SOURCE = ("I", "think", "I", "understand")
TARGET = ("<s>", "je")
VOCAB = ("<s>", "je", "pense", "comprends", "</s>")


@pytest.fixture(scope="module")
def example():
    return load_example(EXAMPLE)


@pytest.fixture(scope="module")
def g(example):
    return derive(example)


@pytest.fixture(scope="module")
def files(g):
    return export_files(g, Options(steps=STEPS, decimals=2))


@pytest.fixture(scope="module")
def markdown(g):
    return export_files(g, Options(steps=STEPS, decimals=2), "markdown")["main.md"]


def float_greedy(example, steps: int) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """Greedy decoding in float64 (``float_decoder``): (target so far, probabilities)."""
    out = []
    for _ in range(steps):
        probabilities = float_decoder(example)["probabilities"][-1]
        tokens = example.decoder.tokens
        out.append((tokens, probabilities))
        word = example.decoder.vocab[int(np.argmax(probabilities))]
        if word == "</s>":
            break
        example = dataclasses.replace(example, decoder=dataclasses.replace(
            example.decoder, tokens=tokens + (word,)))
    return out


def table_rows(tex: str) -> list[list[str]]:
    """The body rows of a rendered booktabs table, cells without colour, bold and ``$``."""
    body = tex.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0]
    rows = []
    for line in body.strip().splitlines():
        cells = line.removesuffix(r" \\").split(" & ")
        cells = [re.sub(r"\\textcolor\{white\}\{(.*)\}$", r"\1", c) for c in cells]
        cells = [re.sub(r"\\(cellcolor|rowcolor)(\[\w+\])?\{[^}]*\}|\$", "", c).strip()
                 for c in cells]
        # the highlighted row's shaded numbers are bold
        rows.append([re.sub(r"^\\mathbf\{(.*)\}$", r"\1", c) for c in cells])
    return rows


def header(tex: str) -> str:
    return tex.split(r"\toprule", 1)[1].split(r"\midrule", 1)[0]


def within_rounding(text: str, value: float, decimals: int) -> bool:
    return abs(float(Fraction(text)) - value) <= 0.5 * 10.0 ** -decimals + 1e-12


# -- the document --------------------------------------------------------------------

@needs_pdflatex
def test_encoder_decoder_document_compiles(files, g, tmp_path):
    pdf, log = compile_log(files)
    assert pdf.startswith(b"%PDF")
    assert "Overfull \\hbox" not in log
    text = _pdftext(pdf, tmp_path)
    for heading in ["Encoder", "Decoder", "Masked self-attention head 1",
                    "Cross-attention head 2", "Add & Norm 3", "Next-token probabilities",
                    "Greedy generation"]:
        assert heading in text, heading
    assert f"The next token is “{g.next_token().token}”" in text


def test_decoder_part_follows_the_encoder_in_order(files):
    main_tex = files["main.tex"]
    marks = [r"\part{Encoder}", r"\section{Layer 1}", r"\part{Decoder}",
             r"\subsection{Masked self-attention head 1}", r"\subsection{Add \& Norm 1}",
             r"\subsection{Cross-attention head 1}", r"\subsection{Add \& Norm 2}",
             r"\subsection{Feed-forward network}", r"\subsection{Add \& Norm 3}",
             r"\subsubsection{Logits (one score", r"\subsubsection{Next token (exact argmax)}",
             r"\section{Greedy generation}"]
    at = 0
    for mark in marks:  # each after the one before
        at = main_tex.index(mark, at)


def test_encoder_only_document_has_no_parts(block):
    assert r"\part" not in export_files(block, Options(stages=("input",)))["main.tex"]


# -- tables --------------------------------------------------------------------------

def matrix_rows(tex: str) -> list[list[str]]:
    """The entries of a ``name = [array]`` display (a stage computed as one before)."""
    body = tex[tex.index("}} ") + 3:tex.index(r" \end{array}")]
    return [[re.sub(r"\\phantom\{[^}]*\}", "", c).strip() for c in row.split(" & ")]
            for row in body.split(r" \\ ")]


@pytest.mark.parametrize("kind", ["raw_scores", "scores", "weights"])
def test_cross_attention_tables_cell_by_cell(files, g, example, kind):
    """Head 1's scores are worked, with their table; what repeats a rule worked before
    (head 2, and the products and weights worked in the masked self-attention) is
    shown as a matrix of the same certified values."""
    reference = float_decoder(example)
    for head in (1, 2):
        name = f"decoder.layer1.cross.head{head}.{kind}"
        tex = files[f"fragments/{name.replace('.', '-')}-table.tex"]
        if r"\begin{table}" not in tex:
            assert (head, kind) != (1, "scores")
            certified = g[name].values(decimals=2)
            assert matrix_rows(tex) == certified
            continue
        for j, word in enumerate(SOURCE):  # columns: the source tokens with positions
            assert rf"$\text{{{word}}}_{{{j}}}$" in header(tex)
        rows = table_rows(tex)
        certified = g[name].values(decimals=2)
        assert [r[:2] for r in rows] == [[str(i), w.replace("<", r"\textless{}").replace(
            ">", r"\textgreater{}")] for i, w in enumerate(TARGET)]  # rows: target tokens
        for i, row in enumerate(rows):
            assert row[2:] == certified[i]
            for j, cell in enumerate(row[2:]):
                assert within_rounding(cell, reference[name][i, j], 2), (name, i, j)
        if kind == "weights":  # a heat map: every cell shaded by its weight
            assert tex.count(r"\cellcolor[HTML]{") == len(TARGET) * len(SOURCE)


def test_masked_self_attention_marks_the_future(files):
    tex = files["fragments/decoder-layer1-self-head1-weights-table.tex"]
    rows = table_rows(tex)
    assert rows[0][3] == r"\textcolor{gray}{0.00}"  # "<s>" may not see "je"
    assert "Grey: masked by the causal mask." in tex
    scores = table_rows(files["fragments/decoder-layer1-self-head1-scores-table.tex"])
    assert scores[0][3] == r"\textcolor{gray}{-\infty}"


def test_next_token_names_the_engine_decision(files, g, example):
    choice = g.next_token()
    logits = float_decoder(example)["logits"][-1]
    assert choice.token == VOCAB[int(np.argmax(logits))] == "pense"  # float agrees
    decision = files["fragments/next_token-decision.tex"]
    assert "The next token is ``pense''" in decision
    assert r"\hat{t} = \text{pense}" in decision
    rows = table_rows(files["fragments/next_token-table.tex"])
    assert rows == [["1", "je", "0", "0", "1", "0", "0"]]  # the last position, exact 0/1


def test_an_exact_tie_is_reported_as_a_tie():
    v, minus_v = ["-1", "1", "-1", "-1"], ["1", "-1", "1", "1"]
    columns = [["0"] * 4, v, v, minus_v, ["0"] * 4]  # "je" and "pense" share a column
    rows = [list(r) for r in zip(*columns)]
    example = parse_example(with_decoder(
        W_vocab="[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]"))
    out = export_files(derive(example), Options(stages=("next_token",)))
    decision = out["fragments/next_token-decision.tex"]
    assert "No single next token" in decision and "``je'', ``pense''" in decision
    # both tied logits are the largest: the indicator has two 1s
    assert r"\hat{t} &= \begin{bmatrix} 0 & 1 & 1 & 0 & 0 \end{bmatrix}" in \
        out["fragments/next_token-worked.tex"]


# -- worked examples -------------------------------------------------------------------

def test_worked_examples_follow_the_target_token(g):
    out = export_files(g, Options(target_token=0, stages=("decoder.layer1.cross.head1.*",)))
    assert "Worked example for ``\\textless{}s\\textgreater{}'' (position 0)" in \
        out["fragments/decoder-layer1-cross-head1-Q-worked.tex"]
    # the cross-attention keys are rows of the source: they follow the source token
    assert "Worked example for ``think'' (position 1)" in \
        out["fragments/decoder-layer1-cross-head1-K-worked.tex"]
    default = export_files(g, Options(stages=("probabilities",)))
    worked = default["fragments/probabilities-worked.tex"]
    assert "``je'' (position 1)" in worked  # the last target position by default
    j = g["probabilities"].cols.index("pense")  # 0-based vocabulary index
    assert rf"p_{{{j}}} &= \frac{{e^{{\ell_{{{j}}}}}}}{{\Sigma}}" in worked


# -- greedy generation -----------------------------------------------------------------

def test_generation_table_against_float64_greedy(files, example):
    expected = float_greedy(example, STEPS)
    tex = files["fragments/generation-table.tex"]
    rows = table_rows(tex)
    assert len(rows) == len(expected) == 2  # "</s>" ends it after two steps
    for n, (row, (tokens, probabilities)) in enumerate(zip(rows, expected), start=1):
        label = " ".join(tokens).replace("<", r"\textless{}").replace(">", r"\textgreater{}")
        assert row[:2] == [str(n), label]
        for cell, value in zip(row[2:-1], probabilities):
            assert within_rounding(cell, value, 2), (n, cell, value)
        best = VOCAB[int(np.argmax(probabilities))]
        assert row[-1] == r"\text{" + best.replace("<", r"\textless{}").replace(
            ">", r"\textgreater{}") + "}"
    assert "Generated: \\textless{}s\\textgreater{} je pense \\textless{}/s\\textgreater{}." \
        in files["main.tex"]


def test_markdown_has_the_decoder_and_its_math_parses_in_katex(markdown):
    assert "# Decoder" in markdown and "### Cross-attention head 1" in markdown
    assert "| 1 | \\<s\\> je | $0.01$ | $0.04$ | $0.89$" in markdown  # plain cells
    snippets = math_snippets(markdown)
    assert len(snippets) > 500
    assert katex_errors(snippets) == []


# -- command line ----------------------------------------------------------------------

def test_cli_writes_decoder_and_generation(tmp_path):
    assert main(["export", str(EXAMPLE), "--out", str(tmp_path), "--steps", "1",
                 "--target-token", "<s>", "--stage", "next_token", "--format",
                 "markdown"]) == 0
    md = (tmp_path / "main.md").read_text()
    assert "## Greedy generation" in md and "| 1 | \\<s\\> je |" in md


@pytest.mark.parametrize(("args", "message"), [
    ([str(EXAMPLE), "--target-token", "9"],
     "target token position 9 is out of range; the target tokens are: 0 '<s>', 1 'je'"),
    ([str(EXAMPLE), "--target-token", "chat"], "unknown target token 'chat'"),
    (["--target-token", "0"], "a target token needs an example with a [decoder] table"),
    (["--steps", "2"], "--steps needs a [decoder] table with W_vocab"),
])
def test_bad_decoder_options_exit_2_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert main(["export", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()
