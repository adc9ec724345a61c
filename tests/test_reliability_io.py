"""Reliability of what symformer writes (issue 14, parts 4 and 5).

Writes are all-or-nothing and ordinary: umask modes, no special files replaced, a
SIGKILL at any moment leaves the output folder wholly old or wholly new.  Text is
printed as typed or refused: control characters are refused at load time, LaTeX
ligatures are broken, long names compile, Markdown and HTML escape every name.
"""

from __future__ import annotations

import functools
import html.parser
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symformer import derive, parse_example
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import builtin_text
from symformer.files import write_file, write_files
from symformer.latex import Options, export_files
from symformer.latex.compile import compile_log
from symformer.latex.escape import LABEL_CHARS, latex_text, markdown_text
from symformer.trace import render, trace_token

ROOT = Path(__file__).resolve().parents[1]
needs_pdftools = pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("pdftotext") is None,
    reason="pdflatex or pdftotext is not installed")
#: The names of ../shared/repro/latex_ligatures.toml: each a TeX ligature.
LIGATURE_NAMES = ["a--b", "?`x!`", "``q''", ",,low"]


def example_text(tokens: list[str], vocab: list[str] | None = None,
                 title: str = "I think I understand") -> str:
    """The built-in example's TOML with other names (4 tokens, 6 vocabulary entries)."""
    vocab = vocab or [*dict.fromkeys(tokens)]
    vocab = vocab + [f"filler{k}" for k in range(6 - len(vocab))]
    literal = lambda items: "[" + ", ".join(_toml_string(t) for t in items) + "]"  # noqa: E731
    text = builtin_text()
    text = re.sub(r"^title = .*$", lambda _: f"title = {_toml_string(title)}", text, flags=re.M)
    text = re.sub(r"^tokens = .*$", lambda _: f"tokens = {literal(tokens)}", text, flags=re.M)
    return re.sub(r"^vocab = .*$", lambda _: f"vocab = {literal(vocab)}", text, flags=re.M)


def _toml_string(text: str) -> str:
    """A TOML basic string: every character outside printable ASCII as an escape."""
    body = "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\U{ord(c):08X}"
                   for c in text)
    return f'"{body}"'


def _pdftext(pdf: bytes, tmp_path: Path, *options: str) -> str:
    path = tmp_path / "out.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", *options, str(path), "-"], capture_output=True,
                          text=True, check=True).stdout


# --- text: control characters are refused at load time ------------------------------

CONTROL = st.sampled_from([*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)),
                           "\u2028", "\u2029", "\u202e", "\u2066"])


@settings(max_examples=40, deadline=None)
@given(char=CONTROL, where=st.sampled_from(["title", "token", "vocab"]),
       at=st.integers(0, 3))
def test_a_control_character_in_a_name_is_refused_naming_the_entry(char, where, at):
    name = "under" + char + "stand"
    tokens = ["I", "think", "I", "understand"]
    vocab = ["I", "think", "understand", "love", "dog", "cat"]
    title = "I think I understand"
    if where == "title":
        title = title[:at] + char + title[at:]
        expected = "title"
    elif where == "token":
        tokens[3], vocab[2] = name, name
        expected = "vocab entry 2"
    else:
        vocab[3 + at % 3] = name
        expected = f"vocab entry {3 + at % 3}"
    with pytest.raises(InputError) as err:
        parse_example(example_text(tokens, vocab, title), "x.toml")
    message = str(err.value)
    assert message.startswith(f"x.toml: {expected} ") and f"U+{ord(char):04X}" in message
    assert message.isprintable()  # the message shows the name escaped


def test_a_control_character_in_the_decoder_vocabulary_is_refused():
    text = (ROOT / "symformer/examples/encoder_decoder.toml").read_text(encoding="utf-8")
    text = text.replace('"<s>"', '"<s>\\u001b[2J"')
    with pytest.raises(InputError, match=r"decoder: vocab entry \d+ .*U\+001B"):
        parse_example(text, "ed.toml")


