"""Scans of every shipped example's default exercise, as a teaching assistant reads it.

One variant of the default sheet of the built-in example and of every packaged example:
one token's path (at most 40 asked entries), given numbers at 2 decimals at most and
every weight matrix at one number of decimals, the key's softmax worked as the notes do
(each e^{s_j} and their sum Σ), every worked line of the key recomputed here from its
printed text (mpmath at 60 digits, an evaluator of the LaTeX written for this test) and
using only numbers the key printed before it, and true minus signs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from fractions import Fraction

import mpmath
import pytest

from symformer.example.loader import packaged_examples
from symformer.exercise import SheetRequest, make_exercise

#: An optimiser lesson ([objective]: no token rows, no block) has no sheet to draw
#: (a sheet follows a token through a block); its numbers are its training run's stages
#: (tests/test_optimizer_lesson.py).
NO_TOKENS = ("optimizer_lesson",)
EXAMPLES = [None, *sorted(n for n in packaged_examples() if n not in NO_TOKENS)]
LIMIT = 40


@pytest.fixture(scope="module")
def made() -> dict:
    """One variant of each example's default exercise (seed 3)."""
    return {ex: make_exercise(SheetRequest(ex, 1, 3, max_work=0)) for ex in EXAMPLES}


def _ids(ex) -> str:
    return ex or "builtin"


def entries(made, ex) -> list[dict]:
    return json.loads(made[ex].files["v01/key.json"])["entries"]


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids)
def test_default_sheet_asks_one_tokens_path(made, ex):
    """At most 40 asked entries, all of them blank cells of the sheet's tables; the
    query-side stages ask only the token's row."""
    found = entries(made, ex)
    assert 10 <= len(found) <= LIMIT, len(found)
    sheet = made[ex].files["v01/sheet.md"]
    body = sheet.split("## Given", 1)[1].split("\n## ", 1)[1]
    blanks = sum(line.count("|   ") for line in body.splitlines() if line.startswith("| "))
    assert blanks == len(found)
    token = json.loads(made[ex].files["v01/key.json"])["token"]
    for stage in ("layer1.head1.Q", "layer1.head1.weights", "layer1.head1.output"):
        assert {e["row"] for e in found if e["stage"] == stage} == {token}


def _given(sheet: str) -> str:
    return sheet.split("## Given", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids)
