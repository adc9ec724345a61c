"""An empty or blank output path (``--out ''``, ``--write ''``) is a one-line input
error, exit 2, before any work: ``''`` would otherwise name the current folder
(``export --out ''`` wrote its 257 files there) or be taken for "not given"
(``train --write ''`` wrote nothing and said nothing)."""

from __future__ import annotations

import os

import pytest

from symformer.cli import main

NOTES = "{{ input[0,0] }}\n"

#: Each command with an output path, the option, and what else it needs (``{dir}``:
#: the test's folder, where the notes file is).
COMMANDS = [
    (["train", "--lr", "1/10", "--steps", "1"], "--write"),
    (["export"], "--out"),
    (["figures"], "--out"),
    (["slides"], "--out"),
    (["exercise", "--variants", "1", "--seed", "1"], "--out"),
    (["trace", "--token", "0"], "--out"),
    (["fill", "{dir}/notes.md"], "--out"),
    (["grade", "{dir}/a.csv", "--key", "{dir}"], "--out"),
]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The test's folder, also the current one (where ``''`` would write)."""
    (tmp_path / "notes.md").write_text(NOTES)
    (tmp_path / "a.csv").write_text("student,A\nvariant,v01\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("path", ["", " ", "\t"])
@pytest.mark.parametrize(("argv", "option"), COMMANDS, ids=lambda a: a[0]
                         if isinstance(a, list) else a)
def test_an_empty_output_path_is_refused(folder, capsys, argv, option, path):
    before = sorted(os.listdir(folder))
    argv = [a.format(dir=folder) for a in argv]
    assert main([*argv, option, path]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    blank = "empty" if path == "" else "blank"
    assert f"{option} {path!r}: the path is {blank}" in lines[0]
    assert sorted(os.listdir(folder)) == before  # nothing written anywhere
    assert out == ""


@pytest.mark.parametrize("argv", [["train", "--lr", "1/10", "--write"],
                                  ["trace", "--token", "0", "--out"]])
def test_a_file_option_ending_in_a_slash_is_refused(folder, capsys, argv):
    assert main([*argv, "trained/"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "trained/: ends in '/', so it names a folder" in err
    assert not (folder / "trained").exists()


def test_train_write_still_writes_a_given_file(folder, capsys):
    assert main(["train", "--lr", "1/10", "--steps", "1", "--write", "t.toml"]) == 0
    assert "wrote t.toml" in capsys.readouterr().out
    assert (folder / "t.toml").read_text().startswith("#")
