"""The notes print every number a table uses: each weight where it is first used, exactly
as the example file gives it, and say when worked lines leave out zero-weight terms.

The reference is the example file itself, read with ``tomllib`` (not symformer's
loader), its numbers parsed with ``fractions``.
"""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction
from importlib import resources

import pytest

from symformer import derive, load_example
from symformer.latex import Options, export_files
from symformer.latex.blocks import Cell, Table
from symformer.latex.render import aligned_matrix, table_body, to_latex
from symformer.latex.worked import worked_example

_MATRIX = re.compile(r"(\S+) = \\left\[\\begin\{array\}\{@\{\\,\}r+@\{\\,\}\} (.*?) "
                     r"\\end\{array\}\\right\]")


def _file(name: str) -> dict:
    if name == "builtin":
        text = (resources.files("symformer.example") / "builtin.toml").read_text("utf-8")
    else:
        text = (resources.files("symformer.examples") / f"{name}.toml").read_text("utf-8")
    return tomllib.loads(text)


def _fraction(value) -> Fraction:
    return Fraction(value) if isinstance(value, str) else Fraction(str(value))


def _printed(files: dict[str, str]) -> list[tuple[str, str, list[list[Fraction]]]]:
    """(fragment, lhs, entries) of every printed weight, in document order."""
    main = files["main.tex"]
    order = re.findall(r"\\input\{(fragments/[^}]*-weights\.tex)\}", main)
    out = []
    for path in order:
        for lhs, body in _MATRIX.findall(files[path]):
            rows = [[_fraction(re.sub(r"\\phantom\{[^}]*\}", "", v).strip())
                     for v in row.split("&")] for row in body.split(r"\\")]
            out.append((path, lhs, rows))
    return out


@pytest.fixture(scope="module")
def builtin_files() -> dict[str, str]:
    return export_files(derive(load_example()), Options(decimals=2, token=1))


def test_every_builtin_weight_is_printed_once_exactly_as_in_the_file(builtin_files):
    data = _file("builtin")
    layer, head1 = data["layer"][0], data["layer"][0]["head"][0]
    printed = _printed(builtin_files)
    by_fragment = {(p.split("/")[1].removesuffix("-weights.tex"), lhs): rows
                   for p, lhs, rows in printed}

    def want(matrix) -> list[list[Fraction]]:
        rows = matrix if isinstance(matrix[0], list) else [matrix]
        return [[_fraction(v) for v in row] for row in rows]

    assert by_fragment[("embeddings", "W_{E}")] == want(data["embeddings"])
    assert by_fragment[("layer1-head1-Q", "W_{Q}^{(1)}")] == want(head1["W_Q"])
    assert by_fragment[("layer1-head1-K", "W_{K}^{(1)}")] == want(head1["W_K"])
    assert by_fragment[("layer1-head1-V", "W_{V}^{(1)}")] == want(head1["W_V"])
    assert by_fragment[("layer1-attention-output", "W_{O}")] == want(layer["W_O"])
    assert by_fragment[("layer1-ffn-hidden", "W_{1}")] == want(layer["W_1"])
    assert by_fragment[("layer1-ffn-hidden", "b_{1}")] == want(layer["b_1"])
    assert by_fragment[("layer1-ffn-output", "W_{2}")] == want(layer["W_2"])
    assert by_fragment[("layer1-ffn-output", "b_{2}")] == want(layer["b_2"])
    # the two Add & Norms' scales: γ, and the second sub-layer's own γ′
    gammas = [rows for (_, lhs), rows in by_fragment.items() if lhs in (r"\gamma", r"\gamma'")]
    assert len(gammas) == 2 and all(len(g) == 1 and len(g[0]) == 4 for g in gammas)
    assert ("layer1-add_norm2", r"\gamma'") in by_fragment  # the defaults, 1s
    assert len(printed) == len({(p, lhs) for p, lhs, _ in printed})  # each once
    text = " ".join(v for k, v in builtin_files.items() if k.endswith(("-weights.tex",
                                                                       "-worked.tex")))
    for internal in (r"(?<!\\)gamma", r"(?<!\\)beta", r"W_O\b", r"\bff0", r"W\\_"):
        assert not re.search(internal, text), internal


