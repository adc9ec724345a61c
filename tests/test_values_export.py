"""``export --format values``: LaTeX macros, the values file, the MyST/Sphinx role, the
mystmd plugin and the Quarto shortcode (docs/values.md).  The macros are compiled by
pdflatex, the role by Sphinx and mystmd where they are installed; a changed example
rewrites exactly the values that changed."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from symformer.authoring import values_files
from symformer.authoring.names import entry_words, macro_names, words
from symformer.blocks import derive
from symformer.cli import main
from symformer.errors import InputError
from symformer.example.loader import builtin_text, parse_example
from symformer.latex.document import NotesOptions as Options

#: The built-in example with its output projection's first entry changed (1/2 -> 1/4):
#: everything before layer1.attention.output stays as it was.
CHANGED = builtin_text().replace('["1/2", 0, "1/2", 0],', '["1/4", 0, "1/2", 0],', 1)


def files_of(text: str, decimals: int = 3) -> dict[str, str]:
    return values_files(derive(parse_example(text, "ex.toml")), Options(decimals=decimals))


@pytest.fixture(scope="module")
def before() -> dict[str, str]:
    return files_of(builtin_text())


@pytest.fixture(scope="module")
def after() -> dict[str, str]:
    assert CHANGED != builtin_text()
    return files_of(CHANGED)


def macros(tex: str) -> dict[str, str]:
    return dict(re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$", tex, re.M))


def test_the_naming_rule():
    assert words("layer1.add_norm1") == "LayerOneAddNormOne"
    assert entry_words("layer1.head1.weights", 1, 3, False) == "LayerOneHeadOneWeightsOneThree"
    assert entry_words("logits", 12, 3, True) == "LogitsRowOneTwoColThree"
    assert entry_words("layer1.head1.weights", 1, None, False) == \
        "LayerOneHeadOneWeightsRowOneAll"
    with pytest.raises(InputError, match="raw.scores.*raw_scores|raw_scores.*raw.scores"):
        macro_names({"raw_scores[0,0]": words("raw_scores") + "ZeroZero",
                     "raw.scores[0,0]": words("raw.scores") + "ZeroZero"}, "sym")


def test_macros_and_values_file(before):
    m = macros(before["symformer-values.tex"])
    data = json.loads(before["symformer-values.json"])
    assert m["symLayerOneHeadOneWeightsOneThree"] == "0.163"  # the example
    assert data["values"]["layer1.head1.weights[1,3]"] == "0.163"
    assert len(m) == len(data["values"]) + len(data["worked"])  # every name distinct
    assert all(re.fullmatch("[A-Za-z]+", name) for name in m)
    # an independent reference: the input row is embedding + sinusoidal encoding
    # (the built-in's "think" is [4, 1, 0, 1]... read from the values' own embeddings)
    emb = float(data["values"]["embeddings[1,0]"])
    x = emb + math.sin(1)
    assert data["values"]["input[1,0]"] == f"{x:.3f}"
    assert m["symInputOneZero"] == f"{x:.3f}"
    negative = next(v for v in data["values"].values() if v.startswith("-"))
    assert f"{{\\ensuremath{{{negative}}}}}" in before["symformer-values.tex"]
    worked = data["worked"]["layer1.head1.Q[1,0]"]
    assert worked.endswith("1.595") and m["symWorkedLayerOneHeadOneQOneZero"] == \
        f"\\ensuremath{{{worked}}}"


def test_a_changed_example_rewrites_exactly_the_changed_values(before, after):
    old, new = (json.loads(f["symformer-values.json"])["values"] for f in (before, after))
    assert list(old) == list(new)  # the same addresses in the same order
    changed = {a for a in old if old[a] != new[a]}
    order = list(dict.fromkeys(a.split("[")[0] for a in old))
    first = order.index("layer1.attention.output")
    upstream = {a for a in old if order.index(a.split("[")[0]) < first}
    assert changed and not changed & upstream  # nothing before W_O moved
    assert any(a.startswith("layer1.attention.output[") for a in changed)
    # the files differ in exactly the lines of the changed values and worked lines
    was, now = (json.loads(f["symformer-values.json"])["worked"] for f in (before, after))
    assert list(was) == list(now)
    lines = len(changed) + sum(was[a] != now[a] for a in was)
    for name in ("symformer-values.tex", "symformer-values.json"):
        a, b = before[name].splitlines(), after[name].splitlines()
        assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == lines
    changed_macros = {k for k, v in macros(after["symformer-values.tex"]).items()
                      if macros(before["symformer-values.tex"])[k] != v
                      and not k.startswith("symWorked")}
    names = json.loads(after["symformer-values.json"])["macros"]
    assert changed_macros == {names[a] for a in changed}


def test_the_cli_writes_the_files(tmp_path, capsys):
    assert main(["export", "attention_only", "--out", str(tmp_path), "--format", "values",
                 "--quiet"]) == 0
    names = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    assert names == {"symformer-values.tex", "symformer-values.json", "symformer.mjs",
                     "symformer_values_sphinx.py", "_extensions/symformer/_extension.yml",
                     "_extensions/symformer/symformer.lua"}
    text = (tmp_path / "symformer_values_sphinx.py").read_text()
    assert "import symformer" not in text and "from symformer" not in text
    assert "eval(" not in (tmp_path / "symformer.mjs").read_text()


def test_stage_globs_choose_the_values(tmp_path, capsys):
    assert main(["export", "attention_only", "--out", str(tmp_path), "--format", "values",
                 "--stage", "layer1.head1.weights", "--quiet"]) == 0
    data = json.loads((tmp_path / "symformer-values.json").read_text())
    assert data["values"] and all(a.startswith("layer1.head1.weights[") for a in data["values"])
    assert main(["export", "attention_only", "--out", str(tmp_path), "--format", "values",
                 "--stage", "nonsense.*"]) == 2
    assert "nonsense" in capsys.readouterr().err


def test_overleaf_style_document_compiles(tmp_path, before):
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    (tmp_path / "symformer-values.tex").write_text(before["symformer-values.tex"])
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\n\\usepackage{amsmath}\n\\input{symformer-values.tex}\n"
        "\\begin{document}\nThe weight is \\symLayerOneHeadOneWeightsOneThree; "
        "\\symWorkedLayerOneHeadOneQOneZero.\n"
        "\\typeout{VALUE=\\symLayerOneHeadOneWeightsOneThree}\n\\end{document}\n")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                          "main.tex"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "VALUE=0.163" in (tmp_path / "main.log").read_text()
    assert (tmp_path / "main.pdf").stat().st_size > 1000


#: mystmd without its update check (a network call each run)
MYST_ENV = {**__import__("os").environ, "NO_UPDATE_NOTIFIER": "1", "CI": "true"}


def _book(folder: Path, files: dict[str, str], page: str, config: dict[str, str]) -> None:
    folder.mkdir(exist_ok=True)
    for name, text in {**files, **config, "page.md": page}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


PAGE = ("# Values\n\nThe weight is {symformer}`layer1.head1.weights[1, 3]`, the attention "
        "output {symformer}`layer1.attention.output[0,0]`.\n")


def test_mystmd_book_builds_with_live_values(tmp_path, before, after):
    if shutil.which("myst") is None:
        pytest.skip("mystmd is not installed (pip install mystmd; .ci/run installs it)")
    config = {"myst.yml": "version: 1\nproject:\n  title: Values\n  plugins:\n"
                          "    - symformer.mjs\n  exports:\n    - format: md\n"
                          "      output: out.md\n      articles: [page.md]\n"}
    outputs = []
    for files in (before, after):
        _book(tmp_path, files, PAGE, config)
        run = subprocess.run(["myst", "build", "--md"], cwd=tmp_path, env=MYST_ENV,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        outputs.append((tmp_path / "out.md").read_text())
    old, new = (json.loads(f["symformer-values.json"])["values"] for f in (before, after))
    key = "layer1.attention.output[0,0]"
    assert old[key] != new[key]
    assert "The weight is 0.163" in outputs[0] and "The weight is 0.163" in outputs[1]
    assert old[key].replace("-", "\u2212") in outputs[0]
    assert new[key].replace("-", "\u2212") in outputs[1]


def test_sphinx_myst_role(tmp_path, before):
    pytest.importorskip("sphinx", reason="sphinx is not installed")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed")
    config = {"conf.py": "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n"
                         "extensions = ['myst_parser', 'symformer_values_sphinx']\n"
                         "root_doc = 'page'\n"}
    _book(tmp_path, before, PAGE + "\nLine: {symformer}`worked:layer1.head1.Q[1,0]`.\n"
          "\nStale: {symformer}`layer1.head1.weights[9,9]`.\n", config)
    run = subprocess.run(["python", "-m", "sphinx", "-b", "text", "-q", ".", "_build"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    text = (tmp_path / "_build" / "page.txt").read_text()
    assert "The weight is 0.163" in text and "\\approx 1.595" in text
    # an unknown name is an error naming it
    assert "no value named 'layer1.head1.weights[9,9]'" in run.stderr


def test_quarto_shortcode(tmp_path, before):
    if shutil.which("quarto") is None:
        pytest.skip("quarto is not installed (the quarto-cli wheel downloads Quarto's "
                    "binary while it builds, which this machine cannot: docs/values.md)")
    _book(tmp_path, before, "---\ntitle: Values\n---\n\nThe weight is "
          "{{< symformer layer1.head1.weights[1,3] >}}.\n", {})
    (tmp_path / "page.md").rename(tmp_path / "page.qmd")
    run = subprocess.run(["quarto", "render", "page.qmd", "--to", "html"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "The weight is 0.163" in (tmp_path / "page.html").read_text()
