"""A mixture of experts and dropout with given masks in an example file (``[layer.moe]``,
``attention_dropout``, ``ffn_dropout``): the shipped ``moe_dropout`` against a float64
NumPy computation written here from the file's own numbers (read with tomllib, not the
loader), random files (hypothesis) against the same reference -- the routing decided by
exact integer scores, a tie at the k-th place named and broken by the lower expert
index, the margin -- and every malformed table refused in one line naming the key."""

from __future__ import annotations

import tomllib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import packaged_examples, parse_example

PATH = packaged_examples()["moe_dropout"]
DATA = tomllib.loads(PATH.read_text(encoding="utf-8"))


def _floats(stage) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in stage.values(decimals=15)])


def _num(v) -> float:
    return float(Fraction(v)) if isinstance(v, str) else float(v)


def _array(rows) -> np.ndarray:
    return np.array([[_num(v) for v in row] for row in rows], dtype=float)


def _dropout(x: np.ndarray, table: dict | None) -> np.ndarray:
    if table is None:
        return x
    return x * _array(table["mask"]) / (1 - _num(table["p"]))


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def reference_moe(x: np.ndarray, moe: dict) -> dict[str, np.ndarray]:
    """The mixture as its definition reads: router softmax, the top-k (a stable sort of
    the scores, so equal scores go to the lower index), gates, ReLU experts, the sum."""
    r = x @ _array(moe["router"])
    p = _softmax(r)
    k, E = moe["top_k"], r.shape[1]
    m = np.zeros_like(r)
    margin = []
    for i in range(r.shape[0]):
        ranked = sorted(range(E), key=lambda e: (-r[i, e], e))
        m[i, ranked[:k]] = 1
        if k < E:
            margin.append(r[i, ranked[k - 1]] - r[i, ranked[k]])
    kept = m * p
    g = kept / kept.sum(axis=1, keepdims=True) if moe.get("renormalize", True) else kept
    out = np.zeros_like(x)
    for e, expert in enumerate(moe["expert"]):
        h = x @ _array(expert["W_1"]) + (_array([expert["b_1"]]) if "b_1" in expert else 0)
        f = np.maximum(h, 0) @ _array(expert["W_2"])
        out += g[:, [e]] * (f + (_array([expert["b_2"]]) if "b_2" in expert else 0))
    return {"router_logits": r, "router_probabilities": p, "experts": m, "gates": g,
            "output": out, "margin": np.array(margin).reshape(-1, 1)}


def reference_example(data: dict) -> dict[str, np.ndarray]:
    """The shipped example's layer (norm "none", residuals) in float64: one head with
    W_Q = 0 (every weight 1/3), its dropout, then the mixture and its dropout."""
    layer = data["layer"][0]
    x = _array(data["embeddings"])[[data["vocab"].index(t) for t in data["tokens"]]]
    head = layer["head"][0]
    q, k, v = (x @ _array(head[w]) for w in ("W_Q", "W_K", "W_V"))
    a = _softmax(q @ k.T / np.sqrt(k.shape[1])) @ v
    dropped = _dropout(a, layer.get("attention_dropout"))
    x1 = x + dropped
    moe = reference_moe(x1, layer["moe"])
    moe_dropped = _dropout(moe["output"], layer.get("ffn_dropout"))
    return {"attention.output.dropout": dropped, "add_norm1": x1,
            **{f"moe.{k}": v for k, v in moe.items()},
            "moe.output.dropout": moe_dropped, "add_norm2": x1 + moe_dropped}


@pytest.fixture(scope="module")
def shipped():
    return derive(load_example("moe_dropout"))


def test_the_shipped_example_matches_float64(shipped):
    want = reference_example(DATA)
    for name, value in want.items():
        got = _floats(shipped[f"layer1.{name}"])
        np.testing.assert_allclose(got, value, rtol=0, atol=1e-13, err_msg=name)
    np.testing.assert_allclose(_floats(shipped["output"]), want["add_norm2"], atol=1e-13)