def test_grouped_query_weights_print_once_each():
    """llama_style's query heads share key/value heads: each key/value head's W_K and
    W_V are printed once (at its own stage), each query head's W_Q once."""
    g = derive(load_example("llama_style"))
    printed = _printed(export_files(g, Options(decimals=3)))
    layers = _file("llama_style")["layer"]
    heads = sum(len(layer["head"]) for layer in layers)
    kv_heads = sum(len(layer["kv_head"]) for layer in layers)
    # layer and (key/value) head as a superscript: W_{Q}^{(2,3)}
    assert sum(lhs.startswith("W_{Q}^{(") for _, lhs, _ in printed) == heads
    assert sum(lhs.startswith("W_{K}^{(") for _, lhs, _ in printed) == kv_heads < heads
    assert "W_{K}^{(2,2)}" in {lhs for _, lhs, _ in printed}
    assert len(printed) == len({(p, lhs) for p, lhs, _ in printed})


def test_worked_lines_say_when_zero_weight_terms_are_left_out(builtin_files):
    """W_Q of head 1 has zeros (q_0 reads x_0 and x_1 only): the sentence says so; the
    softmax has no weights, so no sentence."""
    q = builtin_files["fragments/layer1-head1-Q-worked.tex"]
    assert "terms with a weight of exactly 0 are left out" in q
    assert r"q^{(1)}_{0} &= x_{0} (W_{Q}^{(1)})_{0,0} + x_{1} (W_{Q}^{(1)})_{1,0}" in q
    softmax = builtin_files["fragments/layer1-head1-weights-worked.tex"]
    assert "left out" not in softmax


def test_table_columns_align_on_the_decimal_point():
    """Cells with fewer decimals than their column are padded with invisible digits, so
    that right-aligned they line up on the point; other cells are left alone."""
    table = Table("c", "tab:c", ((0, "a"), (1, "b"), (2, "c")), ("x", "y"),
                  ((Cell("0.5"), Cell("1")), (Cell("-1.25"), Cell(r"\frac{1}{3}")),
                   (Cell("2"), Cell("-0.125"))))
    body = table_body(table)
    assert r"$0.5\phantom{0}$" in body and r"$2\phantom{.00}$" in body
    assert r"$-1.25$" in body and r"$1\phantom{.000}$" in body
    assert r"$\frac{1}{3}$" in body
    assert aligned_matrix((("0.5", "-1"), ("0.25", "2"))) == (
        r"\left[\begin{array}{@{\,}rr@{\,}} 0.5\phantom{0} & -1 \\ 0.25 & 2 \end{array}\right]")


def test_caption_spacing_and_steps_kept_together(builtin_files):
    main = builtin_files["main.tex"]
    assert r"\usepackage[position=top,skip=4pt,font=small]{caption}" in main
    sections = main.count(r"\subsubsection{") + main.count(r"\subsection{")
    assert main.count(r"\begin{step}") == main.count(r"\end{step}") >= sections // 2
    # a group heading opens the step below it, never ends a page on its own
    assert "\\begin{step}\n\\subsection{Attention head 2}" in main


def test_short_worked_results_share_a_line(block):
    """The softmax's four exponentials stand two by two; the sum, wider, alone."""
    tex = to_latex(worked_example(block["layer1.head1.weights"], 1))
    assert re.search(r"e\^\{s\^\{\(1\)\}_\{0\}\} &= e\^\{1\.66\} \\approx 5\.26 & "
                     r"e\^\{s\^\{\(1\)\}_\{1\}\} &=", tex)
    assert re.search(r"\n  \\Sigma &= [^\n&]*\n", tex)


def test_weight_gradients_print_as_matrices_as_the_weights_do(builtin_files):
    """dL/dW_O is a matrix of W_O's shape (4 x 4), printed as the weight itself is, never
    with the internal row names; dL/dγ' is one row.  Every FFN gradient of the built-in
    block is exactly 0: dL/dW_2 = 0, once (the sentence after it says why), not a 6 x 4
    matrix of zeros."""
    wo = builtin_files["fragments/grad-layer1-W_O-table.tex"]
    assert r"\frac{\partial L}{\partial W_{O}} = \left[\begin{array}" in wo
    assert wo.count(r" \\ ") == 3 and "ff0" not in wo
    w2 = builtin_files["fragments/grad-layer1-W_2-table.tex"]
    assert r"\frac{\partial L}{\partial W_{2}} = 0" in w2 and "array" not in w2
    assert "is exactly 0 at every entry" in builtin_files["fragments/grad-layer1-W_2-inactive.tex"]
    gamma = builtin_files["fragments/grad-layer1-add_norm2-gamma-table.tex"]
    assert r"\gamma" in gamma and r" \\ " not in gamma and "gamma &" not in gamma
