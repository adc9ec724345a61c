"""Floating-point weights converted in NumPy (symformer/example/dyadic.py), checked against
Python's own exact conversion (``fractions.Fraction(float(x))``) and against float64
products; the weights-by-reference example file (symformer/example/weights_file.py)."""

from __future__ import annotations

import json
import pickle
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import arb, arb_mat, ctx, fmpq

from symformer.cli import main
from symformer.engine.arbmath import constant_balls, constant_mat
from symformer.errors import InputError
from symformer.example.dyadic import DyadicMatrix, dyadic_arb_mat, dyadic_parts, rationals
from tests.model_dirs import gpt2_config, gpt2_dir, gpt2_tensors

DTYPES = (np.float64, np.float32, np.float16)


def awkward(dtype, shape=(7, 9), seed=0) -> np.ndarray:
    """Random values with subnormals, ±0, the extremes and powers of two mixed in."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(dtype)
    flat = a.reshape(-1)
    special = [0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal * 3,
               info.tiny, info.max, -info.max, 1.0, -0.5, 2.0 ** -10]
    flat[:len(special)] = np.array(special, dtype)
    return a


@pytest.mark.parametrize("dtype", DTYPES)
def test_parts_are_exactly_the_floats(dtype) -> None:
    a = awkward(dtype)
    M, e = dyadic_parts(a)
    for x, m in zip(a.reshape(-1).tolist(), M.reshape(-1).tolist()):
        assert Fraction(int(m)) * Fraction(2) ** e == Fraction(float(x))


def test_a_typical_weight_matrix_fits_int64() -> None:
    a = (np.random.default_rng(1).standard_normal((64, 64)) * 0.02).astype(np.float32)
    M, e = dyadic_parts(a)
    assert M.dtype == np.int64
    assert all(Fraction(int(m), 2 ** -e) == Fraction(float(x))
               for x, m in zip(a.reshape(-1).tolist(), M.reshape(-1).tolist()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_arb_mat_holds_the_floats_exactly(dtype) -> None:
    a = awkward(dtype, seed=2)
    old = ctx.prec
    try:
        ctx.prec = 2200  # float64's extremes span 2^-1074 .. 2^1024: exact at this width
        A = dyadic_arb_mat(a)
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                f = Fraction(float(a[i, j]))
                assert A[i, j].rad() == 0
                assert A[i, j] == arb(fmpq(f.numerator, f.denominator))
    finally:
        ctx.prec = old


def test_rationals_match_fractions() -> None:
    a = awkward(np.float32, seed=3)
    got = rationals(a)
    for i, row in enumerate(got):
        for j, v in enumerate(row):
            f = Fraction(float(a[i, j]))
            assert (int(v.p), int(v.q)) == (f.numerator, f.denominator)


def test_the_matrix_quacks_like_sympys() -> None:
    import sympy

    a = np.array([[0.5, -0.1], [3.0, 2.0 ** -30], [0.0, 1.25]], np.float32)
    m = DyadicMatrix(a, "w")
    reference = sympy.Matrix([[sympy.Rational(*float(x).as_integer_ratio()) for x in row]
                              for row in a.tolist()])
    assert m.shape == (3, 2) and m.rows == 3 and m.cols == 2
    assert m[0, 1] == reference[0, 1] and m[3] == reference[3] and m[-1, -1] == sympy.Rational(5, 4)
    assert list(m.row(1)) == list(reference.row(1)) and list(m.col(0)) == list(reference.col(0))
    assert m.T.shape == (2, 3) and m.T[1, 0] == reference[0, 1]
    assert m.tolist() == reference.tolist() and m.sympy == reference
    assert m[1:, :].shape == (2, 2) and m[1:, :][0, 1] == reference[1, 1]
    assert pickle.loads(pickle.dumps(m)) == m
    with pytest.raises(InputError, match=r"w\[1\]\[0\]: the weight nan is not finite"):
        DyadicMatrix(np.array([[1.0, 2.0], [np.nan, 0.0]]), "w")
    with pytest.raises(InputError, match="out of the range"):
        DyadicMatrix(np.array([1e-300]), "b")


def test_balls_and_products_agree_with_float64() -> None:
    rng = np.random.default_rng(4)
    W = (rng.standard_normal((300, 5)) * 0.02).astype(np.float32)
    X = rng.standard_normal((3, 300))
    m = DyadicMatrix(W, "W")
    assert constant_mat(m) is constant_mat(m)  # kept per precision
    rows = constant_balls(m)  # a large table: rows built when read
    assert len(rows) == 300 and rows[7][2] == arb(fmpq(*float(W[7, 2]).as_integer_ratio()))
    product = arb_mat(X.tolist()) * constant_mat(m)
    expected = X @ W.astype(np.float64)
    assert all(abs(float(product[i, j].mid()) - expected[i, j]) < 1e-12
               for i in range(3) for j in range(5))


def run_import(folder: Path, out: Path, *extra: str) -> int:
    return main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out), "--quiet",
                 *extra])


def logits(path: Path, capsys) -> list[list[float]]:
    assert main(["derive", str(path), "--stage", "logits", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    stage = data["stages"]["logits"]
    return [[float(v) for v in row] for row in stage["values"]]


def numpy_gpt2(t: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """An independent float64 GPT-2 forward pass (one layer, tied head)."""
    w = {k.removeprefix("transformer."): v.astype(np.float64) for k, v in t.items()}

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    x = w["wte.weight"][ids] + w["wpe.weight"][: len(ids)]
    h = ln(x, w["h.0.ln_1.weight"], w["h.0.ln_1.bias"])
    q, k, v = np.split(h @ w["h.0.attn.c_attn.weight"] + w["h.0.attn.c_attn.bias"], 3, -1)
    heads = []
    for s in range(2):  # gpt2_config's n_head
        sl = slice(2 * s, 2 * s + 2)
        scores = q[:, sl] @ k[:, sl].T / np.sqrt(2) + np.triu(np.full((3, 3), -np.inf), 1)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        heads.append(p / p.sum(-1, keepdims=True) @ v[:, sl])
    x = x + np.concatenate(heads, -1) @ w["h.0.attn.c_proj.weight"] + w["h.0.attn.c_proj.bias"]
    h = ln(x, w["h.0.ln_2.weight"], w["h.0.ln_2.bias"]) @ w["h.0.mlp.c_fc.weight"] \
        + w["h.0.mlp.c_fc.bias"]
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    x = x + h @ w["h.0.mlp.c_proj.weight"] + w["h.0.mlp.c_proj.bias"]
    return ln(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T


def test_an_example_by_reference_derives_the_models_logits(tmp_path, capsys,
                                                          monkeypatch) -> None:
    tensors = gpt2_tensors(seed=5)
    folder = gpt2_dir(tmp_path / "m", tensors=tensors)
    out = tmp_path / "ex" / "g.toml"
    out.parent.mkdir()
    # a model directory below the example's folder is referred to where it is
    assert run_import(folder, tmp_path / "h.toml", "--weights", "reference") == 0
    assert '\nfile = "m/model.safetensors"\n' in (tmp_path / "h.toml").read_text()
    assert not (tmp_path / "h.safetensors").exists()
    # elsewhere (absolute or through ..), its file is copied beside the example, which
    # reads a weights file only in its own folder or below
    monkeypatch.chdir(tmp_path)
    for given in (folder, Path("m")):
        assert run_import(given, Path("ex/g.toml"), "--weights", "reference") == 0
        text = out.read_text()
        assert '\nfile = "g.safetensors"\n' in text and "\nsha256 = " in text
        assert (out.parent / "g.safetensors").read_bytes() == \
            (folder / "model.safetensors").read_bytes()
        assert "copied to ex/g.safetensors" in capsys.readouterr().err
    assert 'W_Q = {tensor = "transformer.h.0.attn.c_attn.weight", rows = [0, 4], ' \
           'columns = [0, 2]}' in text
    capsys.readouterr()
    got = np.array(logits(out, capsys))
    assert np.allclose(got, numpy_gpt2(tensors, [0, 1, 2]), rtol=0, atol=1e-9)
    # the same example written inline gives the same printed logits
    assert run_import(folder, tmp_path / "i.toml", "--weights", "inline") == 0
    capsys.readouterr()
    assert logits(tmp_path / "i.toml", capsys) == got.tolist()


def test_a_changed_or_hostile_weights_file_is_refused(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = gpt2_dir(Path("m"))
    out = Path("g.toml")
    assert run_import(folder, out, "--weights", "reference") == 0
    capsys.readouterr()
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of the last weight
    weights.write_bytes(bytes(data))
    assert main(["derive", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.safetensors" in err and "changed" in err
    assert not re.search(r"[0-9a-f]{12}", err)  # neither hash is shown
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    text = out.read_text()
    cases = {
        # content-addressed: another file is refused by its hash before a byte of it
        # is parsed, and the message shows nothing of it (no header size, no hash)
        text.replace('file = "m/model.safetensors"', 'file = "/etc/passwd"'):
            'file = "/etc/passwd" must name a file by its path relative to the example\'s',
        text.replace('file = "m/model.safetensors"', 'file = "m/config.json"'):
            'file = "m/config.json": no weights file with the recorded SHA-256 there',
        text.replace('{tensor = "transformer.wte.weight"}', '{tensor = "nope"}'):
            "no tensor 'nope'",
        text.replace('rows = [0, 4], columns = [0, 2]}', 'rows = [0, 4], columns = [0, 99]}',
                     1): "columns must be [start, end]",
        text.replace('{tensor = "transformer.wte.weight"}',
                     '{tensor = "transformer.wte.weight", shift = 1}'): "unknown key 'shift'",
        text.replace('gamma_f = {tensor = "transformer.ln_f.weight"}',
                     'gamma_f = {tensor = "transformer.wte.weight"}'): "must be a vector",
    }
    (tmp_path / "outside.safetensors").write_bytes(bytes(data))
    (tmp_path / "m" / "link.safetensors").symlink_to(tmp_path / "outside.safetensors")
    cases[text.replace('file = "m/model.safetensors"', 'file = "m/link.safetensors"')] = \
        'file = "m/link.safetensors": no weights file with the recorded SHA-256 there'
    for i, (changed, message) in enumerate(cases.items()):
        assert changed != text, message
        path = Path(f"bad{i}.toml")
        path.write_text(changed)
        assert main(["derive", str(path)]) == 2, message
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (message, err)


def test_a_wide_model_is_estimated_as_cheap_as_it_is(tmp_path) -> None:
    """The 6.9-million-operation refusal of a sub-second derive is gone: products with
    constant weights and the weights they read are charged at their own rates."""
    from symformer import from_pretrained
    from symformer.blocks.cost import PER_SECOND, estimate
    from symformer.blocks.work import DEFAULT_MAX_WORK

    folder = gpt2_dir(tmp_path / "m", config=gpt2_config(n_embd=256, n_head=4),
                      tensors=gpt2_tensors(d=256))
    example = from_pretrained(folder, [0, 1, 2, 3])
    work = estimate("derive", example)
    # measured: 0.7 s of CPU for 8 tokens (benchmarks/bench_scale.py --size 8,256,4,1,512)
    assert PER_SECOND // 4 < work < DEFAULT_MAX_WORK // 4


def test_a_refusal_names_the_limit_the_caller_gave(tmp_path, capsys) -> None:
    from symformer import derive, from_pretrained

    folder = gpt2_dir(tmp_path / "m")
    with pytest.raises(InputError) as caught:
        from_pretrained(folder, [0], max_work=1000)
    assert "max_work=N" in str(caught.value) and "--max-work" not in str(caught.value)
    with pytest.raises(InputError) as caught:
        derive(from_pretrained(folder, [0]), max_work=1)
    assert "max_work=N" in str(caught.value) and "--max-work" not in str(caught.value)
    assert run_import(folder, tmp_path / "x.toml", "--max-work", "1000") == 2
    err = capsys.readouterr().err
    assert "--max-work N" in err and "max_work=" not in err


def _same_by_reference(folder: Path, tmp_path: Path, capsys, tokens: str) -> str:
    """Import ``folder`` by reference and inline; the two derive the same JSON. Returns
    the referring example's text."""
    for mode in ("reference", "inline"):
        assert main(["import", str(folder), "--tokens", tokens, "--out",
                     str(tmp_path / f"{mode}.toml"), "--quiet", "--weights", mode]) == 0
    capsys.readouterr()
    printed = []
    for mode in ("reference", "inline"):
        assert main(["derive", str(tmp_path / f"{mode}.toml"), "--json"]) == 0
        printed.append(json.loads(capsys.readouterr().out)["stages"])
    assert printed[0] == printed[1]
    return (tmp_path / "reference.toml").read_text()


def test_llama_weights_stored_transposed_are_referred_to_transposed(tmp_path, capsys) -> None:
    from tests.model_dirs import llama_dir

    text = _same_by_reference(llama_dir(tmp_path / "ll"), tmp_path, capsys, "0,1,2")
    assert 'W_O = {tensor = "model.layers.0.self_attn.o_proj.weight", transpose = true}' \
        in text
    assert "/2^" not in text  # no weight written out


def test_bert_by_reference(tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.test_frameworks import _tiny_bert

    folder = tmp_path / "bert"
    folder.mkdir()
    _tiny_bert(folder, seed=3, layers=1)
    text = _same_by_reference(folder, tmp_path, capsys, "1,2,3")
    assert "/2^" not in text and "\n[weights]\n" in text
