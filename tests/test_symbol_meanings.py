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
* the letters the equations use as indices (``i``, ``j``, ``j′`` and ``i′`` a sum
  runs over, PE's and RoPE's position ``pos`` and pair ``l``).

A symbol with two roles (``m``: the multi-head output and a sum's index; ``y``: the
first and the final normalisation; ``E``: the embedding rows and the embedding table;
``q``: the encoder's and the decoder's query) is a collision.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from symformer import derive, load_example
from symformer.equations.export import stage_entry
from symformer.equations.stage import stage_equation
from symformer.equations.symbols import spell
from symformer.latex.matrix_form import symbol as matrix_symbol
from symformer.notation import ROPE_PAIR, ROPE_POSITION, parameter_symbol, symbol

EXAMPLES = ["builtin", *sorted(p.stem for p in (
    Path(__file__).resolve().parents[1] / "symformer" / "examples").glob("*.toml")
    if "claims" not in p.stem)]
#: An index letter of the equations, whatever it runs over (i a row, j a column, j′
#: and i′ a sum's second column and row, pos and l the position and pair of PE and RoPE).
INDEX = ("index", "an equation's index")
WHERE = re.compile(r"\^\{\([^()]*\)\}")


def role(stage) -> tuple[str, str]:
    """(side, the stage's name with its layer and head numbers left out)."""
    return stage.side, re.sub(r"\d+", "#", stage.name)


def indices(stage) -> set[str]:
    """The index letters, as printed (LaTeX), of the equation the notes print for
    ``stage``: the names a subscript or a sum uses that are not an array, a size or a
    constant of the equation (read from ``export``'s plain lines)."""
    found = stage_equation(stage)
    if found is None:
        return set()
    out = set()
    for part in stage_entry(found)["parts"]:
        named = set(part["arrays"]) | set(part["sizes"]) | set(part["scalars"])
        for line in part["lines"]:
            tree = ast.parse(line["plain"])
            names = {n.target.id for n in ast.walk(tree) if isinstance(n, ast.comprehension)}
            for sub in (n for n in ast.walk(tree) if isinstance(n, ast.Subscript)):
                names |= {n.id for n in ast.walk(sub.slice) if isinstance(n, ast.Name)}
            out |= {spell(n).latex for n in names - named - {"inf"}}
    return out


@functools.cache
def meanings(name: str) -> dict[str, set]:
    """Every symbol of the example's forward stages, with the roles it names."""
    g = derive(load_example() if name == "builtin" else load_example(name))
    found: dict[str, set] = {}
    for stage in g:
        if stage.name.startswith("grad."):
            continue
        for letter in indices(stage):
            found.setdefault(letter, set()).add(INDEX)
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
    assert INDEX in found["i"] and INDEX in found["j'"]
    assert "m" not in found or INDEX not in found["m"]
    assert any(r[0] == "row" and r[2] == "layer#.head#.Q" for r in found["q"])


@pytest.mark.parametrize("name", EXAMPLES)
def test_one_meaning_per_symbol(name):
    """No symbol has two roles (issue 39, item 5).  Resolved by renames: a sum's index
    is j, or j′ beside an equation's own j (i′ over rows), never m (the multi-head
    output); PE's and RoPE's position is pos and their pair l (c is the concatenation,
    p the probabilities); the FFN activation's matrix is H̃ (A is the attention
    matrix); the final RMSNorm's statistics are ⟨x̂²⟩ and a hatted rms."""
    assert not collisions(name), collisions(name)


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


@pytest.mark.parametrize("name", ["builtin", "llama_style"])
def test_renamed_letters(name):
    """The renames of issue 39, item 5, as the scan reads them: the equations' sums run
    over j′ (never m, the multi-head output), PE's and RoPE's position and pair are pos
    and l (not p, c: the probabilities, the concatenation), A is the attention matrix
    alone (the FFN activation's rows a make the matrix H̃), and the final RMSNorm's
    statistics carry the final norm's hat."""
    found = meanings(name)
    assert INDEX in found[ROPE_POSITION.latex] and INDEX in found[ROPE_PAIR.latex]
    assert (ROPE_POSITION.latex, ROPE_PAIR.latex) == (r"\mathit{pos}", "l")
    assert all(INDEX not in found.get(letter, ()) for letter in ("m", "c", "p"))
    assert {r[2] for r in found["A"]} == {"layer#.head#.weights"}
    activation = {r[2] for r in found[r"\tilde{H}"]}
    assert activation == {"layer#.ffn.activation"}, activation
    if name == "llama_style":
        assert {r[2] for r in found[r"\langle \hat{x}^2 \rangle"]} == {"final_norm.mean_square"}
        assert {r[2] for r in found[r"\hat{\mathrm{rms}}"]} == {"final_norm.std"}
