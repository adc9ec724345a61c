"""The worked backpropagation: the export's Backward part and ``trace --backward``.

* the backward rules' general equations, printed from each operation's declared
  index rule (softmax's, a bias's and LayerNorm's sums, the loss's without dL/dL);
* every worked line of the Backward part recomputes from what it prints
  (tests/recompute.py, which knows nothing of symformer);
* ``trace --backward`` in every format, its JSON numbers against an independent
  float64 backward pass (tests/float_backward.py, textbook formulas);
* the LaTeX export with a Backward part compiles with pdflatex.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from float_backward import float_backward
from recompute import check_item

from symformer import derive, load_example
from symformer.blocks.backward import backward
from symformer.cli import main
from symformer.equations.stage import equation_lines
from symformer.latex import Options, export_files
from symformer.latex.compile import compile_log

KEYS = {"stage", "row", "col", "symbol", "expression", "result", "operands"}


@pytest.fixture(scope="module")
def graph():
    """The built-in example (it has an mse [loss]) with its gradient stages."""
    return backward(derive(load_example()))


def test_softmax_backward_equation_is_its_index_rule(graph):
    (line,) = equation_lines(graph["grad.layer1.head1.scores"])
    assert line.text == ("∂L/∂s^(1)_(i,j) = α^(1)_(i,j) (∂L/∂α^(1)_(i,j) − Σ_(j′=0..n−1) "
                         "α^(1)_(i,j′) ∂L/∂α^(1)_(i,j′))")
    # a displayed derivative is a display fraction (issue 29)
    assert line.lhs == r"\frac{\partial L}{\partial s^{(1)}_{i,j}}"
    assert (r"\sum_{j' = 0}^{n - 1} \alpha^{(1)}_{i,j'} \frac{\partial L}{\partial "
            r"\alpha^{(1)}_{i,j'}}" in line.rhs)
    assert line.plain == ("ds[i, j] = alpha[i, j] * (dalpha[i, j] - sum(alpha[i, jp] * "
                          "dalpha[i, jp] for jp in range(n)))")


def _backward_items(g, **options) -> list[dict]:
    data = json.loads(export_files(g, Options(**options), "json")["worked.json"])
    return [i for i in data["worked"] if i["stage"] == "loss" or i["stage"].startswith("grad.")]


@pytest.mark.parametrize("token,decimals", [(0, 1), (1, 2), (3, 3)])
def test_backward_part_lines_recompute(graph, token, decimals):
    items = _backward_items(graph, decimals=decimals, token=token)
    stages = {i["stage"] for i in items}
    # the second Add & Norm is worked, the first computed by the same rules (its table)
    assert {"loss", "grad.output", "grad.layer1.head1.scores", "grad.layer1.ffn.activation",
            "grad.layer1.add_norm2.sum", "grad.input"} <= stages
    assert "grad.layer1.add_norm1.sum" not in stages and "grad.layer1.head2.scores" not in stages
    for item in items:
        assert KEYS <= set(item) <= KEYS | {"exact"}
        check_item(item)
        if item["stage"] != "loss" and not graph[item["stage"]].op.of_weight:
            assert item["row"] == token
    # a weight's gradient worked (one entry, a sum over the tokens) for the first weight
    # of each kind whose gradient is not exactly 0 (W_2, W_1, b_1 are: the FFN is dead):
    # a projection's matrix, its bias, a norm's gain and shift, the embedding table
    # (issue 39); the other projections' by the same rule (their tables)
    assert {"grad.layer1.W_O", "grad.layer1.b_2", "grad.layer1.add_norm2.gamma",
            "grad.layer1.add_norm2.beta", "grad.embedding_table"} <= stages
    assert "grad.layer1.head1.W_Q" not in stages and "grad.layer1.W_2" not in stages


def test_backward_part_runs_from_the_loss_to_the_embeddings(graph):
    text = export_files(graph, Options(decimals=2, token=1), "markdown")["main.md"]
    part = text[text.index("## Backward pass"):]
    # the forward order reversed, a weight's gradient at its step, the worked head
    # before the one tabulated after it, each under its own heading (issue 39)
    order = ["### Loss", "Gradient of the loss at the encoder output",
             "Add & Norm 2, Gradient of the loss at the LayerNorm",
             "Add & Norm 2, Gradient of the loss at the scale of the normalisation",
             "Feed-forward, Gradient of the loss at the FFN output",
             "Feed-forward, Gradient of the loss at the second feed-forward weights",
             "Feed-forward, Gradient of the loss at the FFN activation",
             "Feed-forward, Gradient of the loss at the first feed-forward bias",
             "#### Add & Norm 1\n",
             "Multi-head attention, Gradient of the loss at the output projection",
             "Head 1, Gradient of the loss at the scaled scores",
             "Head 1, Gradient of the loss at the query weights", "#### Head 2\n",
             "Gradient of the loss at the token embedding",
             "Gradient of the loss at the embedding table"]
    assert [part.index(o) for o in order] == sorted(part.index(o) for o in order)
    assert "Gradients of the weights" not in part and " below" not in part
    # the softmax rule
    assert r"\frac{\partial L}{\partial s^{(1)}_{i,j}} &= \alpha^{(1)}_{i,j}" in part
    # ∂L/∂u_0 = (1/√2) ∂L/∂s_0 with the printed ∂L/∂s_0 substituted
    # (at the block's significant digits: -0.001077..., the table's value)
    assert re.search(re.escape(r"\frac{\partial L}{\partial u^{(1)}_{0}} &= \frac{1}{\sqrt{2}} "
                               r"\frac{\partial L}{\partial s^{(1)}_{0}} \cr " + "\n"
                               + r"&= \frac{-0.00107") + r"\d*\}\{\\sqrt\{2\}\}", part)


def test_no_loss_no_backward_part():
    example = load_example("symformer/examples/attention_only.toml")
    if example.loss is not None:
        pytest.skip("the example has a loss")
    files = export_files(derive(example), Options(), "markdown")
    assert "Backward pass" not in files["main.md"]


def test_trace_backward_json_against_float64(tmp_path):
    out = tmp_path / "t.json"
    assert main(["trace", "--token", "think", "--backward", "--format", "json",
                 "--decimals", "4", "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["backward"] is True
    want = float_backward(load_example())
    steps = {s["stage"]: s for s in data["steps"]}
    assert list(steps)[:2] == ["loss", "grad.output"]
    assert list(steps)[-1] == "grad.embeddings"
    compared = 0
    for name, step in steps.items():
        if name not in want:
            continue
        row = want[name][0 if name == "loss" else 1]
        assert len(step["values"]) == len(row), name
        for shown, value in zip(step["values"], row):
            # significant digits: half a unit of the last digit shown
            places = len(shown.split(".")[1]) if "." in shown else 0
            assert abs(float(shown) - value) <= 0.5 * 10.0 ** -places + 1e-9, \
                (name, shown, value)
        compared += 1
    assert compared >= 20


@pytest.mark.parametrize("fmt", ["text", "markdown", "latex", "html"])
def test_trace_backward_every_format(tmp_path, fmt):
    out = tmp_path / f"t.{fmt}"
    assert main(["trace", "--token", "1", "--backward", "--format", fmt, "--decimals", "3",
                 "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Gradient of the loss at the scaled scores" in text
    if fmt == "text":
        # (wrapped at 80 columns after the sum's first term)
        assert "∂L/∂s^(1)_(i,j) = α^(1)_(i,j) (∂L/∂α^(1)_(i,j) − Σ_(j′=0..n−1)" in text
        assert text.index("] Output > Loss (mean squared error)") \
            < text.index("] Output > Gradient of the loss at the encoder output") \
            < text.index("] Input > Gradient of the loss at the token embedding")
    if fmt == "latex" and shutil.which("pdflatex"):
        from symformer.latex.compile import compile_pdf

        assert compile_pdf({"main.tex": text}).startswith(b"%PDF")


def test_trace_backward_needs_a_loss(capsys):
    assert main(["trace", "symformer/examples/attention_only.toml", "--token", "0",
                 "--backward"]) == 2
    err = capsys.readouterr().err
    assert "[loss]" in err and "Traceback" not in err


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_export_with_backward_part_compiles(graph):
    pdf, log = compile_log(export_files(graph, Options(decimals=3, token=1)))
    assert pdf.startswith(b"%PDF")
    assert "! " not in log


def test_decoder_cross_entropy_backward_part_recomputes(tmp_path):
    """A decoder with a cross-entropy loss: the Backward part starts at the loss's
    -log p lines, runs through the decoder into the encoder, and every line recomputes."""
    text = (Path(__file__).parents[1] / "symformer" / "examples" / "encoder_decoder.toml"
            ).read_text(encoding="utf-8")
    path = tmp_path / "ed.toml"
    path.write_text(text + '\n[loss]\nkind = "cross_entropy"\ntargets = ["je", "pense"]\n',
                    encoding="utf-8")
    g = derive(load_example(path))
    items = _backward_items(g, decimals=2, token=1)
    stages = [i["stage"] for i in items]
    assert stages[0] == "loss" and "log(" in items[0]["expression"]
    # the encoder's attention follows the rules worked in the decoder's attention
    scores = next(s for s in stages if s.startswith("grad.decoder.layer1.")
                  and s.endswith(".head1.scores"))
    assert "grad.probabilities" in stages and "grad.output" in stages
    assert stages.index("grad.probabilities") < stages.index(scores) < stages.index(
        "grad.output")  # then into the encoder, through its output
    for item in items:
        check_item(item)
    assert "grad.loss" not in g  # the export worked on a copy


def test_column_sums_and_layer_norm_rules_read_as_the_textbook_writes_them(graph):
    """A bias's gradient sums over the rows only (not every entry); the LayerNorm rules
    write the root sqrt(σ² + ε) itself (no undefined D), a mean or a variance without an
    entry index but the row's, and with the row's index i inside a sum over the rows."""
    text = {name: [line.text for line in equation_lines(graph[name])] for name in (
        "grad.layer1.b_2", "grad.layer1.add_norm1.gamma", "grad.layer1.add_norm1.beta",
        "grad.layer1.add_norm1.variance", "grad.layer1.add_norm1.mean")}
    assert text["grad.layer1.b_2"] == ["∂L/∂(b_2)_j = Σ_(i=0..n−1) ∂L/∂f_(i,j)"]
    assert text["grad.layer1.add_norm1.beta"] == ["∂L/∂β_j = Σ_(i=0..n−1) ∂L/∂y_(i,j)"]
    assert text["grad.layer1.add_norm1.gamma"] == [
        "∂L/∂γ_j = Σ_(i=0..n−1) ∂L/∂y_(i,j) (r_(i,j) − μ_i) / √(σ²_i + ε)"]
    assert text["grad.layer1.add_norm1.variance"] == [
        "∂L/∂σ²_i = −Σ_(j=0..d−1) γ_j ∂L/∂y_(i,j) (r_(i,j) − μ_i) / (2 (σ²_i + ε)^(3/2))"]
    for line in sum(text.values(), []):
        assert "D" not in line.replace("∂", "") and "μ_j" not in line and "μ_(" not in line
        assert "1.5" not in line


def test_the_loss_rule_starts_without_dl_dl(graph):
    """dL/dL = 1 is written as its value: the loss's rule is the loss's derivative alone,
    in the equation and in the worked lines (which still recompute)."""
    (line,) = equation_lines(graph["grad.output"])
    assert line.text == "∂L/∂z_(i,j) = 2 (z_(i,j) − T_(i,j)) / (n d)"
    files = export_files(graph, Options(backward=True, token=1, decimals=5))
    worked = next(text for name, text in files.items() if name.endswith(
        "grad-output-worked.tex"))
    assert r"\partial L/\partial L" not in worked and r"\frac{1}{8}" in worked
