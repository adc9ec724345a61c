"""The backward part as a chapter teaches it (issue 39), scanned on a RoPE model with
grouped-query attention and pre-norm (``llama_style`` with a cross-entropy loss):

* the forward order reversed, a weight's gradient at its step, the worked head first
  and its repeats after it under their own part's heading, never "below";
* the worked key/value head is the one the worked query head reads;
* nothing for what the model does not have: no gradient at a positional encoding (RoPE
  adds none), no positional-encoding step in the trace;
* pre-norm residuals are called "Residual" in the trace's navigation.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symformer import derive, load_example
from symformer.blocks.backward import backward
from symformer.latex import Options, export_files, matrix_form
from symformer.trace import trace_token

LLAMA = Path("symformer/examples/llama_style.toml")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """llama_style with the lecturer's cross-entropy loss, its gradients appended."""
    path = tmp_path_factory.mktemp("llama") / "llama.toml"
    path.write_text(LLAMA.read_text(encoding="utf-8") + '\n[loss]\nkind = "cross_entropy"\n'
                    'targets = ["cat", "sat", "on"]\n', encoding="utf-8")
    return backward(derive(load_example(str(path))))


@pytest.fixture(scope="module")
def text(llama) -> str:
    return export_files(llama, Options(decimals=2, token=1), "markdown")["main.md"]


@pytest.fixture(scope="module")
def part(text) -> str:
    return text[text.index("## Backward pass"):]


def test_grouped_query_mapping_said_once(text):
    """llama_style's query heads 1-2 read key/value head 1, 3-4 key/value head 2."""
    said = re.findall(r"Grouped-query attention: [^.]*\.", text)
    assert said == ["Grouped-query attention: query heads 1\u20132 read key/value head 1; "
                    "query heads 3\u20134 read key/value head 2 (every layer alike)."]


def _headings(part: str) -> list[str]:
    return re.findall(r"^#{2,4} (.*)$", part, flags=re.M)


def test_worked_head_first_and_its_key_value_head(part):
    headings = _headings(part)
    layer2 = headings[headings.index("Layer 2"):headings.index("Layer 1")]
    worked = [h for h in layer2 if h.startswith(("Head", "Key/value head")) and ", " in h]
    # query head 1 worked, then the key/value head it reads; the others tabulated after
    assert worked[0].startswith("Head 1, ") and "Key/value head 1, " in worked[-1]
    assert layer2.index("Head 2") > layer2.index(worked[-1])
    assert "Key/value head 2" in layer2 and not any(
        h.startswith("Key/value head 2, ") for h in layer2)
    # a weight's gradient right after the gradient at its step
    q = layer2.index("Head 1, Gradient of the loss at the query")
    assert layer2[q + 1] == "Head 1, Gradient of the loss at the query weights"
    assert " below" not in part and "Gradients of the weights" not in part


def test_every_repeat_under_its_own_heading(part):
    """Each "Computed by the same rules" sentence follows a heading of its own."""
    lines = [line for line in part.splitlines() if line.strip()]
    for k, line in enumerate(lines):
        if line.startswith("Computed by the same rules"):
            assert lines[k - 1].startswith("#"), lines[k - 1]


def test_no_positional_gradient_for_rope(llama, part):
    assert "Gradient of the loss at the positional encoding" not in part
    forward = trace_token(llama, 1)
    assert not any(s.stage == "positional_encoding" for s in forward.steps)
    back = trace_token(llama, 1, backward=True)
    assert not any(s.stage == "grad.positional_encoding" for s in back.steps)
    # the trace steps through the gradients in the notes' order: head 1 and the
    # key/value head it reads, then the others
    order = [s.stage for s in back.steps]
    assert order.index("grad.layer2.head1.output") < order.index(
        "grad.layer2.kv_head1.V") < order.index("grad.layer2.head2.output") < order.index(
        "grad.layer2.head4.output")
    # pre-norm: nothing is added and normalised at a residual
    parts = {p for s in forward.steps for p in s.part}
    assert "Residual 1" in parts and not any(p.startswith("Add & Norm") for p in parts)


def _floats(stage) -> np.ndarray:
    return np.array([[float(Fraction(t)) for t in row] for row in stage.values(decimals=14)])


@pytest.fixture(scope="module")
def builtin():
    """The built-in example (its mse loss) with its gradients."""
    return backward(derive(load_example()))