@pytest.mark.parametrize("tokens, title, entry", [
    # ../shared/repro/ansi_token.toml: an OSC title, clear screen and colour
    (["\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[31mRED", "think", "I", "understand"], "T", "vocab"),
    (["I", "think", "I", "understand"], "T\x1b[5mBLINK", "title"),
    # ../shared/repro/md_newline_token.toml: a newline splits the Markdown table row
    (["I", "think", "I", "a\nb"], "I think I understand", "vocab entry 2"),
])
def test_terminal_escapes_and_newlines_exit_2_with_a_printable_line(tmp_path, capsys, tokens,
                                                                     title, entry):
    path = tmp_path / "bad.toml"
    path.write_text(example_text(tokens, title=title), encoding="utf-8")
    for command in (["derive"], ["trace", "--token", "1"], ["export", "--out",
                                                           str(tmp_path / "out")]):
        assert main([command[0], str(path), *command[1:]]) == 2
        err = capsys.readouterr()
        assert err.out == "" and entry in err.err and "\x1b" not in err.err
        assert err.err.count("\n") == 1 and err.err.rstrip("\n").isprintable()
    assert not (tmp_path / "out").exists()


# --- text: LaTeX prints names as typed ---------------------------------------------

@given(st.text(alphabet="-,?!`'<>\"x ", max_size=20))
def test_latex_text_leaves_no_ligature_pair(text):
    """T1 fonts join these pairs into one glyph (a dash, curly quotes, ¡, ¿, „, «)."""
    escaped = latex_text(text)
    for pair in ("--", ",,", "?`", "!`", "``", "''", "<<", ">>"):
        assert pair not in escaped, (text, escaped)


@needs_pdftools
def test_ligature_names_print_literally_in_the_pdf(tmp_path):
    """../shared/repro/latex_ligatures.toml: a--b printed a–b, ?` printed ¿, `` '' curly."""
    g = derive(parse_example(example_text(LIGATURE_NAMES, title="lig --- ''t''")))
    files = export_files(g, Options(stages=("input", "layer1.head1.weights"), token=1))
    pdf, _ = compile_log(files)
    text = _pdftext(pdf, tmp_path)
    sentence = re.search(r"The sentence:\s+(.*?)\.\n", text, flags=re.S)[1]
    assert sentence.split() == LIGATURE_NAMES
    assert "lig --- ''t''" in text
    lines = text.splitlines()
    for name in LIGATURE_NAMES:
        assert name in lines, name  # a table's row label
    text = text.replace("\u201c?`x!`\u201d", "")  # the prose quotes the worked token
    for wrong in ("\u2013", "\u2014", "\u00bf", "\u00a1", "\u201c", "\u201d", "\u201e"):
        assert wrong not in text  # no dash, no inverted marks, no curly or low quotes


@needs_pdftools
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.text(alphabet=[chr(c) for c in range(0x21, 0x7F)], min_size=1,
                              max_size=12), min_size=4, max_size=4, unique=True))
def test_printable_ascii_names_print_literally(tmp_path, names):
    g = derive(parse_example(example_text(names)))
    pdf, _ = compile_log(export_files(g, Options(stages=("input",), token=1)))
    # -layout keeps each table row on one line (plain pdftotext may join a one-character
    # label such as "-" to its neighbours)
    rows = [line.split() for line in _pdftext(pdf, tmp_path, "-layout").splitlines()]
    for position, name in enumerate(names):
        # a table's row label: no line break, no hyphenation
        assert any(row[:2] == [str(position), name] for row in rows), name


