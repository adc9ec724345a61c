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
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.blocks.backward import backward
from symformer.latex import Options, export_files
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
def part(llama) -> str:
    text = export_files(llama, Options(decimals=2, token=1), "markdown")["main.md"]
    return text[text.index("## Backward pass"):]


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
    # pre-norm: nothing is added and normalised at a residual
    parts = {p for s in forward.steps for p in s.part}
    assert "Residual 1" in parts and not any(p.startswith("Add & Norm") for p in parts)
