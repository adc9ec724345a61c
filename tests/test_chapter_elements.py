"""The chapter elements of issue 39 item 8, from what the derivation computes:

* shapes under every matrix form (Q ∈ ℝ^{4×2}), read here from the example's own
  weights and sentence, not from the engine's stages;
* the √d_k argument with the example's numbers: the variance of the first head's dot
  products and of the scaled scores, recomputed here in float64 from the example's
  queries and keys (NumPy), equal to the printed certified roundings;
* the causal section labelled as a variant the rest does not use.
"""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction

import numpy as np
import pytest

from symformer import derive, load_example
from symformer.example.loader import builtin_text
from symformer.latex import Options, export_files, matrix_form
from symformer.latex.scaling import scale_prose


@pytest.fixture(scope="module")
def builtin():
    return derive(load_example())


@pytest.fixture(scope="module")
def notes(builtin) -> str:
    return export_files(builtin, Options(decimals=3, token=1), "markdown")["main.md"]


def test_shapes_on_the_matrix_forms(builtin, notes):
    """Each matrix-form line ends with its matrix's shape (where the line has room):
    Q is n × d_k, A is n × n, F is n × d, read from the example file's own sentence and
    weights (tomllib), not from the engine."""
    data = tomllib.loads(builtin_text())
    n, w_q = len(data["tokens"]), data["layer"][0]["head"][0]["W_Q"]
    d, d_k = len(w_q), len(w_q[0])
    shapes = {name: (r, c) for name, r, c in matrix_form.shapes(
        [builtin["layer1.head1.Q"]])}
    assert shapes == {"Q^{(1)}": (n, d_k), "X": (n, d), "W_{Q}^{(1)}": (d, d_k)}
    for lhs, rhs, shape in (("Q^{(1)}", "X W_{Q}^{(1)}", (n, d_k)),
                            ("A^{(1)}", r"\operatorname{softmax}", (n, n)),
                            ("F", r"\operatorname{ReLU}", (n, d))):
        line = next(ln for ln in notes.splitlines() if ln.startswith(f"{lhs} &= {rhs}"))
        assert line.rstrip(" \\cr").endswith(
            rf"\qquad {lhs} \in \mathbb{{R}}^{{{shape[0]} \times {shape[1]}}}"), line


def _floats(stage) -> np.ndarray:
    return np.array([[float(Fraction(t)) for t in row] for row in stage.values(decimals=15)])


@pytest.mark.parametrize("name", [None, "gpt2_style"])
def test_the_square_root_argument_with_the_examples_numbers(name):
    g = derive(load_example(name) if name else load_example())
    scores = next(s for s in g if s.op.matrix_form == "scores" and s.layer == 1
                  and s.head == 1)
    # said once, after layer 1's attention sub-layer
    ((prose),) = [p for s in g for p in scale_prose(s, 4)]
    text = "".join(p if isinstance(p, str) else p.latex for p in prose.parts)
    q = _floats(g[g[scores.inputs[0]].inputs[0]])
    k = _floats(g[g[scores.inputs[0]].inputs[1]])
    u = q @ k.T  # independent: the dot products from the queries and keys
    d_k = q.shape[1]
    printed = [float(x) for x in re.findall(r"\\approx (-?\d+\.\d+)", text)]
    assert len(printed) == 2
    assert abs(printed[0] - np.var(u)) <= 0.5e-4 + 1e-12
    assert abs(printed[1] - np.var(u / np.sqrt(d_k))) <= 0.5e-4 + 1e-12
    assert f"its {u.size} dot products" in text and f"\\sqrt{{{d_k}}}" in text


def test_square_root_argument_once_and_only_where_scaled(builtin):
    assert [s.name for s in builtin if scale_prose(s, 3)] == ["layer1.attention.output"]
    g = derive(load_example("encoder_decoder"))  # the encoder's, not again the decoder's
    assert [s.name for s in g if scale_prose(s, 3)] == ["layer1.attention.output"]
    g = derive(load_example("attention_only"))  # its scores are not divided by √d_k
    assert not any(scale_prose(s, 3) for s in g)


def test_causal_section_is_a_variant(notes):
    assert "### Variant: causal self-attention" in notes
    assert "A variant the rest of these notes does not use" in notes


def test_one_head_data_flow_figure(builtin):
    """The figure's boxes are the first head's stages back to the layer input, each with
    its shape; a projection's arrow names its weight; llama_style's keys come from the
    shared key/value head 1 that query head 1 reads, through RoPE."""
    from symformer.latex import head_flow

    out = head_flow.first_head_output(builtin)
    boxes, edges = head_flow.nodes(builtin, out)
    assert sorted((b.symbol, b.shape) for b in boxes) == sorted([
        ("X", (4, 4)), ("Q^{(1)}", (4, 2)), ("K^{(1)}", (4, 2)), ("V^{(1)}", (4, 2)),
        ("U^{(1)}", (4, 4)), ("S^{(1)}", (4, 4)), ("A^{(1)}", (4, 4)), ("O^{(1)}", (4, 2))])
    into = {b: label for _, b, label in edges}
    assert [into[f"layer1.head1.{x}"] for x in "QKV"] == [
        "W_{Q}^{(1)}", "W_{K}^{(1)}", "W_{V}^{(1)}"]
    assert into["layer1.head1.weights"] == r"\text{softmax}"
    llama = derive(load_example("llama_style"))
    out = head_flow.first_head_output(llama)
    names = {b.stage for b in head_flow.nodes(llama, out)[0]}
    assert {"layer1.kv_head1.K_rot", "layer1.kv_head1.V", "layer1.head1.Q_rot"} <= names
    assert not any("kv_head2" in n or "head2." in n for n in names)
    # in the notes (beside the block diagram) and on the slides, before head 1's frames
    from symformer.slides.deck import HeadFlowFrame, StageFrame, frames
    from symformer.slides.deck import SlideOptions as DeckOptions

    main = export_files(builtin, Options(decimals=2))["main.tex"]
    assert main.index(r"\label{fig:head-flow}") < main.index(r"\section")
    deck = frames(builtin, DeckOptions(token=1, decimals=3, backward=False,
                                       stages=("layer1.head1.*",)))
    flow = next(k for k, f in enumerate(deck) if isinstance(f, HeadFlowFrame))
    first = next(k for k, f in enumerate(deck) if isinstance(f, StageFrame))
    assert flow < first
