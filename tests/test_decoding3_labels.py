"""Decision tables name the address a claim takes (``step2.kept``) in the notes, the
slides and ``generate``'s output, and a decision frame's footer says the step and the
token drawn (not "position 0", meaningless for a decision over the vocabulary).

The drawn tokens are recomputed here in float64 from the published rule
(``decoding_lesson``: temperature 1/2, the end token masked for two steps, top-p 9/10
with the crossing token kept, inverse-CDF draw from ``random.Random(7)``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from symformer import derive, load_example
from symformer.cli import main
from symformer.latex.blocks import Prose, Table
from symformer.latex.decoding import decoding_sections
from symformer.latex.outline import fragments
from symformer.slides.beamer import stage_frame
from symformer.slides.deck import SlideOptions, StageFrame, frames

VOCAB = ["the", "cat", "sat", "on", "mat", "<EOS>"]
#: decoding_lesson's W_vocab: row = the last token, column = the next token's logit.
BIGRAM = np.array([[0, 3, 1, 0, 2, 0], [0, 0, 3, 1, 0, 1], [1, 0, 0, 3, 0, 1.5],
                   [2.5, 0, 0, 0, 3, 0], [1, 0, 0, 2, 0, 3], [2, 0, 0, 0, 0, 1]])


def _drawn(steps: int) -> list[str]:
    """The lesson's tokens, drawn in float64 by the published rule."""
    tokens, rng = ["the", "cat", "sat", "on"], random.Random(7)
    for t in range(1, steps + 1):
        z = BIGRAM[VOCAB.index(tokens[-1])] / 0.5
        if t <= 2:
            z[VOCAB.index("<EOS>")] = -np.inf
        p = np.exp(z - z.max())
        p /= p.sum()
        kept, mass = np.zeros(len(p), bool), 0.0
        for j in sorted(range(len(p)), key=lambda j: (-p[j], j)):
            kept[j], mass = mass < 0.9, mass + p[j]
        q = np.where(kept, p, 0) / p[kept].sum()
        tokens.append(VOCAB[int(np.argmax(np.cumsum(q) > rng.random()))])
    return tokens[4:]


@pytest.fixture(scope="module")
def outline():
    return decoding_sections(derive(load_example("decoding_lesson")), 0, 3)


def test_every_row_of_a_decision_table_is_the_address_check_takes(outline, tmp_path, capsys):
    table = next(b for f in fragments(outline) if f.name == "decoding-step2"
                 for b in f.blocks if isinstance(b, Table))
    labels = [label for _, label in table.row_labels]
    assert labels[0] == "step2.next_logits" and "step2.kept" in labels
    assert all(label.startswith("step2.") for label in labels)
    assert "(step2.uniform)" in table.caption and "(step2.nucleus_mass)" in table.caption
    # a claim copied from the table's row, under its label, is judged right by check
    row = [c.latex for c in table.cells[labels.index("step2.kept")]]
    claims = tmp_path / "claims.toml"
    claims.write_text(f'[[claim]]\nstage = "step2.kept"\ndecimals = 0\n'
                      f'values = [[{", ".join(v.split(".")[0] for v in row)}]]\n')
    assert main(["check", str(claims), "--example", "decoding_lesson"]) == 0
    assert "of 6 numbers correct" in capsys.readouterr().out
    said = [b.parts[0] for f in fragments(outline) if f.name == "decoding-step2"
            for b in f.blocks if isinstance(b, Prose)]
    assert any(s.startswith("[step2.top_p.kept] top-p p = 9/10") for s in said)
    assert any(s.startswith("[step2.draw] draw:") for s in said)


def test_generate_prints_each_decision_under_its_address(capsys):
    assert main(["generate", "decoding_lesson", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "[step1.top_p.kept] top-p p = 9/10" in out and "[step2.draw] draw:" in out
    row = next(line.split() for line in out.splitlines()
               if line.strip().startswith("step2.draw "))
    assert row[1:] == [f"{float(t == _drawn(2)[1]):.3f}" for t in VOCAB]
    assert "step2.nucleus_mass = " in out and "step2.uniform = " in out


def test_a_decision_frames_footer_says_the_step_and_the_token_drawn():
    deck = frames(derive(load_example("decoding_lesson")), SlideOptions())
    drawn = _drawn(3)
    decisions = [f for f in deck if isinstance(f, StageFrame)
                 and f.title.startswith("Step") and "decision" in f.title]
    assert len(decisions) == 3
    for t, frame in enumerate(decisions, start=1):
        tex = stage_frame(frame, 3)
        footer = tex.splitlines()[0]
        assert f"step {t}, the token after" in footer and f"drawn ``{drawn[t - 1]}''" in footer
        assert "position" not in footer
    cache = [f for f in deck if isinstance(f, StageFrame) and "the cache of" in f.title]
    assert [stage_frame(f, 3).splitlines()[0].count("position") for f in cache] == [0, 0, 0]
