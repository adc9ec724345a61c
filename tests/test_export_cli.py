"""``symformer export`` end to end, and the committed exports/ kept fresh."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer.cli import main
from symformer.latex.escape import latex_text
from symformer.latex.refresh import EXPORTS, expected_files


def test_export_writes_fragments_and_main(tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert main(["export", "--out", str(out), "--stage", "layer1.head1.*",
                 "--token", "think", "--decimals", "3"]) == 0
    assert (out / "mine.txt").read_text() == "keep me"  # never cleared
    main_tex = (out / "main.tex").read_text()
    assert r"\input{fragments/layer1-head1-Q-table.tex}" in main_tex
    assert "embeddings" not in main_tex
    table = (out / "fragments" / "layer1-head1-Q-table.tex").read_text()
    assert "$1.595$ & $0.752$" in table  # 5/4+(sin 1+cos 1)/4, 1/2+(sin .01+cos .01)/4


def test_markdown_format(tmp_path):
    assert main(["export", "--out", str(tmp_path), "--format", "markdown",
                 "--stage", "input"]) == 0
    assert (tmp_path / "main.md").read_text().startswith("# I think I understand")


@pytest.mark.parametrize(("args", "message"), [
    (["--token", "7"], "token position 7 is out of range; the tokens are: 0 'I', 1 'think'"),
    (["--token", "dog"], "unknown token 'dog'; the tokens are:"),
    (["--stage", "layer9.*"], "no stage matches 'layer9.*'; the stages are: embeddings,"),
    (["--format", "markdown", "--pdf"], "--pdf needs --format latex"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    assert main(["export", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_pdf_without_pdflatex_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["export", "--out", str(tmp_path / "o"), "--pdf"]) == 2
    assert "pdflatex was not found on PATH" in capsys.readouterr().err


def test_committed_exports_are_fresh():
    """Regenerate in memory; refresh with `python -m symformer.latex.refresh`."""
    expected = expected_files()
    for name, text in expected.items():
        path = EXPORTS / name
        assert path.exists(), f"{name} is missing: run python -m symformer.latex.refresh"
        assert path.read_text(encoding="utf-8") == text, (
            f"exports/{name} is stale: run python -m symformer.latex.refresh")
    committed = {str(p.relative_to(EXPORTS)) for p in (EXPORTS / "fragments").glob("*.tex")}
    assert committed <= set(expected), "exports/fragments holds stale files"
    assert (EXPORTS / "main.pdf").read_bytes().startswith(b"%PDF")


@given(st.text(max_size=30))
def test_escaped_text_has_no_active_characters(text):
    escaped = latex_text(text)
    bare = escaped
    for command in (r"\&", r"\%", r"\$", r"\#", r"\_", r"\{", r"\}"):
        bare = bare.replace(command, "")
    for char in "&%$#_^~":
        assert char not in bare
    # every brace left belongs to a command we emitted: balanced
    assert bare.count("{") == bare.count("}")
