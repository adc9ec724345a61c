"""Example files: exact reading, and a clear message with exit status 2 for bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from symformer.cli import main
from symformer.example import builtin_text

GOOD = builtin_text()


def run_cli(tmp_path, text: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "example.toml"
    path.write_text(text, encoding="utf-8")
    return main(["derive", str(path), *args]), str(path)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace('title = "I think', 'title = "I think" "'), "invalid TOML"),
    (lambda t: t.replace('"understand"]\nvocab', '"understood"]\nvocab'),
     "token 'understood' (position 3) is not in vocab"),
    (lambda t: t.replace("[4, 1, 0, 2],  # think", "[4, 1, 0],  # think"),
     "embeddings is ragged: row 0 has 4 entries but row 1 has 3"),
    (lambda t: t.replace("W_Q = [[0.25, 0], [0.25, 0], [0, 0.25], [0, 0.25]]",
                         "W_Q = [[0.25, 0], [0.25, 0], [0, 0.25]]"),
     "layer 1, head 1: W_Q has shape 3x2, expected 4x?"),
    (lambda t: t.replace("W_K = [[0, 0], [0, 0], [0, 0.25], [0.25, 0.25]]",
                         "W_K = [[0, 0, 0], [0, 0, 0], [0, 0.25, 0], [0.25, 0.25, 0]]"),
     "layer 1, head 2: W_K has shape 4x3, expected 4x2"),
    (lambda t: t.replace("[0,   0,   0.5, 0.5, 0,   0.5],\n]",
                         "[0,   0,   0.5, 0.5, 0,   0.5],\n[1, 1, 1, 1, 1, 1]]"),
     "layer 1: W_1 has shape 5x6, expected 4x?"),
    (lambda t: t.replace("b_2 = [0.1, 0.1, 0.1, 0.1]", "b_2 = [0.1, 0.1, 0.1]"),
     "layer 1: b_2 has 3 entries, expected 4"),
    (lambda t: t.replace("[1, 4, 0, 3],  # cat", '[1, "four", 0, 3],  # cat'),
     "embeddings[5][1]: 'four' is not a number"),
    (lambda t: t.replace("[1, 4, 0, 3],  # cat", "[1, inf, 0, 3],  # cat"),
     "entries must be finite"),
    (lambda t: t.replace("[1, 4, 0, 3],  # cat", "[1, nan, 0, 3],  # cat"),
     "entries must be finite"),
    (lambda t: t.replace("[1, 4, 0, 3],  # cat", "[1, 0.21e4005, 0, 3],  # cat"),
     "embeddings[5][1]: the exponent of 0.21e4005 is out of range"),
    (lambda t: t.replace('tokens = ["I", "think", "I", "understand"]', "tokens = []"),
     "tokens is empty"),
    (lambda t: t.replace('eps = "1e-6"', 'eps = "1e-6"\nwidth = 3'), "unknown key 'width'"),
    (lambda t: t.replace('positional_encoding = "sinusoidal"', 'positional_encoding = "learnt"'),
     "positional_encoding must be one of 'sinusoidal', 'learned', 'rope', 'none'"),
])
def test_bad_input_exit_2(tmp_path, capsys, edit, message):
    text = edit(GOOD)
    assert text != GOOD, "the edit did not apply"
    status, path = run_cli(tmp_path, text)
    err = capsys.readouterr().err
    assert status == 2
    assert message in err
    assert path in err
    assert "Traceback" not in err


def test_missing_file(capsys):
    assert main(["derive", "/nonexistent/example.toml"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_size_limit_names_the_limit_and_how_to_raise_it(tmp_path, capsys):
    status, _ = run_cli(tmp_path, GOOD, "--max-work", "100")
    err = capsys.readouterr().err
    assert status == 2
    assert "over the limit of 100 (under a second)" in err and "--max-work" in err


def test_no_traceback_from_a_real_process(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("tokens = [", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "symformer", "derive", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "invalid TOML" in proc.stderr and "Traceback" not in proc.stderr


def test_packaged_examples_load_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no file of that name here
    assert main(["derive", "course_module", "--list"]) == 0
    assert "layer1.head1.Q" in capsys.readouterr().out
    assert main(["derive", "course"]) == 2
    err = capsys.readouterr().err
    assert "packaged examples: attention_only, course_module, cross_attention_decoder" in err
    assert "encoder_decoder, gpt2_style" in err
