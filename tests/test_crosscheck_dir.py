"""``crosscheck DIR``: every prompt of ``--prompts`` checked on exactly the model the
directory describes (a sliding window that bites included), an unreadable prompt named
by its line while the others run, ``--max-work`` honoured everywhere, and the model
loaded as a user loads it (``--load-dtype``, ``--attention``; float16 too)."""

from __future__ import annotations

import json

import numpy as np
import pytest


def _word_tokenizer(folder, size: int = 16) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = tokenizers.Tokenizer(WordLevel({f"w{i}": i for i in range(size)}, unk_token="w0"))
    tok.pre_tokenizer = Whitespace()
    (folder / "tokenizer.json").write_text(tok.to_str())


def _tiny(folder, kind: str, **config):
    """A random one-layer Mistral (window 3) or Llama with a word-level tokenizer."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(3)
    name = {"mistral": "Mistral", "llama": "Llama"}[kind]
    settings = {"vocab_size": 16, "hidden_size": 8, "intermediate_size": 8,
                "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                **config}
    model = getattr(transformers, f"{name}ForCausalLM")(
        getattr(transformers, f"{name}Config")(**settings)).eval()
    model.save_pretrained(folder, safe_serialization=True)
    _word_tokenizer(folder)
    return model


def _run(capsys, *args: str) -> tuple[int, dict | str]:
    from symformer.cli import main

    code = main(["crosscheck", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if "--json" in args and captured.out else captured


def test_every_prompt_keeps_the_sliding_window_and_a_bad_line_is_named(tmp_path,
                                                                       capsys) -> None:
    """Mistral with a window of 3 on prompts of 2, 8 and 5 tokens: each prompt's rows
    through --prompts equal its own --text run's (the window applied where it bites);
    a line too long to tokenize is named by its line number, the others still run."""
    _tiny(tmp_path / "m", "mistral", sliding_window=3)
    long_line = "w1 " * 4000
    lines = ["w1 w2", "# a comment", "w3 w4 w5 w6 w7 w8 w9 w10", long_line, "w5 w6 w7 w8 w9"]
    (tmp_path / "p.txt").write_text("\n".join(lines) + "\n")
    code, report = _run(capsys, str(tmp_path / "m"), "--prompts", str(tmp_path / "p.txt"),
                        "--dtype", "float32", "--json")
    assert code == 2 and not report["ok"]
    by_text = {p["prompt"]: p for p in report["prompts"]}
    assert [p["name"] for p in report["prompts"]] == [
        "prompt 1 (line 1)", "prompt 2 (line 3)", "prompt 3 (line 4)", "prompt 4 (line 5)"]
    failed = by_text[long_line.strip()]
    assert failed["stages"] is None and "line 4 of" in failed["error"]
    assert "11,999 characters, more than the 10,000" in failed["error"]
    for text in ("w1 w2", "w3 w4 w5 w6 w7 w8 w9 w10", "w5 w6 w7 w8 w9"):
        code, alone = _run(capsys, str(tmp_path / "m"), "--text", text, "--dtype",
                           "float32", "--json")
        assert code == 0
        assert by_text[text]["stages"] == alone["stages"], text
        # float32 against exact: a few eps, never millions (the window dropped)
        assert max(r["ulps"] for r in alone["stages"]) < 50


def test_crosscheck_dir_honours_max_work(tmp_path, capsys, monkeypatch) -> None:
    """A limit of 1 operation everywhere (SYMFORMER_MAX_WORK): --max-work 0 lifts it for
    the import, the exact derivation and every prompt's task; without it, one line."""
    _tiny(tmp_path / "m", "llama")
    (tmp_path / "p.txt").write_text("w1 w2\nw3 w4 w5\n")
    monkeypatch.setenv("SYMFORMER_MAX_WORK", "1")
    folder = str(tmp_path / "m")
    assert _run(capsys, folder, "--text", "w1 w2 w3", "--max-work", "0")[0] == 0
    code, report = _run(capsys, folder, "--prompts", str(tmp_path / "p.txt"), "--max-work",
                        "0", "--json")
    assert code == 0 and report["ok"] and all(p["stages"] for p in report["prompts"])
    monkeypatch.setenv("SYMFORMER_MAX_WORK", "1000")
    for args in (["--text", "w1 w2 w3"], ["--prompts", str(tmp_path / "p.txt")]):
        code, captured = _run(capsys, folder, *args)
        assert code == 2 and "over the limit of 1,000" in captured.err
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_the_model_is_loaded_as_the_user_loads_it(tmp_path, capsys) -> None:
    """--dtype bfloat16 loads with from_pretrained(dtype=torch.bfloat16, sdpa) by
    default; the logits' error is the one of that model run here by hand against the
    exact logits; --load-dtype float32 --attention eager is said so; float16 runs."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import symformer
    from symformer.frameworks import from_pretrained

    _tiny(tmp_path / "m", "llama")
    folder = str(tmp_path / "m")
    code, report = _run(capsys, folder, "--tokens", "1,2,3", "--dtype", "bfloat16", "--json")
    assert code == 0 and report["load"] == {"dtype": "bfloat16", "attention": "sdpa"}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    with torch.no_grad():
        got = model(torch.tensor([[1, 2, 3]])).logits[0].double().numpy()
    g = symformer.derive(from_pretrained(folder, [1, 2, 3]))
    exact = np.array([[float(b.mid()) for b in row] for row in g["logits"].balls(128)])
    rel = np.abs(got - exact).max() / np.abs(exact).max()
    logits = next(r for r in report["stages"] if r["stage"] == "logits")
    assert logits["rel_error"] == pytest.approx(rel, rel=1e-6)
    assert logits["ulps"] == pytest.approx(rel / 2**-7, rel=1e-6)
    code, captured = _run(capsys, folder, "--tokens", "1,2,3", "--dtype", "bfloat16",
                          "--load-dtype", "float32", "--attention", "eager")
    assert code == 0
    assert "loaded with dtype=torch.float32, attn_implementation='eager') in bfloat16" \
        in captured.out
    code, report = _run(capsys, folder, "--tokens", "1,2,3", "--dtype", "float16", "--json")
    assert code == 0 and report["dtype"] == "float16"
    assert all(r["ulps"] == pytest.approx(r["rel_error"] / 2**-10) for r in report["stages"])


def test_prompts_on_a_two_thread_dask_worker_are_the_serial_run(tmp_path, capsys) -> None:
    """The attack's case: a Dask worker running two threads (its tasks take turns: the
    exact arithmetic's precision is process-wide) gives the serial run's every number,
    and nothing of Dask's reaches stderr."""
    distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    from symformer.cli import main

    _tiny(tmp_path / "m", "mistral", sliding_window=3)
    (tmp_path / "p.txt").write_text("w1 w2 w3 w4 w5\nw3 w4 w5 w6 w7 w8\nw9 w2\nw5 w6 w7 w8\n")
    args = [str(tmp_path / "m"), "--prompts", str(tmp_path / "p.txt"), "--dtype", "float32",
            "--json", "--quiet", "--max-work", "0"]
    code, serial = _run(capsys, *args)
    assert code == 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        code = main(["crosscheck", *args, "--scheduler", cluster.scheduler_address])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out) == serial
    assert captured.err == ""