@needs_pdftools
@pytest.mark.parametrize("length", [1000, 2000])
def test_long_names_compile_shortened_in_tables_and_whole_in_the_text(tmp_path, length):
    """../shared/repro/latex_long_token_1000.toml: 'Dimension too large'; 2000: 'Division by 0'."""
    long = "x" * length
    decoder_free = example_text([long, "think", long, "understand"],
                                title="a--b " + "t" * length + " end")
    g = derive(parse_example(decoder_free))
    files = export_files(g, Options(token=1))
    # The opening figure floats to the top of the page the sentence runs onto, so the
    # PDF's text would read its labels in the middle of the sentence: left out here.
    files["main.tex"] = re.sub(r"\\begin\{figure\}.*?\\end\{figure\}", "",
                               files["main.tex"], flags=re.S)
    pdf, log = compile_log(files)
    text = _pdftext(pdf, tmp_path)
    joined = re.sub(r"\s+", "", re.sub(r"\n\d+\s*\f", "", text))  # no page numbers
    assert "x" * length + "think" + "x" * length + "understand" in joined  # the sentence
    assert "a--b" + "t" * length + "end" in joined  # the title, broken over lines
    short = "x" * (LABEL_CHARS // 2) + ". . . " + "x" * (LABEL_CHARS // 3)
    assert short in text.splitlines()  # a table's row label
    assert "Overfull \\hbox" not in log


def test_long_vocabulary_entries_outside_the_sentence_are_given_in_full():
    long = "y" * 40
    vocab = ["I", "think", "understand", long, "dog", "cat"]
    g = derive(parse_example(example_text(["I", "think", "I", "understand"], vocab)))
    main_tex = export_files(g, Options(token=1))["main.tex"]
    assert f"in full: ``{long}''." in main_tex.replace(r"\allowbreak{}", "")


# --- text: Markdown and HTML escape every name --------------------------------------

MARKDOWN_HOSTILE = ["a|b", "`code`", "*em*", "<b>_x_</b>", "&amp;", "x\\|"]


def _unescape_markdown(text: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)


def _cells(row: str) -> list[str]:
    """A GFM table row's cells: split on pipes that no backslash escapes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_markdown_tables_keep_their_shape_and_names(tmp_path):
    g = derive(parse_example(example_text(MARKDOWN_HOSTILE[:4], MARKDOWN_HOSTILE)))
    md = export_files(g, Options(stages=("input",), token=1), "markdown")["main.md"]
    body = md[md.index("## "):]  # after the notation table (two columns: symbol, meaning)
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    widths = {len(_cells(r)) for r in rows}
    assert widths == {6}, rows  # pos, token, d1..d4: no name split a row
    labels = [_cells(r)[1] for r in rows if r[2].isdigit()]
    labels = [_unescape_markdown(re.sub(r"^\*\*(.*)\*\*$", r"\1", c)) for c in labels]
    assert labels == MARKDOWN_HOSTILE[:4]


@given(st.text(alphabet="|`*_<>&\\[]#$~ab", max_size=12))
def test_markdown_text_escapes_every_active_character(text):
    escaped = markdown_text(text)
    assert _unescape_markdown(escaped) == text
    active = r"([|`*_<>\[\]#$~]|&[#\w])"  # & only where it would start an entity
    assert re.search(rf"(?<!\\)(\\\\)*{active}", escaped) is None


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_trace_escapes_names(tmp_path):
    names = ['<img src=x onerror="alert(1)">', "a&amp;b", "</script>", "think"]
    g = derive(parse_example(example_text(names)))
    page = render(trace_token(g, "3", 3), "html")
    parser = _Tags()
    parser.feed(page)
    assert "img" not in parser.tags and parser.tags.count("script") == 1
    text = "".join(parser.text)
    for name in names:
        assert name in text


# --- files: ordinary modes -----------------------------------------------------------

@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _modes(folder: Path) -> set[tuple[str, int]]:
    return {("dir" if p.is_dir() else "file", stat.S_IMODE(p.stat().st_mode))
            for p in [folder, *folder.rglob("*")]}


def test_files_of_every_command_get_the_umask_mode(tmp_path, umask, capsys):
    assert main(["export", "--out", str(tmp_path / "tex"), "--stage", "input"]) == 0
    assert main(["export", "--out", str(tmp_path / "md"), "--format", "markdown",
                 "--stage", "input"]) == 0  # one main.md, as with every stage
    for fmt in ("text", "html", "latex", "markdown", "json"):
        assert main(["trace", "--token", "1", "--format", fmt,
                     "--out", str(tmp_path / "trace" / f"t.{fmt}")]) == 0
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    for folder in ("tex", "md"):
        assert _modes(tmp_path / folder) == {("dir", dir_mode), ("file", file_mode)}
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "trace").iterdir()} == {
        file_mode}
    assert not [p for p in tmp_path.rglob("*") if "symformer-tmp" in p.name]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_pdf_gets_the_umask_mode(tmp_path, capsys):
    old = os.umask(0o027)
    try:
        assert main(["export", "--out", str(tmp_path / "o"), "--stage", "input", "--pdf"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "o" / "main.pdf").stat().st_mode) == 0o640


def test_replacing_a_file_gives_the_umask_mode_not_the_old_one(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("old")
    path.chmod(0o600)  # as symformer wrote it before
    old = os.umask(0o022)
    try:
        write_file(path, "new")
    finally:
        os.umask(old)
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o644


# --- files: --out is a folder or a regular file, never a special file ---------------

def _special_nodes(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, links to it and to /dev/null (a character device), a dangling link."""
    nodes = {"fifo": tmp_path / "myfifo", "link to fifo": tmp_path / "linkfifo",
             "link to device": tmp_path / "mynull", "dangling link": tmp_path / "dangling"}
    os.mkfifo(nodes["fifo"])
    nodes["link to fifo"].symlink_to("myfifo")
    nodes["link to device"].symlink_to(os.devnull)
    nodes["dangling link"].symlink_to("nowhere")
    return nodes


@pytest.mark.parametrize("command", [["trace", "--token", "1", "--out"], ["export", "--out"]])
def test_special_files_are_refused_naming_the_path(tmp_path, capsys, command):
    """../shared/repro/fs_chardev_replaced.sh: the node was replaced by a regular file."""
    nodes = _special_nodes(tmp_path)
    before = {name: os.lstat(path) for name, path in nodes.items()}
    for name, path in nodes.items():
        assert main([*command, str(path)]) == 2, name
        err = capsys.readouterr().err
        assert f"error: {path}: is " in err and err.count("\n") == 1, err
    for name, path in nodes.items():
        after = os.lstat(path)
        assert (after.st_ino, after.st_mode) == (before[name].st_ino, before[name].st_mode)
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in nodes.values())


