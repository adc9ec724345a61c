"""The notes and the slides show the decoding decisions and the cache growing
(``decoding_lesson``): the rule, each step's table (probabilities after temperature,
the masses above each token, the kept set, the cumulative sums, the draw and its
uniform number) checked against a float64 computation and Python's random written
here, the KV cache one row longer each step; an example without ``[decoding]`` has
neither section."""

from __future__ import annotations

import math
import random

import numpy as np

from symformer import derive, load_example
from symformer.cli import main
from symformer.latex.blocks import Table
from symformer.latex.decoding import decoding_sections
from symformer.latex.outline import fragments
from symformer.slides.deck import SectionFrame, SlideOptions, frames
from symformer.slides.decoding import decoding_parts


def _table(outline: list, name: str) -> Table:
    return next(b for f in fragments(outline) if f.name == name for b in f.blocks
                if isinstance(b, Table))


def _row(table: Table, stage: str) -> list[str]:
    k = [label.split(".", 1)[1] for _, label in table.row_labels].index(stage)
    return [c.latex for c in table.cells[k]]


def test_each_step_and_the_cache_against_float64_and_random():
    g = derive(load_example("decoding_lesson"))
    outline = decoding_sections(g, 0, 3)
    steps = sorted(k for k in (f.name for f in fragments(outline))
                   if k.startswith("decoding-step"))
    assert steps == ["decoding-step1", "decoding-step2", "decoding-step3"]
    first = _table(outline, "decoding-step1")
    logits = [-math.inf if v == r"-\infty" else float(v) for v in _row(first, "allowed")]
    z = np.array(logits) / 0.5  # temperature 1/2
    p = np.exp(z - z.max())
    p /= p.sum()
    assert _row(first, "probabilities_T") == [f"{x:.3f}" for x in p]
    order = sorted(range(len(p)), key=lambda j: (-p[j], j))
    mass, kept = 0.0, set()
    for j in order:  # the crossing token included: kept while the mass before it < 9/10
        if mass < 0.9:
            kept.add(j)
        mass += p[j]
    # a stage of exact integers prints integers, as every other table does
    assert _row(first, "kept") == [f"{int(j in kept)}" for j in range(len(p))]
    u = random.Random(7).random()
    assert f"{u:.17f}"[:12] in first.caption
    q = np.where([j in kept for j in range(len(p))], p, 0)
    cumulative = np.cumsum(q / q.sum())
    drawn = int(np.argmax(cumulative > u))
    assert _row(first, "draw")[drawn] == "1"
    text = " ".join(part for item in outline if hasattr(item, "parts")
                    for part in item.parts if isinstance(part, str))
    assert "cached run equals the uncached one" in text
    for t in (1, 2, 3):
        cache = _table(outline, f"kv-step{t}")
        assert len(cache.row_labels) == 4 + t - 1 and cache.highlight_row == 3 + t - 1
        assert cache.cells[-1][-1].latex != "" and cache.cells[0][-1].latex == ""


def test_the_notes_the_slides_and_an_example_without_a_rule(tmp_path, capsys):
    assert main(["export", "decoding_lesson", "--format", "markdown", "--out",
                 str(tmp_path / "md"), "--quiet"]) == 0
    text = (tmp_path / "md" / "main.md").read_text()
    assert "## Choosing the next token" in text and "## The KV cache" in text
    assert "stays in the nucleus unless p drops to m = " in text
    # the cache's empty cells are empty, not "$$" (display maths in Markdown + KaTeX)
    assert "| $$ |" not in text and "| on | $1$ |" not in text and "| cat | $0$ |" in text
    deck = frames(derive(load_example("decoding_lesson")), SlideOptions())
    titles = [getattr(f, "title", "") for f in deck]
    assert "Step 1: the decision" in titles and "Step 3: the cache of layer1.head1" in titles
    assert sum(isinstance(f, SectionFrame) and f.title in ("Choosing the next token",
                                                            "The KV cache") for f in deck) == 2
    assert decoding_sections(derive(load_example("gpt2_style")), 0, 3) == []
    assert decoding_parts(derive(load_example("gpt2_style")), 3) == []
