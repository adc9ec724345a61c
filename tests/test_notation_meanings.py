"""One meaning per symbol in every shipped example's notes (issue 39, item 5).

The notation table of each example's notes (with its loss, as
:mod:`test_notation_scans` builds them) is read from ``main.tex``:

* every symbol it lists appears once, with one meaning (no ``z``: "Encoder output /
  Decoder output");
* a size an equation uses (``d_{v}``, ``d_{k}``) is in the table.
"""

from __future__ import annotations

import re

import pytest
from test_notation_scans import NAMES, tex_files

ROW = re.compile(r"^(\$.*?\$) & (.*?) & (?:(\$.*?\$) & (.*?))? \\\\$", re.M)


def notation_table(tex: str) -> list[tuple[str, str]]:
    """(symbol, meaning) of every row of the notation table, in both columns."""
    body = tex.split(r"\label{tab:notation}", 1)[1].split(r"\end{longtable}", 1)[0]
    out = []
    for m in ROW.finditer(body):
        out.append((m.group(1), m.group(2)))
        if m.group(3):
            out.append((m.group(3), m.group(4)))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_each_symbol_once_with_one_meaning(name):
    table = notation_table(tex_files(name)["main.tex"])
    symbols = [s for s, _ in table]
    assert len(table) > 10 and len(symbols) == len(set(symbols))
    assert [(s, m) for s, m in table if " / " in m] == []


@pytest.mark.parametrize("name", NAMES)
def test_sizes_used_are_in_the_table(name):
    files = tex_files(name)
    symbols = {s for s, _ in notation_table(files["main.tex"])}
    used = "".join(files.values())
    for size in ("d_{v}", "d_{k}"):
        if size in used:
            assert f"${size}$" in symbols, size


def test_decoder_output_is_not_the_encoder_output():
    table = dict(notation_table(tex_files("encoder_decoder")["main.tex"]))
    assert table["$z$"] == "Encoder output"
    assert table[r"$\bar{z}$"].startswith("Decoder output")


def test_u_is_only_the_dot_products():
    """u is the dot products q·k; the token ids a table's gradient sums over are w."""
    files = tex_files("builtin")
    equation = files["fragments/grad-embedding_table-equation.tex"]
    assert r"t_{i} = w_{i'}" in equation and "u_{" not in equation  # i′, not r (the residual)
    table = dict(notation_table(files["main.tex"]))
    assert table["$u$"] == "Dot products with every key"


@pytest.mark.parametrize("module", ["symformer.notation", "symformer.equations.stage",
                                    "symformer.latex.properties"])
def test_imports_alone_in_a_fresh_interpreter(module):
    """The notation and the equations import each alone, with nothing loaded before
    (their sizes once made a cycle: notation -> equations.stage -> notation; the
    import-graph scan of every module is tests/test_imports.py::test_no_import_cycle)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (f"import {module}, sys; print(sorted(m for m in sys.modules "
            "if m == 'symformer.equations.stage'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, check=True)
    loaded = out.stdout.strip()
    if module == "symformer.notation":  # the notation reads no equation
        assert loaded == "[]", loaded
