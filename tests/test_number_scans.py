"""Scans of every shipped example's notes: numbers a reader never trips on (issue 39, item 6).

* no nonzero number below 10^-4 printed in fixed point (``-0.00000002859``): it is
  set in scientific notation, ``-2.859 \\times 10^{-8}``, with the certified digits;
* no worked line whose ``(exact: …)`` remark comes from an operand that is an exact
  short decimal printed rounded (5/16 printed 0.312): such an operand prints in full;
* an exact short decimal in a table is printed in full, checked against fractions.

The LaTeX is the one of :mod:`test_notation_scans` (each example with its loss, built
once per session); the Markdown is the committed export of the built-in example.
"""

from __future__ import annotations

import functools
import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from test_notation_scans import NAMES, _example, tex_files

from symformer import derive
from symformer.blocks.backward import with_gradients
from symformer.latex import Options, export_files
from symformer.worked.numbers import SHORT_EXTRA, latex_decimal, printed_values, scientific

#: A number in fixed point: its digits after ``0.0000`` include a nonzero one.
SMALL_FIXED = re.compile(r"(?<![\d.])-?0\.0000\d*[1-9]")
#: The notation table's words for ε ("here 0.000001"): text, not math.
EPSILON_WORDS = re.compile(r"\(here [\d., ]+\)")
MARKDOWN = Path(__file__).resolve().parents[1] / "exports" / "markdown" / "main.md"


def small_fixed(text: str) -> list[str]:
    """Every fixed-point number below 10^-4 in a file, with its surroundings."""
    text = EPSILON_WORDS.sub("", text)
    return [text[max(0, m.start() - 40):m.end() + 10] for m in SMALL_FIXED.finditer(text)]


def test_scientific_notation_by_hand():
    assert scientific("-0.00000002859") == ("-2.859", -8)
    assert scientific("0.00009") == ("9", -5)
    assert latex_decimal("-0.00000002859") == r"-2.859 \times 10^{-8}"
    assert latex_decimal("0.000001") == "10^{-6}"
    for text in ("0.0001", "0", "0.000", "-inf", "12.5", "-0.5"):
        assert scientific(text) is None and latex_decimal(text) == text


@pytest.mark.parametrize("name", NAMES)
def test_no_fixed_point_number_below_1e4_in_notes(name):
    found = {path: small_fixed(tex) for path, tex in tex_files(name).items()}
    assert not {k: v for k, v in found.items() if v}


def test_no_fixed_point_number_below_1e4_in_markdown():
    assert small_fixed(MARKDOWN.read_text("utf-8")) == []


@functools.cache
def worked_items(name: str) -> tuple[object, list[dict]]:
    """(the derivation with its gradients, every worked line of its notes as JSON)."""
    g = derive(_example(name))
    files = export_files(g, Options(decimals=3), "json")
    return with_gradients(g), json.loads(files["worked.json"])["worked"]


def _short(value: Fraction | None) -> bool:
    """An exact value the notes print in full at 3 decimals: more places than 3, at most
    3 + SHORT_EXTRA (a denominator 2^a 5^b)."""
    if value is None:
        return False
    for places in range(4, 4 + SHORT_EXTRA):
        if (value * 10 ** places).denominator == 1:
            return True
    return False


@pytest.mark.parametrize("name", ["builtin", "llama_style", "course_module", "attention_only"])
def test_no_exact_remark_from_a_rounded_short_decimal(name):
    g, items = worked_items(name)
    causes = []
    for item in items:
        if "exact" not in item:
            continue
        for operand in item["operands"]:
            if "stage" not in operand:
                continue
            value = g.exact_rational(operand["stage"], operand["row"], operand["col"])
            if _short(value) and Fraction(operand["value"]) != value:
                causes.append((item["symbol"], operand))
    assert causes == []


def test_rms_statistic_printed_exactly():
    """llama_style's ⟨x²⟩ is 5/16 at every position: its table and its first worked line
    print 0.3125 (issue 39: 0.312 made the next line disagree with its table)."""
    g, items = worked_items("llama_style")
    name = next(s.name for s in g if s.name.endswith("mean_square"))
    assert {g.exact_rational(name, i, 0) for i in range(g[name].shape[0])} == {Fraction(5, 16)}
    assert {row[0] for row in printed_values(g[name], 3)} == {"0.3125"}
    worked = [i for i in items if i["stage"] == name]
    assert worked and all(i["result"] == "0.3125" and "exact" not in i for i in worked)


#: The HTML trace's numbers as text: a MathML number or a table cell (tags removed).
TAGS = re.compile(r"<[^>]+>")


def test_no_fixed_point_number_below_1e4_in_slides():
    from symformer.slides import Options as SlideOptions
    from symformer.slides import slides_files

    files = slides_files(derive(_example("builtin")), SlideOptions())
    assert files
    assert {k: v for k, v in ((k, small_fixed(t)) for k, t in files.items()) if v} == {}


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_no_fixed_point_number_below_1e4_in_the_trace(fmt, tmp_path):
    """The trace forward and backward (HTML: its MathML and its table cells; Markdown):
    ε is 10⁻⁶ and a tiny gradient 4.792 × 10⁻⁸, never in fixed point."""
    from symformer.cli import main

    out = tmp_path / f"trace.{fmt}"
    assert main(["trace", "--token", "1", "--backward", "--format", fmt, "--out",
                 str(out)]) == 0
    text = out.read_text("utf-8")
    if fmt == "html":
        assert "<msup><mn>10</mn>" in text  # ε and the tiny gradients, as powers of ten
        text = TAGS.sub(" ", text)
    else:
        assert r"\times 10^{" in text
    assert small_fixed(text) == []


def _significant(text: str) -> int:
    """The significant digits a printed decimal shows (0 for a zero)."""
    return len(text.lstrip("-").replace(".", "").lstrip("0"))


@pytest.mark.parametrize("name", ["builtin", "llama_style", "course_module", "attention_only"])
def test_backward_operands_at_most_six_significant_digits(name):
    """The Backward part's operands read from a table print at 4 significant digits by
    default and never more than 6 (issue 39: a line 6 do not land keeps its ``(exact:
    …)`` remark, which says why)."""
    _, items = worked_items(name)
    shown = [_significant(o["value"]) for i in items
             if i["stage"] == "loss" or i["stage"].startswith("grad.")
             for o in i["operands"] if "stage" in o and "." in o["value"]]
    assert shown and max(shown) <= 6