def test_givens_at_two_decimals_and_weights_at_one_precision(made, ex):
    for name in ("v01/sheet.md", "v01/key.md"):
        given = _given(made[ex].files[name])
        places = [len(d) for d in re.findall(r"\d\.(\d+)", given)]
        assert places and max(places) <= 2, (name, max(places))
        for matrix in re.findall(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", given):
            found = {len(m.group(1) or "") for m in
                     re.finditer(r"(?<![\d.])-?\d+(?:\.(\d+))?", matrix)}
            assert len(found) == 1, (name, matrix)  # 0.50, -0.25, 0.00: one precision


def _blocks(markdown: str) -> list[tuple[int, str, str]]:
    """Every worked block of a key: (offset, the stage heading, the aligned body)."""
    out = []
    for m in re.finditer(r"\\begin\{aligned\}\n(.*?)\n\\end\{aligned\}", markdown, re.S):
        heading = markdown.rfind("\n## ", 0, m.start())
        title = markdown[heading + 4:markdown.index("\n", heading + 4)]
        if "Worked lines" in markdown[heading:m.start()]:
            out.append((m.start(), title, m.group(1)))
    return out


def _steps(body: str) -> list[str]:
    """The steps of a worked block, each on one line (continuations joined)."""
    steps: list[str] = []
    body = body.replace("\\cr ", "\\\\")  # the Markdown's portable line break
    for line in body.split(" \\\\\n"):
        line = line.replace("\\\\ &\\qquad", "")
        if line.startswith("&") and steps:
            steps[-1] += " " + line
        else:
            steps.append(line)
    return steps


def _braced(text: str, start: int) -> tuple[str, int]:
    """The text of the brace group opening at ``text[start]``, and the index after it."""
    depth, k = 0, start
    while True:
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return text[start + 1:k], k + 1
        k += 1


def python(latex: str) -> str:
    """A numeric LaTeX form (decimals, ·, fractions, e^{..}, √) as a Python expression
    over mpmath numbers."""
    out, k = "", 0
    while k < len(latex):
        if latex.startswith(r"\frac", k):
            num, k = _braced(latex, k + 5)
            den, k = _braced(latex, k)
            out += f"(({python(num)})/({python(den)}))"
        elif m := re.match(r"\\(cos|sin) (\d+)", latex[k:]):
            out += f"{m.group(1)}(mpf('{m.group(2)}'))"
            k += len(m.group(0))
        elif m := re.match(r"\\(cos|sin)", latex[k:]):
            out += m.group(1)
            k += len(m.group(0))
        elif latex.startswith(r"\sqrt", k):
            arg, k = _braced(latex, k + 5)
            out += f"sqrt({python(arg)})"
        elif latex.startswith("e^{", k):
            arg, k = _braced(latex, k + 2)
            out += f"exp({python(arg)})"
        elif m := re.match(r"\d+(\.\d+)?", latex[k:]):
            out += f"mpf('{m.group(0)}')"
            k += len(m.group(0))
        else:
            for tex, py in ((r"\left(", "("), (r"\right)", ")"), (r"\Bigl(", "("),
                            (r"\Bigr)", ")"), (r"\cdot", "*"), ("{", "("), ("}", ")")):
                if latex.startswith(tex, k):
                    out += py
                    k += len(tex)
                    break
            else:
                out += latex[k]
                k += 1
    return out


NUMERIC = re.compile(r"^[\d\s.+\-*/()]*$")


def _evaluate(form: str):
    text = python(form)
    skeleton = re.sub(r"mpf\('[\d.]+'\)|exp|sqrt|cos|sin", "", text)
    if not NUMERIC.match(skeleton):
        return None  # a symbolic form
    mpmath.mp.dps = 60
    return eval(text, {"mpf": mpmath.mpf, "exp": mpmath.exp, "sqrt": mpmath.sqrt,
                       "cos": mpmath.cos, "sin": mpmath.sin})


def _numbers(text: str) -> set[Fraction]:
    """Every number printed in ``text`` (integers too: a table of integers prints 2)."""
    return {Fraction(n) for n in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text)}


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids)
def test_every_key_line_recomputes_from_numbers_printed_before_it(made, ex):
    """Each worked line evaluated from its printed text: `= r` exactly, `≈ r` the
    correct rounding at r's decimals; each literal is a number the key printed before
    it (the exact value's rounding beside a line does not count: a later line uses the
    line's own result); and each result is the key table's entry."""
    key = made[ex].files["v01/key.md"]
    checked = 0
    for offset, _, body in _blocks(key):
        before = re.sub(r"\\text\{exact: \} \{[^}]*\}", "", key[:offset])
        printed = _numbers(before)
        for step in _steps(body):
            step = re.sub(r"\\ \(\\text\{exact: \} \{[^}]*\}\)", "", step)
            lhs, chain = step.split("&", 1)
            parts = re.split(r"(=|\\approx)", chain)
            forms = [p.strip() for p in parts[2::2]]
            relations = parts[1::2]
            result, rel = forms[-1], relations[-1]
            numeric = [f for f in forms[:-1] if _evaluate(f) is not None]
            assert numeric, step
            value = _evaluate(numeric[-1])
            r = mpmath.mpf(result)
            places = len(result.split(".")[1]) if "." in result else 0
            if rel == "=":
                assert abs(value - r) < mpmath.mpf(10) ** -40, step
            else:
                assert abs(value - r) <= mpmath.mpf(10) ** -places / 2, step
            for literal in re.findall(r"\d+\.\d+", numeric[-1]):
                assert Fraction(literal) in printed or -Fraction(literal) in printed, \
                    (literal, step)
            printed.add(Fraction(result))
            checked += 1
    assert checked == len(entries(made, ex)) + _softmax_extra(made, ex)
    # each key table holds its lines' results (the student's values of key.json, the
    # ones later lines use), not the exact values where the two differ
    for e in entries(made, ex):
        assert _table_cell(key, e["title"], e["row"], e["col"]) == e["student"], e