def test_the_shipped_routing_is_exact_with_a_proved_tie(shipped):
    """the [4, 0, 2] and cat [0, 2, 1]: margins 2 and 1, exactly; sat [4, 4, 4]: a
    three-way tie, e1 and e2 kept by the lower index, said so in the decision's notes."""
    assert shipped["layer1.moe.margin"].values(decimals=0) == [["2"], ["1"], ["0"]]
    assert shipped["layer1.moe.experts"].values(decimals=0) == [
        ["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"]]
    notes = shipped["layer1.moe.experts"].op.notes
    assert "margin" in notes[0] and "tie" not in notes[0]
    assert "tie at the k-th place: e2 and e3 have proved equal scores" in notes[2]
    assert "lower expert index" in notes[2]
    # the tied token's gates are exactly 1/2 (e^4 / (e^4 + e^4))
    assert shipped["layer1.moe.gates"].values(decimals=30)[2][:2] == ["0." + "5" + "0" * 29] * 2


def _ints(draw, rows: int, cols: int, low: int = -2, high: int = 2) -> list[list[int]]:
    return draw(st.lists(st.lists(st.integers(low, high), min_size=cols, max_size=cols),
                         min_size=rows, max_size=rows))


def _toml(rows) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in rows) + "]"


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_random_files_route_as_the_reference(data):
    """An FFN-only block whose sub-layer is a mixture (integer inputs and router: exact
    integer scores, so ties are frequent) with dropout, written as an example file."""
    n, d, E = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)),
               data.draw(st.integers(2, 3)))
    k = data.draw(st.integers(1, E))
    renormalize = data.draw(st.booleans())
    x, router = _ints(data.draw, n, d), _ints(data.draw, d, E, -1, 1)
    mask = _ints(data.draw, n, d, 0, 1)
    experts = "".join(f"\n[[layer.moe.expert]]\nW_1 = {_toml(_ints(data.draw, d, 1))}\n"
                      f"W_2 = {_toml(_ints(data.draw, 1, d))}\n" for _ in range(E))
    text = (f"inputs = {_toml(x)}\nnorm = \"none\"\n[[layer]]\nresidual = false\n"
            f"ffn_dropout = {{ p = \"1/4\", mask = {_toml(mask)} }}\n"
            f"[layer.moe]\nrouter = {_toml(router)}\ntop_k = {k}\n"
            f"renormalize = {str(renormalize).lower()}\n{experts}")
    table = tomllib.loads(text)
    g = derive(parse_example(text, "random.toml"))
    want = reference_moe(_array(x), table["layer"][0]["moe"])
    for name in ("router_probabilities", "experts", "gates", "output"):
        np.testing.assert_allclose(_floats(g[f"layer1.moe.{name}"]), want[name],
                                   rtol=0, atol=1e-13, err_msg=name)
    if k < E:
        np.testing.assert_array_equal(_floats(g["layer1.moe.margin"]), want["margin"])
    notes = g["layer1.moe.experts"].op.notes
    for i in range(n):  # a tie at the k-th place is named exactly when the scores tie
        assert ("tie at the k-th place" in notes[i]) == (k < E and want["margin"][i, 0] == 0)
    np.testing.assert_allclose(_floats(g["output"]), _dropout(want["output"], {
        "p": "1/4", "mask": mask}), rtol=0, atol=1e-13)


