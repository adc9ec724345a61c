"""``symformer grade`` round trip on a key it did not write by hand (sheets3): moe_dropout's
dropout step, every entry asked.  The reference is the template's mask and rate worked
by hand from the given numbers the sheet prints (mask rows [1, 0], [0, 0], [1, 1];
p = 1/3, so a kept entry is m * 3/2), never the engine's own values."""

from __future__ import annotations

import csv
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from symformer.cli import main
from symformer.exercise import SheetRequest, make_exercise

STAGE = "layer1.attention.output.dropout"
MASK = ((1, 0), (0, 0), (1, 1))


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    """One variant's key folder (0.2 s)."""
    made = make_exercise(SheetRequest("moe_dropout", 1, 5, ask=(STAGE,), every_entry=True))
    folder = tmp_path_factory.mktemp("key")
    for name, text in made.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def by_hand(key: Path) -> dict[tuple[int, int], Fraction]:
    """Every entry from the sheet's given m (printed at 4 decimals) and the mask."""
    sheet = (key / "v01" / "sheet.md").read_text().split("## Layer 1: Attention")[0]
    rows = [line for line in sheet.splitlines() if line.startswith(("| 0 |", "| 1 |", "| 2 |"))]
    m = [[Fraction(c.strip().strip("$")) for c in r.strip("|").split("|")[2:]] for r in rows]
    return {(i, j): m[i][j] * MASK[i][j] * Fraction(3, 2) for i in range(3) for j in range(2)}


def places(x: Fraction, n: int) -> str:
    """``x`` rounded to ``n`` decimals (half to even), as text."""
    exact = Decimal(x.numerator) / Decimal(x.denominator)
    return str(exact.quantize(Decimal(1).scaleb(-n), rounding=ROUND_HALF_EVEN))


def test_right_wrong_rounded_unreadable_missing(key, tmp_path, capsys):
    v = by_hand(key)
    answers = {(0, 0): places(v[0, 0], 2),          # right
               (0, 1): "0.0000",                     # right: more decimals of an exact 0
               (2, 0): places(v[2, 0], 1),           # rounded to one decimal
               (2, 1): places(v[2, 1] + Fraction(1, 2), 2),  # wrong
               (1, 0): "1.2.3"}                      # unreadable; (1, 1) missing
    rows = [["student", "Ada"], ["variant", "v01"], ["stage", "row", "col", "value"]]
    rows += [[STAGE, i, j, a] for (i, j), a in answers.items()]
    with open(tmp_path / "ada.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert main(["grade", str(tmp_path / "ada.csv"), "--key", str(key),
                 "--out", str(tmp_path / "grades"), "--quiet"]) == 0
    summary = next(csv.DictReader(open(tmp_path / "grades" / "summary.csv")))
    # the one-decimal answer is right only when it lies within half a unit (0.005)
    rounded_right = abs(Fraction(answers[2, 0]) - v[2, 0]) <= Fraction(1, 200)
    assert abs(abs(Fraction(answers[2, 0]) - v[2, 0]) - Fraction(1, 200)) > Fraction(1, 10**4)
    assert summary["right"] == str(2 + rounded_right)
    assert summary["wrong"] == str(2 - rounded_right)
    assert (summary["unreadable"], summary["missing"], summary["follow_through"]) == ("1", "1", "0")
    assert summary["total"] == str(2 + rounded_right) and summary["maximum"] == "6"
    feedback = (tmp_path / "grades" / "feedback" / "ada.md").read_text()
    assert "1.2.3" in feedback


@pytest.mark.parametrize("name, text, words", [
    ("bob.toml", 'student = "Bob"\nvariant = 3\n', ["bob.toml", "line 2", "variant"]),
    ("cy.csv", "student,Cy\nvariant,v09\n", ["cy.csv", "v09"]),
    ("di.toml", 'variant = "v01"\n[answers\n', ["di.toml", "invalid TOML", "line 2"]),
])
def test_a_malformed_file_is_one_line_exit_2(key, tmp_path, capsys, name, text, words):
    (tmp_path / name).write_text(text)
    code = main(["grade", str(tmp_path / name), "--key", str(key),
                 "--out", str(tmp_path / "grades"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert all(w in err for w in words), err
    assert not (tmp_path / "grades").exists()
