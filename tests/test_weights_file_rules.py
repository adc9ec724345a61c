"""A weights file by reference (``[weights] file``) from an untrusted example (issue 36,
attack 5 S1, S2, H6, M2, M3): read only below the example's folder, its size checked
before a byte is read, one message whatever is (or is not) at the path, the path
escaped, and the bytes hashed the bytes parsed — a file swapped in meanwhile is never
used.  Logits are compared with an independent NumPy forward pass of the tensors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from model_dirs import gpt2_dir, gpt2_tensors
from test_dyadic import numpy_gpt2

from symformer.cli import main
from symformer.example import model_dir


def _referring(tmp_path: Path, capsys, seed: int = 5) -> tuple[Path, str, dict]:
    """A GPT-2 directory ``proj/m`` and ``proj/g.toml`` referring to its weights file."""
    tensors = gpt2_tensors(seed=seed)
    folder = gpt2_dir(tmp_path / "proj" / "m", tensors=tensors)
    out = tmp_path / "proj" / "g.toml"
    assert main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out), "--quiet",
                 "--weights", "reference"]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert '\nfile = "m/model.safetensors"\n' in text
    return out, text, tensors


def _refusal(path: Path, text: str, file: str, capsys) -> str:
    """The one line ``derive`` prints for the example naming ``file`` (exit 2)."""
    path.write_text(text.replace('file = "m/model.safetensors"', f'file = "{file}"'))
    assert main(["derive", str(path), "--stage", "logits"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    return err


def test_a_path_out_of_the_examples_folder_is_refused_before_it_is_opened(
        tmp_path, capsys, monkeypatch) -> None:
    out, text, _ = _referring(tmp_path, capsys)
    opened = []
    real_open = model_dir._open
    monkeypatch.setattr(model_dir, "_open", lambda real, name: opened.append(real)
                        or real_open(real, name))
    for file in ("/etc/passwd", "/etc/passwd_nope", "/proc/self/mem", "../proj/m/x",
                 "m/../m/model.safetensors", "m\\\\model.safetensors"):
        err = _refusal(out.parent / "p.toml", text, file, capsys)
        assert "by its path relative to the example's folder, without '..'" in err, err
    assert opened == []


def test_one_message_whatever_is_there(tmp_path, capsys, monkeypatch) -> None:
    """Missing, a folder, a FIFO, another file, a link out of the folder (to a file, or
    a folder on the way), a file over the size limit: the same words, only the path
    named differs — an example learns nothing of what exists."""
    out, text, tensors = _referring(tmp_path, capsys)
    proj = out.parent
    (tmp_path / "secret.safetensors").write_bytes(b"x" * 100)
    (proj / "link.safetensors").symlink_to(tmp_path / "secret.safetensors")
    (proj / "dirlink").symlink_to(tmp_path)
    (proj / "other.safetensors").write_bytes((proj / "m" / "model.safetensors")
                                             .read_bytes()[:-1] + b"\x01")
    os.mkfifo(proj / "fifo")
    with open(proj / "huge.safetensors", "wb") as handle:  # sparse: no disk used
        handle.truncate(model_dir.MAX_WEIGHT_BYTES + 1)
    monkeypatch.setattr(model_dir.SafeTensors, "sha256",
                        lambda self: pytest.fail(f"{self.name} was hashed"))
    messages = set()
    for file in ("missing.safetensors", "m", "fifo", "link.safetensors",
                 "dirlink/secret.safetensors", "huge.safetensors"):
        err = _refusal(proj / "p.toml", text, file, capsys)
        messages.add(err.replace(f'"{file}"', '"FILE"'))
    monkeypatch.undo()
    err = _refusal(proj / "p.toml", text, "other.safetensors", capsys)  # hashed: differs
    messages.add(err.replace('"other.safetensors"', '"FILE"'))
    assert len(messages) == 1, messages
    assert 'file = "FILE": no weights file with the recorded SHA-256 there' in messages.pop()
    assert not re.search(r"[0-9a-f]{12}", err)  # no hash shown


def test_the_path_is_escaped_in_the_message(tmp_path, capsys) -> None:
    out, text, _ = _referring(tmp_path, capsys)
    err = _refusal(out.parent / "p.toml", text, "a\\nb\\u001b[7mX", capsys)
    assert "\x1b" not in err and "a\\nb\\x1b[7mX" in err


def test_a_reference_where_a_value_belongs_is_named_not_printed(tmp_path, capsys) -> None:
    out, text, _ = _referring(tmp_path, capsys)
    for key in ("title", "eps", "causal"):
        changed = re.sub(rf"(?m)^{key} = .*$", f'{key} = {{tensor = "transformer.wte.weight"}}',
                         text)
        (out.parent / "p.toml").write_text(changed)
        assert main(["derive", str(out.parent / "p.toml")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Matrix(" not in err and len(err) < 300
        assert "p.toml" in err and key in err and "{tensor = 'transformer.wte.weight'}" in err


def _after_first_read(monkeypatch, change, chunk: int | None = None) -> None:
    """Call ``change()`` once, right after the first read of a weights file (with
    ``chunk``: the file read ``chunk`` bytes at a time, so the pass goes on after it)."""
    read = model_dir.SafeTensors._read
    done = []

    def hook(self, start, length):
        data = read(self, start, length)
        if not done:
            done.append(change())
        return data

    monkeypatch.setattr(model_dir.SafeTensors, "_read", hook)
    if chunk is not None:
        monkeypatch.setattr(model_dir, "_CHUNK", chunk)


def _old_logits_or_refused(path: Path, tensors: dict, capsys) -> int:
    """``derive`` prints the logits of ``tensors`` (the file hashed), or refuses in one
    line: never other numbers with exit 0.  Returns its exit status."""
    status = main(["derive", str(path), "--stage", "logits", "--json"])
    out, err = capsys.readouterr()
    if status == 0:
        got = np.array(json.loads(out)["stages"]["logits"]["values"], dtype=float)
        assert np.allclose(got, numpy_gpt2(tensors, [0, 1, 2]), rtol=0, atol=1e-9)
    else:
        assert status == 2 and err.count("\n") == 1, err
        assert "changed since the example was written" in err
    return status


@pytest.mark.parametrize("chunk", [None, 64])
def test_a_file_renamed_over_it_while_hashed_is_never_read(tmp_path, capsys, monkeypatch,
                                                           chunk) -> None:
    """Attack 5 S2: the recorded file's logits (the bytes hashed are the bytes used),
    or a refusal when the change is seen mid-pass; never the other file's, exit 0."""
    out, text, tensors = _referring(tmp_path, capsys)
    other = gpt2_dir(tmp_path / "other", tensors=gpt2_tensors(seed=9))
    weights = out.parent / "m" / "model.safetensors"
    _after_first_read(monkeypatch, lambda: os.replace(other / "model.safetensors", weights),
                      chunk)
    status = _old_logits_or_refused(out, tensors, capsys)
    assert status == (0 if chunk is None else 2)  # one read: the old bytes; more: refused
    assert not (other / "model.safetensors").exists()  # the swap happened
    monkeypatch.undo()
    assert main(["derive", str(out)]) == 2  # the next run sees the other file: refused
    assert "no weights file with the recorded SHA-256" in capsys.readouterr().err


