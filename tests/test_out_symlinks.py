"""Nothing is written outside --out (issue 20, item 7; ../shared/repro/attack3/run.sh).

A symbolic link below --out that a written path goes through, or ends on, is refused
before anything is written (exit 2, one line naming it), whether --out is the current
folder (written in place) or another folder (swapped in whole); the link's target is
left as it was.  A link planted during the run (after the check) makes the write fail
rather than follow it.  The user's own links that no written path uses stay.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from test_backward import ONE_TOKEN  # a one-token example with an mse [loss]

from symformer import files
from symformer.cli import main
from symformer.errors import InputError


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch) -> None:
    """A staging folder of the test's own (new output folders are built there)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _victim(tmp_path: Path) -> Path:
    """A folder outside --out with a file of every name the commands write."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("precious.txt", "example.toml", "a.md", "input-table.tex"):
        (victim / name).write_text("precious")
    return victim


def _untouched(victim: Path) -> None:
    assert sorted(os.listdir(victim)) == ["a.md", "example.toml", "input-table.tex",
                                          "precious.txt"]
    assert all((victim / n).read_text() == "precious" for n in os.listdir(victim))


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> tuple[Path, Path]:
    """An exercise key folder and one student's (empty) answer file, for ``grade``."""
    folder = tmp_path_factory.mktemp("key")
    assert main(["exercise", "--variants", "1", "--seed", "1", "--out",
                 str(folder / "key"), "--quiet"]) == 0
    answers = folder / "ann.csv"
    answers.write_text("student,ann\nvariant,v01\nstage,row,col,value\n")
    return folder / "key", answers


#: command (without --out), a folder it writes into, a file it writes at the top.
COMMANDS = {
    "export latex": (["export", "--stage", "input"], "fragments", "main.tex"),
    "export markdown": (["export", "--stage", "input", "--format", "markdown"], None,
                        "main.md"),
    "export json": (["export", "--stage", "input", "--format", "json"], None,
                    "worked.json"),
    "figures": (["figures", "--format", "tikz"], None, "main.tex"),
    "slides": (["slides"], None, "slides.tex"),
    "exercise": (["exercise", "--variants", "1", "--seed", "1", "--quiet"], "v01",
                 "manifest.toml"),
    "grade": (["grade", "ANSWERS", "--key", "KEY", "--quiet"], "feedback", "summary.csv"),
}


def _argv(name: str, key: tuple[Path, Path] | None) -> list[str]:
    argv = COMMANDS[name][0]
    if name == "grade":
        argv = [{"ANSWERS": str(key[1]), "KEY": str(key[0])}.get(a, a) for a in argv]
    return argv


def _refused(err: str, link: str) -> None:
    assert f"{link} is a symbolic link" in err and "nothing is written through" in err, err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("name", [n for n, c in COMMANDS.items() if c[1]])
def test_a_linked_folder_below_the_current_folder_is_refused(name, tmp_path, monkeypatch,
                                                             capsys, request):
    """``--out .``: the files would be renamed into place one by one (the reproducer's
    ``exercise --out .`` with ``v01 -> victim``, ``export --out .`` with ``fragments``)."""
    key = request.getfixturevalue("key") if name == "grade" else None
    victim, out = _victim(tmp_path), tmp_path / "out"
    out.mkdir()
    link = COMMANDS[name][1]
    (out / link).symlink_to(victim)
    monkeypatch.chdir(out)
    assert main([*_argv(name, key), "--out", "."]) == 2
    _refused(capsys.readouterr().err, link)
    _untouched(victim)
    assert os.listdir(out) == [link] and (out / link).is_symlink()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_linked_file_in_another_folder_is_refused(name, tmp_path, capsys, request):
    """``--out DIR``: the folder would be built anew and swapped in; the link to a
    file is refused there too, not replaced."""
    key = request.getfixturevalue("key") if name == "grade" else None
    victim, out = _victim(tmp_path), tmp_path / "out"
    out.mkdir()
    link = COMMANDS[name][2]
    (out / link).symlink_to(victim / "precious.txt")
    assert main([*_argv(name, key), "--out", str(out)]) == 2
    _refused(capsys.readouterr().err, link)
    _untouched(victim)
    assert os.listdir(out) == [link] and (out / link).is_symlink()


@pytest.mark.parametrize("argv", [
    ["trace", "--token", "1", "attention_only"],
    ["fill", "NOTES", "--example", "attention_only"],
    ["train", "EXAMPLE", "--lr", "8/7", "--write"],
])
def test_a_link_at_a_single_files_temporary_name_is_not_followed(argv, tmp_path,
                                                                  monkeypatch, capsys):
    """trace --out, fill --out and train --write write one file: its temporary file
    beside it is created anew (a link of that name, planted in advance, is removed, not
    written through), and the file itself lands at the path given."""
    victim = _victim(tmp_path)
    notes, example = tmp_path / "notes.md", tmp_path / "one.toml"
    notes.write_text("w = {{ input[0,0] }}\n")
    example.write_text(ONE_TOKEN)
    argv = [{"NOTES": str(notes), "EXAMPLE": str(example)}.get(a, a) for a in argv]
    out = tmp_path / "result.txt"
    planted = tmp_path / f".result.txt{files.TMP_TAG}{os.getpid()}"
    planted.symlink_to(victim / "precious.txt")
    option = [] if argv[-1] == "--write" else ["--out"]
    assert main([*argv, *option, str(out)]) == 0, capsys.readouterr().err
    _untouched(victim)
    assert out.is_file() and not out.is_symlink() and out.stat().st_size > 0
    assert not os.path.lexists(planted)