BASE = PATH.read_text(encoding="utf-8")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("top_k = 2", "top_k = 4", "layer 1, moe: top_k must be a whole number from 1 to 3"),
    ("top_k = 2", "top_k = true", "top_k must be a whole number from 1 to 3"),
    ("top_k = 2", "", "layer 1, moe: missing key 'top_k' (how many experts each token goes"),
    ("router = [[2, 0, 1], [0, 2, 1]]", "router = [[2, 0, 1]]",
     "layer 1, moe: router has shape 1x3, expected 2x?"),
    ("router = [[2, 0, 1], [0, 2, 1]]", "router = [[2, 0], [0, 2]]",
     "router has 2 columns (one per expert) but there are 3 [[layer.moe.expert]] tables"),
    ("top_k = 2", "top_k = 2\nrenormalise = true", "unknown key 'renormalise' (did you mean"
     " 'renormalize'?)"),
    ("top_k = 2", "top_k = 2\nrenormalize = \"yes\"", "renormalize must be true or false"),
    ("b_1 = [0, -1]", "b_1 = [0, -1, 2]", "layer 1, moe, expert 3: b_1 has 3 entries"),
    ("p = 0.5,", "p = 1,", "layer 1, ffn_dropout: p must be from 0 up to (not including) 1"),
    ("p = 0.5,", "p = \"x\",", "layer 1, ffn_dropout: p: 'x' is not a number"),
    ("mask = [[1, 0], [1, 1], [0, 1]]", "mask = [[1, 0], [1, 2], [0, 1]]",
     "layer 1, ffn_dropout: mask[1][1] must be 0 or 1, found '2'"),
    ("mask = [[1, 0], [1, 1], [0, 1]]", "mask = [[1, 0], [1, 1]]",
     "layer 1, ffn_dropout: mask must be 3x2 (a row of 2 per token)"),
    ("mask = [[1, 0], [0, 0], [1, 1]]", "mask = [[1, 0], [0, false], [1, 1]]",
     "attention_dropout: mask[1][1] must be 0 or 1"),
    ("ffn_dropout = { p = 0.5,", "ffn_dropout = { q = 0.5,",
     "ffn_dropout: unknown key 'q'"),
    ("[[layer]]\n", "[[layer]]\nW_1 = [[1, 0], [0, 1]]\nW_2 = [[1, 0], [0, 1]]\n",
     "layer 1: give W_1 (one feed-forward network) or [layer.moe]"),
])
def test_a_malformed_table_is_one_line_naming_the_key(tmp_path, capsys, old, new, message):
    assert old in BASE
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace(old, new, 1), encoding="utf-8")
    assert main(["derive", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err and len(err.strip().splitlines()) == 1, err


def test_dropout_needs_its_sub_layer():
    no_heads = "inputs = [[1, 0]]\n[[layer]]\nW_1 = [[1], [0]]\nW_2 = [[1, 1]]\n"
    with pytest.raises(InputError, match="x.toml, layer 1: attention_dropout has no meaning "
                                         "in a layer without attention heads"):
        parse_example(no_heads + "attention_dropout = { p = 0, mask = [[1, 1]] }\n", "x.toml")
    with pytest.raises(InputError, match="x.toml, layer 1, moe: must be a table"):
        parse_example("inputs = [[1, 0]]\n[[layer]]\nmoe = 3\n", "x.toml")
    no_ffn = ("inputs = [[1, 0]]\n[[layer]]\nffn_dropout = { p = 0, mask = [[1, 1]] }\n"
              "[[layer.head]]\nW_Q = [[1], [0]]\nW_K = [[1], [0]]\nW_V = [[1, 0], [0, 1]]\n")
    with pytest.raises(InputError, match="ffn_dropout has no meaning in a layer without "
                                         "W_1 or \\[layer.moe\\]"):
        parse_example(no_ffn, "x.toml")


def test_generate_refuses_a_mask_it_cannot_extend(tmp_path, capsys):
    """A given mask has a row per token of the example; a generated token has none."""
    path = tmp_path / "lm.toml"
    path.write_text(
        'vocab = ["a", "b"]\ntokens = ["a", "b"]\nembeddings = [[1, 0], [0, 1]]\n'
        'positional_encoding = "none"\ncausal = true\nnorm = "none"\n[[layer]]\n'
        "attention_dropout = { p = 0.5, mask = [[1, 0], [1, 1]] }\n[[layer.head]]\n"
        "W_Q = [[1, 0], [0, 1]]\nW_K = [[1, 0], [0, 1]]\nW_V = [[1, 0], [0, 1]]\n"
        "[lm_head]\ntied = true\n", encoding="utf-8")
    assert main(["generate", str(path), "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "layer 1, attention_dropout: the mask has a row " \
        "for each of the example's 2 tokens, but this run has 3" in err