@pytest.mark.parametrize("chunk", [None, 64])
def test_a_file_written_in_place_while_hashed_is_never_used(tmp_path, capsys, monkeypatch,
                                                            chunk) -> None:
    """Even where the file's times do not move (a write within one clock tick,
    simulated), the header and tensors used are those of the pass that hashed them."""
    out, text, tensors = _referring(tmp_path, capsys)
    weights = out.parent / "m" / "model.safetensors"
    other = bytearray(gpt2_dir(tmp_path / "other", tensors=gpt2_tensors(seed=9))
                      .joinpath("model.safetensors").read_bytes())
    monkeypatch.setattr(model_dir, "_stamp", lambda status: (status.st_ino,))

    def write_in_place() -> None:
        with open(weights, "r+b") as handle:
            handle.write(other)

    _after_first_read(monkeypatch, write_in_place, chunk)
    assert _old_logits_or_refused(out, tensors, capsys) == (0 if chunk is None else 2)
    assert weights.read_bytes() == other  # the write happened


def test_import_hashes_the_bytes_it_copies(tmp_path, capsys, monkeypatch) -> None:
    """A model elsewhere is copied beside the example through the descriptor it was
    read by: a file renamed over the source meanwhile is not what is copied."""
    tensors = gpt2_tensors(seed=5)
    folder = gpt2_dir(tmp_path / "m", tensors=tensors)
    other = gpt2_dir(tmp_path / "other", tensors=gpt2_tensors(seed=9))
    out = tmp_path / "ex" / "g.toml"
    contents = model_dir.SafeTensors.contents

    def swap_then_copy(self):
        os.replace(other / "model.safetensors", folder / "model.safetensors")
        return contents(self)

    monkeypatch.setattr(model_dir.SafeTensors, "contents", swap_then_copy)
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out), "--quiet",
                   "--weights", "reference"])
    err = capsys.readouterr().err
    monkeypatch.undo()
    if status == 0:  # what was copied is what was read and hashed
        _old_logits_or_refused(out, tensors, capsys)
    else:
        assert status == 2 and "changed while it was read" in err and not out.exists()


def test_an_example_written_through_a_link_to_another_folder_loads(tmp_path, capsys) -> None:
    """Attack 5 M13: ``--out LINK/ex.toml``, LINK a folder elsewhere: the weights file is
    copied into the folder the example really is in, and it derives the model's logits."""
    tensors = gpt2_tensors(seed=5)
    folder = gpt2_dir(tmp_path / "proj" / "gpt2", tensors=tensors)
    (tmp_path / "real").mkdir()
    (tmp_path / "proj" / "outlink").symlink_to(tmp_path / "real")
    out = tmp_path / "proj" / "outlink" / "ex.toml"
    assert main(["import", str(folder), "--tokens", "0,1,2", "--out", str(out), "--quiet",
                 "--weights", "reference"]) == 0
    capsys.readouterr()
    assert (tmp_path / "real" / "ex.safetensors").is_file()
    _old_logits_or_refused(out, tensors, capsys)
    assert main(["derive", str(out)]) == 0


def test_the_copy_is_never_written_through_a_link(tmp_path, capsys) -> None:
    folder = gpt2_dir(tmp_path / "m")
    (tmp_path / "ex").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "ex" / "g.safetensors").symlink_to(victim)
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out",
                   str(tmp_path / "ex" / "g.toml"), "--quiet", "--weights", "reference"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "symbolic link" in err
    assert victim.read_text() == "keep" and not (tmp_path / "ex" / "g.toml").exists()


def test_a_refused_import_leaves_no_copy(tmp_path, capsys, monkeypatch) -> None:
    import symformer.example.loader as loader

    folder = gpt2_dir(tmp_path / "m")
    monkeypatch.setattr(loader, "MAX_FILE_BYTES", 1000)  # the example is larger
    status = main(["import", str(folder), "--tokens", "0,1,2", "--out",
                   str(tmp_path / "ex" / "g.toml"), "--quiet", "--weights", "reference"])
    assert status == 2 and "an example file may hold" in capsys.readouterr().err
    assert not (tmp_path / "ex" / "g.safetensors").exists()