def test_a_worker_reading_another_model_refuses_the_prompt(tmp_path) -> None:
    """A task carries the directory's fingerprint (config.json and weights hashed where
    the run was checked); a worker whose directory holds another model refuses it."""
    import hashlib

    from model_dirs import gpt2_dir, gpt2_tensors

    from symformer.errors import InputError
    from symformer.frameworks.prompts import crosscheck_prompt, fingerprint

    folder = gpt2_dir(tmp_path / "m", tensors=gpt2_tensors(seed=1))
    config = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    weights = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert fingerprint(str(folder)) == f"{config}:{weights}"
    with pytest.raises(InputError, match="is not the one checked"):
        crosscheck_prompt(str(folder), (1, 2), "float32", (None, "sdpa"), "0" * 64)


def test_prompts_are_lines_numbered_as_in_the_file(tmp_path) -> None:
    """A prompt is a line ending at a newline (a U+2028 inside stays in it; CRLF ends
    are stripped), numbered as the file's lines; comments and blank lines skipped."""
    from symformer.frameworks.prompts import Prompt, read_prompts

    (tmp_path / "p.txt").write_text("# head\r\nfirst\u2028still first\r\n\n  second  \n",
                                    newline="")
    assert read_prompts(tmp_path / "p.txt") == [Prompt(2, "first\u2028still first"),
                                                Prompt(4, "second")]
    assert Prompt(4, "second").name(2) == "prompt 2 (line 4)"