def _table_cell(markdown: str, title: str, row: int, col: int) -> str:
    """The entry (row, col) of the key's table under heading ``title``."""
    section = markdown.split(f"\n## {title}\n", 1)[1]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] == str(row):
            return re.sub(r"\\mathbf\{(.*)\}", r"\1", cells[2 + col].strip("$"))
    raise AssertionError(f"no row {row} under {title}")


def _softmax_extra(made, ex) -> int:
    """The exponential and Σ steps of the key's softmax rows (live keys + 1 a row)."""
    found = [e for e in entries(made, ex) if e["stage"].endswith(".weights")]
    rows = {e["row"] for e in found}
    return sum(1 for e in found if e["line"] is not None) + len(rows)


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids)
def test_key_works_the_softmax_with_each_exponential_and_the_sum(made, ex):
    key = made[ex].files["v01/key.md"]
    weights = [e for e in entries(made, ex) if e["stage"].endswith(".weights")]
    block = next(b for _, t, b in _blocks(key) if "softmax" in t)
    live = [e for e in weights if e["line"] is not None]
    exps = re.findall(r"e\^\{s_\{(\d+)\}\} &= e\^\{(-?[\d.]+)\} \\approx ([\d.]+)", block)
    assert sorted(int(j) for j, _, _ in exps) == sorted(e["col"] for e in live)
    for _, s, value in exps:  # each exponential correctly rounded (mpmath)
        places = len(value.split(".")[1])
        mpmath.mp.dps = 40
        assert abs(mpmath.exp(mpmath.mpf(s)) - mpmath.mpf(value)) <= \
            mpmath.mpf(10) ** -places / 2
    total = re.search(r"\\Sigma &= .*?= ((?:[\d.]+ \+ )*[\d.]+) = ([\d.]+)", block, re.S)
    assert total, block
    assert sum(Fraction(t) for t in total.group(1).split(" + ")) == Fraction(total.group(2))
    assert sorted(total.group(1).split(" + ")) == sorted(v for _, _, v in exps)
    for e in live:
        assert re.search(rf"\\alpha_\{{{e['col']}\}} &= \\frac\{{e\^\{{s_\{{{e['col']}\}}\}}"
                         rf"\}}\{{\\Sigma\}} = \\frac", block), e


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids)
def test_no_hyphen_minus_before_a_digit_in_the_text(made, ex):
    """Outside math (where `-` is the math minus), the Markdown says no -2.59."""
    for name in ("v01/sheet.md", "v01/key.md"):
        text = made[ex].files[name]
        prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|```.*?```", "", text, flags=re.S)
        assert not re.search(r"(?<![\w-])-\d", prose), (name, re.findall(r".{20}-\d.{5}",
                                                                          prose)[:3])


@pytest.mark.skipif(shutil.which("pdflatex") is None or shutil.which("pdftotext") is None,
                    reason="pdflatex or pdftotext not installed")
def test_pdf_minus_signs_are_true_minus_signs(made, tmp_path):
    """The built-in sheet and key compiled: pdftotext finds U+2212 before negative
    numbers, never a hyphen-minus."""
    from symformer.latex.compile import compile_log

    for name in ("v01/sheet.tex", "v01/key.tex"):
        pdf, _ = compile_log({"main.tex": made[None].files[name]})
        path = tmp_path / "out.pdf"
        path.write_bytes(pdf)
        text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"],
                              capture_output=True, text=True, check=True).stdout
        assert "\u2212" in text, name
        assert not re.search(r"(?<![\w-])-\d", text), (name, re.findall(r".{15}-\d.{4}",
                                                                        text)[:3])