# -- files.write_files itself ---------------------------------------------------------

@pytest.mark.parametrize("in_place", [True, False])
def test_a_link_planted_after_the_check_is_not_followed(in_place, tmp_path, monkeypatch):
    """A race: the link appears after :func:`files.check_below`; the folders on the way
    are opened with O_NOFOLLOW, so the write fails instead of landing in the victim."""
    victim, out = _victim(tmp_path), tmp_path / "out"
    out.mkdir()
    if in_place:
        monkeypatch.chdir(out)

    def plant(target, written, given):
        (target / "sub").symlink_to(victim)

    monkeypatch.setattr(files, "check_below", plant)
    with pytest.raises(InputError, match="sub is a symbolic link"):
        files.write_files("." if in_place else out, {"sub/a.md": "new", "b.md": "new"})
    _untouched(victim)


@pytest.mark.parametrize("in_place", [True, False])
def test_links_not_written_through_stay(in_place, tmp_path, monkeypatch):
    victim, out = _victim(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "mine").symlink_to(victim)
    (out / "note").symlink_to(victim / "precious.txt")
    if in_place:
        monkeypatch.chdir(out)
    files.write_files("." if in_place else out, {"sub/a.md": "new", "b.md": "new"})
    _untouched(victim)
    assert (out / "mine").is_symlink() and (out / "note").is_symlink()
    assert (out / "sub" / "a.md").read_text() == "new" == (out / "b.md").read_text()


@pytest.mark.parametrize("in_place", [True, False])
def test_a_deeper_link_and_a_dangling_link_are_refused(in_place, tmp_path, monkeypatch):
    victim, out = _victim(tmp_path), tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "deep").symlink_to(victim)
    (out / "gone").symlink_to(tmp_path / "nowhere")
    given = "." if in_place else str(out)
    if in_place:
        monkeypatch.chdir(out)
    with pytest.raises(InputError, match="sub/deep is a symbolic link"):
        files.write_files(given, {"sub/deep/a.md": "new"})
    with pytest.raises(InputError, match="gone is a symbolic link"):
        files.write_files(given, {"gone/a.md": "new"})
    with pytest.raises(InputError, match="gone is a symbolic link"):
        files.write_files(given, {"gone": "new"})
    _untouched(victim)
    assert not (tmp_path / "nowhere").exists()
    assert sorted(os.listdir(out)) == ["gone", "sub"] and os.listdir(out / "sub") == ["deep"]


# -- one place writes ----------------------------------------------------------------

#: Calls that create or replace files or folders.
_WRITING = {"write_text", "write_bytes", "mkdir", "makedirs", "symlink_to", "touch",
            "rename", "replace", "link", "copy", "copy2", "copyfile", "copytree", "move"}
#: Modules allowed to write: the one place, and a scratch folder of pdflatex's own.
_WRITERS = {"symformer/files.py", "symformer/tex.py"}


def _writes(path: Path) -> list[str]:
    """The writing calls of one module (``str.replace`` and reading ``open`` aside)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _WRITING:
            owner = func.value
            if func.attr == "replace" and not (isinstance(owner, ast.Name)
                                               and owner.id == "os"):
                continue  # str.replace, dataclasses.replace
            found.append(f"{path}:{node.lineno}: {func.attr}")
        if isinstance(func, ast.Name) and func.id == "open" or (
                isinstance(func, ast.Attribute) and func.attr == "open"
                and isinstance(func.value, ast.Name) and func.value.id in ("os", "io")):
            modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)] + [
                k.value.value for k in node.keywords
                if k.arg == "mode" and isinstance(k.value, ast.Constant)]
            low_level = isinstance(func, ast.Attribute) and func.value.id == "os"
            flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if any(set(str(m)) & set("wax+") for m in modes) or (
                    low_level and "O_RDONLY" not in flags):  # os.open: read-only or not
                found.append(f"{path}:{node.lineno}: open for writing")
    return found


def test_every_command_writes_through_symformer_files():
    """No module but symformer/files.py creates output (so the rules above hold for every
    command, present and future)."""
    root = Path(__file__).resolve().parents[1]
    found = [w for path in sorted((root / "symformer").rglob("*.py"))
             if str(path.relative_to(root)) not in _WRITERS for w in _writes(path)]
    assert not found, found
    seen = " ".join(_writes(root / "symformer/files.py"))  # the detector sees the writes
    assert all(w in seen for w in ("mkdir", "replace", "rename", "open for writing")), seen


def test_a_link_posing_as_an_interrupted_swap_is_not_put_back(tmp_path):
    """``.NAME.symformer-old-PID`` of a dead writer goes back to NAME only when it is a
    folder: a link of that name is removed, not made the output folder."""
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    old = tmp_path / f".out{files.OLD_TAG}999999999"
    old.symlink_to(victim)
    files.write_files(out, {"a.md": "new"})
    _untouched(victim)
    assert not out.is_symlink() and sorted(os.listdir(out)) == ["a.md"]
    assert not os.path.lexists(old)