def test_backward_matrix_forms_hold(builtin):
    """The printed matrix forms, evaluated here in float64 from the stages they name
    (textbook identities, not the engine's rules), equal the gradient stages."""
    g = builtin

    def f(name: str) -> np.ndarray:
        return _floats(g[name])

    def d(name: str) -> np.ndarray:
        return f(f"grad.{name}")

    h = "layer1.head1"
    checks = {  # stage: (printed right-hand side, its value)
        f"grad.{h}.W_Q": (r"X^{\top}\, \frac{\partial L}{\partial Q^{(1)}}",
                         f("input").T @ d(f"{h}.Q")),
        f"grad.{h}.V": (r"A^{(1)}", f(f"{h}.weights").T @ d(f"{h}.output")),
        f"grad.{h}.K": (r"\Bigl(\frac{\partial L}{\partial U^{(1)}}\Bigr)^{\top} Q^{(1)}",
                       d(f"{h}.raw_scores").T @ f(f"{h}.Q")),
        f"grad.{h}.weights": (r"V^{(1)}", d(f"{h}.output") @ f(f"{h}.V").T),
        "grad.layer1.b_2": (r"\mathbf{1}^{\top}", d("layer1.ffn.output").sum(axis=0,
                                                                           keepdims=True)),
    }
    for name, (text, value) in checks.items():
        ((_, rhs),) = matrix_form.backward_lines(g[name])
        assert text in rhs, (name, rhs)
        assert np.allclose(value, f(name), atol=1e-12), name


def test_cross_entropy_at_the_logits_is_one_line(llama):
    """(P - Y)/n at the logits, against the one-hot targets written here."""
    ((lhs, rhs),) = matrix_form.backward_lines(llama["grad.logits"])
    assert rhs.startswith(r"\frac{1}{n}\,\bigl(P - Y\bigr)") or "- Y" in rhs
    p = _floats(llama["probabilities"])
    y = np.zeros_like(p)
    for i, t in enumerate(["cat", "sat", "on"]):
        y[i, llama.example.vocab.index(t)] = 1
    assert np.allclose((p - y) / 3, _floats(llama["grad.logits"]), atol=1e-12)


def test_every_worked_gradient_has_a_matrix_form(builtin):
    """Every gradient the notes work in full, except a norm's (index form only), has
    its matrix form."""
    missing = [s.name for s in builtin if (s.op.of_stage or s.op.of_weight)
               and s.name.startswith("grad.") and s.name != "grad.loss"
               and not s.op.norm_keys and not matrix_form.backward_lines(s)]
    # a norm's inputs and weights (its statistics, gamma, beta) keep their index form
    assert missing and all(any(t.op.norm_keys or t.op.name in ("mean", "variance")
                               for t in builtin[n].op.terms) for n in missing), missing


def test_slides_backward_frames_teach():
    """The slides' Backward section works as the forward one: every frame of a gradient
    worked first has a display equation, the token's substituted numbers come in
    overlays, the loss is a scalar (no one-row table whose token is "loss"), no table
    is split by columns, and a dead FFN is said."""
    from symformer.slides.beamer import stage_frame
    from symformer.slides.deck import SlideOptions as DeckOptions
    from symformer.slides.deck import StageFrame, frames

    deck = [f for f in frames(derive(load_example()), DeckOptions(token=1, decimals=3))
            if isinstance(f, StageFrame) and (f.stage.name == "loss"
                                              or f.stage.name.startswith("grad."))]
    assert deck
    loss = [f for f in deck if f.stage.name == "loss"]
    assert loss and all(i.table is None for f in loss for i in f.items)
    assert not any(re.search(r"columns? \d", stage_frame(f)) for f in deck)
    worked = [f for f in deck if not f.said.startswith("Computed by")]
    names = {f.stage.name for f in worked}
    assert len(names) > 20 and all(  # its first frame (a table alone may follow)
        any(i.equation for i in next(f for f in worked if f.stage.name == n).items)
        for n in names)
    assert any(i.lines and any(w.shown for w in i.lines) for f in worked for i in f.items)
    text = "\n".join(stage_frame(f) for f in deck)
    assert "\\frac{\\partial L}{\\partial W_{Q}^{(1)}} = " not in text  # aligned, not inline
    assert "X^{\\top}\\, \\frac{\\partial L}{\\partial Q^{(1)}}" in text
    assert "every unit is clipped by the ReLU" in text


def test_pre_norm_slides_say_residual():
    """A pre-norm deck's residual sums are "Residual", never "Add & Norm"."""
    from symformer.slides.deck import SlideOptions as DeckOptions
    from symformer.slides.deck import StageFrame, frames

    titles = [f.title for f in frames(derive(load_example("llama_style")),
                                      DeckOptions(token=1, decimals=3, backward=False))
              if isinstance(f, StageFrame)]
    assert any("Residual 1" in t for t in titles)
    assert not any("Add" in t and "Norm" in t for t in titles)