def test_out_of_the_wrong_kind_is_refused(tmp_path, capsys):
    (tmp_path / "file.tex").write_text("mine")
    assert main(["export", "--out", str(tmp_path / "file.tex")]) == 2
    assert "file.tex: is a regular file" in capsys.readouterr().err
    assert main(["trace", "--token", "1", "--out", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory" in capsys.readouterr().err
    assert (tmp_path / "file.tex").read_text() == "mine"


def test_trace_out_errors_name_the_path_given(tmp_path, capsys):
    (tmp_path / "plain").write_text("a file, not a folder")
    given = str(tmp_path / "plain" / "sub" / "t.html")
    assert main(["trace", "--token", "1", "--format", "html", "--out", given]) == 2
    err = capsys.readouterr().err
    assert f"error: {given}: " in err and err.count("\n") == 1


def test_links_to_a_folder_and_to_a_file_are_followed(tmp_path, capsys):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "t.txt").write_text("old")
    (tmp_path / "t-link").symlink_to("t.txt")
    assert main(["export", "--out", str(tmp_path / "link"), "--stage", "input"]) == 0
    assert main(["trace", "--token", "1", "--out", str(tmp_path / "t-link")]) == 0
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "main.tex").exists()
    assert (tmp_path / "t-link").is_symlink() and "think" in (tmp_path / "t.txt").read_text()


# --- files: a multi-file export is swapped in whole ----------------------------------

def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder's mark."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = (f"-> {os.readlink(path)}" if path.is_symlink() else "<dir>"
                    if path.is_dir() else path.read_bytes())
    return out


