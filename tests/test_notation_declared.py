"""One notation, declared once: no internal identifier in what the notes show.

Every heading, caption, notation-table row and sentence of the notes comes from the
operations' titles and :mod:`symformer.notation`; they are scanned here for the six
examples a lecturer reads, without rendering their tables (cheap: the derivations are
built, their numbers never computed).
"""

from __future__ import annotations

import re

import pytest

from symformer import derive, load_example
from symformer.example.loader import packaged_examples
from symformer.latex.backward import with_backward_pass
from symformer.latex.blocks import Glossary, Prose
from symformer.latex.document import (
    _group,
    _title,
    architecture,
    caption,
    notation_blocks,
    rope_prose,
)
from symformer.notation import glossary, symbol

EXAMPLES = [None, "llama_style", "gpt2_style", "course_module", "encoder_decoder",
            "attention_only"]
#: What a lecturer never writes: identifiers of the code.
IDENTIFIER = re.compile(r"W_|b_\d|\bgamma\b|\bbeta\b|\beps\b|sqrt\(|U\+|\bff\d|\bd\d\b|"
                        r"\w+\d\.\w+|Other stages|act\(")


def _derivation(name):
    example = load_example(packaged_examples()[name] if name else None)
    g = derive(example)
    return with_backward_pass(g) if example.loss is not None else g


def _prose_text(block: Prose) -> str:
    return "".join(p if isinstance(p, str) else "" for p in block.parts)


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_identifier_in_headings_captions_and_notation(name):
    g = _derivation(name)
    shown = [architecture(g)]
    for stage in g:
        shown += [_title(stage), _group(stage), caption(stage)]
    table, rule = notation_blocks([s for s in g if not s.name.startswith("grad.")])
    assert isinstance(table, Glossary)
    shown += [meaning if isinstance(meaning, str) else _prose_text(meaning)  # ε's: math
              for _, meaning in table.rows] + [_prose_text(rule)]
    bad = [text for text in shown if IDENTIFIER.search(text)]
    assert not bad, bad
    decoder_only = name in ("gpt2_style", "llama_style")
    assert ("Encoder output" in " ".join(shown)) is not decoder_only
    assert ("decoder-only" in shown[0]) is decoder_only


@pytest.mark.parametrize("name", EXAMPLES)
def test_notation_table_has_each_symbol_once(name):
    g = _derivation(name)
    notes = glossary([s for s in g if not s.name.startswith("grad.")])
    symbols = [n.latex for n in notes]
    assert len(symbols) == len(set(symbols))
    used = {symbol(s).latex for s in g if not s.name.startswith("grad.")}  # as marked
    assert used <= set(symbols)
    # σ means one thing: the variance σ², and σ̃ = √(σ² + ε) is another letter
    assert r"\sigma" not in symbols
    assert all(r"\epsilon" not in n.latex for n in notes)


def test_rope_model_shows_no_positional_table():
    g = _derivation("llama_style")
    pe = g["positional_encoding"]
    text = _prose_text(rope_prose(pe))
    assert "rotat" in text and "RoPE" in text
    from symformer.latex.document import no_positional_table
    assert no_positional_table(pe)
    assert not no_positional_table(_derivation(None)["positional_encoding"])
