"""One meaning per symbol in every shipped example (issue 39, item 5).

Every format (notes, slides, sheets, the HTML trace, Markdown) names a quantity through
:mod:`symformer.notation` (a row's symbol, a weight's symbol) and the matrix form
(:func:`symformer.latex.matrix_form.symbol`), so the scan reads those, for every stage
of every shipped example (``symformer/examples/*.toml`` and the built-in one), and
gives each symbol, without its (layer, head) superscript, the role it names:

* a row's symbol: the stage's place (encoder or decoder side, and its name with the
  layer and head numbers left out: ``layer#.head#.Q`` is one role in every head);
* a matrix symbol (``Q`` for rows of ``q``): the same role, as a matrix;
* a weight's symbol: the stage's role and the weight's name;
* the letters the equations use as indices (``i``, ``j``, the key position ``m`` a
  sum runs over, RoPE's pair ``c``).

A symbol with two roles (``m``: the multi-head output and the key index; ``y``: the
first and the final normalisation; ``E``: the embedding rows and the embedding table;
``q``: the encoder's and the decoder's query) is a collision.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.latex.matrix_form import symbol as matrix_symbol
from symformer.notation import parameter_symbol, symbol

EXAMPLES = ["builtin", *sorted(p.stem for p in (
    Path(__file__).resolve().parents[1] / "symformer" / "examples").glob("*.toml")
    if "claims" not in p.stem)]
#: The index letters of the equations (symformer.notation.INDEX_PIECES; RoPE's pair).
INDICES = {"i": "row index", "j": "column index", "m": "key position summed over",
           "c": "pair index of PE or RoPE", "p": "position in PE or RoPE"}
WHERE = re.compile(r"\^\{\([^()]*\)\}")


def role(stage) -> tuple[str, str]:
    """(side, the stage's name with its layer and head numbers left out)."""
    return stage.side, re.sub(r"\d+", "#", stage.name)


def _pairs(g) -> bool:
    """Whether an equation writes position p and pair c: RoPE, sinusoidal PE."""
    return any(getattr(s.op, "name", "") == "rope" or (
        s.kind == "positional_encoding" and getattr(s.op, "kind", "") == "sinusoidal")
        for s in g)


@functools.cache
def meanings(name: str) -> dict[str, set]:
    """Every symbol of the example's forward stages, with the roles it names."""
    g = derive(load_example() if name == "builtin" else load_example(name))
    found: dict[str, set] = {}
    for letter, what in INDICES.items():
        if letter not in "cp" or _pairs(g):
            found.setdefault(letter, set()).add(("index", what))
    for stage in g:
        if stage.name.startswith("grad."):
            continue
        found.setdefault(symbol(stage).latex, set()).add(("row", *role(stage)))
        matrix = WHERE.sub("", matrix_symbol(stage))
        if matrix != symbol(stage).latex:
            found.setdefault(matrix, set()).add(("row", *role(stage)))
        for weight in stage.op.parameters():
            found.setdefault(parameter_symbol(stage, weight).latex, set()).add(
                ("weight", *role(stage), weight))
    return found


def collisions(name: str) -> dict[str, list]:
    """The symbols with more than one role (a weight shared by several stages, such
    as a tied table, is one role per weight name)."""
    out = {}
    for latex, roles in meanings(name).items():
        kinds = {r if r[0] != "weight" else ("weight", r[-1]) for r in roles}
        if len(kinds) > 1:
            out[latex] = sorted(roles)
    return out


def test_the_scan_sees_a_collision():
    """The scan itself: two stages of different roles under one symbol are found."""
    found = meanings("builtin")
    assert ("index", INDICES["i"]) in found["i"]
    assert any(r[0] == "row" and r[2] == "layer#.head#.Q" for r in found["q"])


#: Collisions not yet resolved (issue 39, item 5), each a rename with consequences for
#: the authors' equations that ``check`` binds to these letters: m, the multi-head
#: output and the key index of the sums; A, the FFN activation's matrix and the attention
#: matrix; c and p, the concatenation and the probabilities and the pair and position
#: indices of the sinusoidal PE and RoPE (the exercise sheets and the figures write
#: them too); the final RMSNorm's statistics ⟨x²⟩ and rms, which a hat over the whole
#: would not leave readable.  Nothing else may collide.
REMAINING = {"m", "A", r"\bar{A}", "c", "p", r"\langle x^2 \rangle", r"\mathrm{rms}"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_one_meaning_per_symbol(name):
    assert set(collisions(name)) <= REMAINING, collisions(name)


@pytest.mark.parametrize("name", ["encoder_decoder", "gpt2_style", "llama_style"])
def test_decoder_and_final_norm_marked(name):
    """The decoder's quantities named like the encoder's are barred (q̄, W̄_O, γ̄, ȳ;
    the cross-attention's primed too: q̄′), the final normalisation's hatted (ŷ, μ̂),
    the tables are W_E and W_P (E and P: the embedding rows' and the probabilities'
    matrices)."""
    found = meanings(name)
    if name == "encoder_decoder":
        for latex in (r"\bar{q}", r"\bar{q}'", r"\bar{W}_{O}", r"\bar{\gamma}", r"\bar{y}",
                      r"\bar{W}_{E}", r"\bar{z}"):
            assert all(r[1] == "decoder" for r in found[latex]), latex
        assert all(r[1] == "encoder" for r in found["q"])
    else:
        assert {r[2] for r in found[r"\hat{y}"]} == {"final_norm"}
        assert "y" in found and "final_norm" not in {r[2] for r in found["y"]}
    assert "W_{E}" in found and "E" in found