@functools.cache
def _export(decimals: int) -> dict[str, str]:
    """The built-in example's export (main.tex and fragments), rendered once per file."""
    return export_files(derive(parse_example(builtin_text())), Options(decimals=decimals))


def _old_folder(path: Path, user_files: int = 200) -> None:
    """An export with 2 decimals, plus the user's own files, a folder and a link."""
    write_files(path, _export(2))
    (path / "mine").mkdir()
    for k in range(user_files):
        (path / "mine" / f"note{k}.txt").write_text(f"note {k}")
    (path / "fragments" / "my-extra.tex").write_text("% mine")
    (path / "README").symlink_to("mine/note0.txt")


def test_user_files_are_kept_and_new_files_replace_old_ones(tmp_path, capsys):
    out = tmp_path / "k"
    _old_folder(out, user_files=3)
    (out / "mine").chmod(0o700)
    old = _snapshot(out)
    assert main(["export", "--out", str(out), "--decimals", "5"]) == 0
    new = _snapshot(out)
    kept = lambda snap: {k: v for k, v in snap.items()  # noqa: E731
                         if k.startswith("mine") or k in ("README", "fragments/my-extra.tex")}
    assert kept(new) == kept(old) and len(kept(old)) == 6
    assert new["main.tex"] != old["main.tex"]
    assert re.search(rb"\d\.\d{5}\b", new["fragments/input-table.tex"])
    assert stat.S_IMODE((out / "mine").stat().st_mode) == 0o700
    assert sorted(os.listdir(tmp_path)) == ["k"]  # nothing left beside it


def test_the_current_folder_is_written_in_place(tmp_path, monkeypatch, capsys):
    out = tmp_path / "here"
    _old_folder(out, user_files=2)
    monkeypatch.chdir(out)
    inode = out.stat().st_ino
    assert main(["export", "--out", ".", "--decimals", "4"]) == 0
    assert out.stat().st_ino == inode  # not swapped: the shell stays in a live folder
    assert (out / "mine" / "note1.txt").read_text() == "note 1"
    assert not [p for p in out.rglob("*") if "symformer-tmp" in p.name]


def _expected_new(tmp_path: Path, old: Path, decimals: str | None = None
                  ) -> dict[str, bytes | str]:
    """``old`` after an unkilled write: of ``export --decimals DECIMALS``, or (None) of
    write_files with the 5-decimal export, as the killed writer of ``_killed`` does."""
    copy = tmp_path / "expected"
    shutil.copytree(old, copy, symlinks=True)
    if decimals is None:
        write_files(copy, _export(5))
    else:
        assert main(["export", "--out", str(copy), "--decimals", decimals]) == 0
    snapshot = _snapshot(copy)
    shutil.rmtree(copy)
    return snapshot


def _check_whole(out: Path, old: dict, new: dict) -> str:
    """The folder is wholly old or wholly new, with no temporary file inside."""
    now = _snapshot(out)
    assert not [k for k in now if "symformer-tmp" in k or k.endswith(".tmp")]
    assert now in (old, new), "the folder mixes old and new files"
    return "old" if now == old else "new"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch) -> Path:
    """A cache folder of the test's own (new output folders are built there)."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "symformer" / "staging"


#: Kills the export at one moment: a wrapped internal function SIGKILLs the process.
KILLER = textwrap.dedent("""\
    import json, os, shutil, signal, sys, types
    package = types.ModuleType("symformer")  # symformer.files alone: no SymPy to import
    package.__path__ = [os.path.join(os.environ["PYTHONPATH"], "symformer")]
    sys.modules["symformer"] = package
    import symformer.files as f
    point, out, files = sys.argv[1], sys.argv[2], sys.argv[3]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    def after(name, calls=1):
        original, count = getattr(f, name), [0]
        def wrapped(*args, **kwargs):
            result = original(*args, **kwargs)
            count[0] += 1
            if count[0] == calls:
                die()
            return result
        setattr(f, name, wrapped)
    if point == "writing":
        after("_create", calls=40)
    elif point == "carrying":
        after("_link_or_copy", calls=50)
    elif point == "carried":
        after("_carry_over")
    elif point == "swapped":
        after("_swap")
    elif point == "removing":
        original = f._remove
        def partly(path):
            if "symformer-tmp" in str(path) and os.path.isdir(path):
                shutil.rmtree(os.path.join(path, "mine"))
                die()
            original(path)
        f._remove = partly
    elif point.startswith("fallback"):
        f._exchange = lambda a, b: False
        renames = [0]
        real = os.rename
        def rename(src, dst):
            real(src, dst)
            renames[0] += 1
            if renames[0] == int(point[-1]):
                die()
        f.os.rename = rename
    with open(files, encoding="utf-8") as handle:
        f.write_files(out, json.load(handle))
    """)


def _killed(tmp_path: Path, point: str, out: Path) -> None:
    """Write the 5-decimal export into ``out`` in a process killed at ``point``."""
    script, files = tmp_path / "killer.py", tmp_path / "files.json"
    script.write_text(KILLER)
    files.write_text(json.dumps(_export(5)), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script), point, str(out), str(files)],
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == -signal.SIGKILL, run.stderr
    script.unlink()
    files.unlink()


@pytest.mark.parametrize("point", ["writing", "carrying", "carried", "swapped", "removing"])
def test_a_kill_at_any_step_leaves_the_folder_whole(tmp_path, point, capsys, _cache):
    out = tmp_path / "k"
    _old_folder(out)
    old = _snapshot(out)
    new = _expected_new(tmp_path, out)
    _killed(tmp_path, point, out)
    state = _check_whole(out, old, new)
    assert state == ("new" if point in ("swapped", "removing") else "old")
    assert sorted(os.listdir(tmp_path)) == ["k"]  # nothing beside the folder
    assert [p for p in os.listdir(_cache) if "symformer-tmp" in p]  # killed: left in the cache
    # The next write recognises the dead process's folder and removes it.
    write_files(out, {})
    assert _snapshot(out) == (new if state == "new" else old)
    assert sorted(os.listdir(tmp_path)) == ["k"] and not os.listdir(_cache)


@pytest.mark.parametrize("renames", [1, 2])
def test_a_kill_between_the_renames_of_the_fallback_swap_is_undone(tmp_path, renames, capsys):
    """Without renameat2 the swap is two renames; the next write finishes or undoes it."""
    out = tmp_path / "k"
    _old_folder(out, user_files=5)
    old = _snapshot(out)
    new = _expected_new(tmp_path, out)
    _killed(tmp_path, f"fallback{renames}", out)
    write_files(out, {})
    assert _snapshot(out) == (old if renames == 1 else new)
    assert sorted(os.listdir(tmp_path)) == ["k"]


def _count(folder: Path) -> int:
    try:
        return len(os.listdir(folder))
    except OSError:
        return 0


def test_a_kill_while_a_real_export_writes_leaves_the_folder_whole(tmp_path, capsys, _cache):
    """``python -m symformer export`` killed by its process id while it writes its new
    folder, then while it carries the user's files over."""
    out = tmp_path / "k"
    _old_folder(out, user_files=500)
    old = _snapshot(out)
    new = _expected_new(tmp_path, out, "5")
    for sub, entries in (("fragments", 40), ("mine", 100)):
        proc = subprocess.Popen([sys.executable, "-m", "symformer", "export", "--out",
                                 str(out), "--decimals", "5"], env=_env(), cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        watched = _cache / f".k.symformer-tmp-{proc.pid}" / sub
        deadline = time.monotonic() + 120
        while _count(watched) < entries and proc.poll() is None:
            assert time.monotonic() < deadline, "the export never started writing"
            time.sleep(0.0005)  # leave the cores to the export (and to other tests)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        _check_whole(out, old, new)
        assert sorted(os.listdir(tmp_path)) == ["k"]  # nothing beside the folder
        write_files(out, {})  # the next write cleans up what the kill left in the cache
        assert not os.listdir(_cache)
