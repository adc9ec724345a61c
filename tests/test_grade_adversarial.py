"""`symformer grade` on answer files written by an adversary (issue 20, items 5, 8, 10, 12).

The key is `exercise --variants 2 --seed 424243` (a seed whose key has no weight 0.25 and
none of the kept-digits weights, which two tests write as wrong answers), made once
for the module.  Expected values come from mpmath at 50 digits on numbers chosen here,
never from the engine: a softmax weight outside [0, 1] is impossible whatever the
inputs, and a student's own scores determine their weights row by the formula.
"""

from __future__ import annotations

import csv
import os
import stat
import unicodedata
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.cli import main
from symformer.escape import plain_text

mpmath.mp.dps = 50
HEAD = "layer1.head1."
REPRO = Path("/work/shared/repro/attack3")
#: The reproducer grade_ft.toml, inlined (the tests must not depend on that folder).
FT = """\
student = "x"
variant = "v01"
[answers]
"layer1.head1.scores" = [{scores}]
"layer1.head1.weights" = [{weights}]
"""


def run(args: list[str]) -> int:
    """The command's exit status (argparse's errors exit through SystemExit)."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code)


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("key") / "key"
    # every entry asked, not one token's path: the planted answers fill whole tables
    assert main(["exercise", "--variants", "2", "--seed", "424243", "--out", str(folder),
                 "--every-entry", "--quiet"]) == 0
    return folder


def rows(matrix: list[list[str]]) -> str:
    return ", ".join("[" + ", ".join(f'"{v}"' for v in row) + "]" for row in matrix)


def grade(tmp_path: Path, key: Path, text: str, name: str = "a.toml") -> dict:
    answers = tmp_path / name
    answers.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["grade", str(answers), "--key", str(key), "--out", str(out),
                 "--quiet"]) == 0
    return next(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))


def feedback_verdicts(tmp_path: Path) -> dict[str, str]:
    """``stage[r,c]`` -> verdict word, from the feedback's list of entries not right."""
    text = next((tmp_path / "out" / "feedback").glob("*.md")).read_text()
    found = {}
    for line in text.splitlines():
        if line.startswith("- `") and "**" in line:
            found[line[3:line.index("`", 3)]] = line.split("**")[1]
    return found


def r2(x) -> Fraction:
    """Round to 2 decimals, half to even (below 1e-10 in size: 0)."""
    if abs(x) < mpmath.mpf("1e-10"):  # e^-1e50: beyond Decimal's exponent range
        return Fraction(0)
    d = Decimal(mpmath.nstr(x, 45, strip_zeros=False))
    return Fraction(d.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def softmax(row: list[Fraction]) -> list:
    exps = [mpmath.exp(mpmath.mpf(x.numerator) / x.denominator) for x in row]
    return [e / sum(exps) for e in exps]


# -- item 5: grading never credits the impossible -----------------------------------
@pytest.mark.parametrize("big", ["1e50", "1e100", "1e20"])
def test_impossible_weights_get_no_follow_through(tmp_path, key, big):
    text = FT.format(scores=rows([[big] * 4] * 4), weights=rows([["7"] * 4] * 4))
    if big == "1e50":
        assert text == (REPRO / "grade_ft.toml").read_text() or not REPRO.exists()
    row = grade(tmp_path, key, text)
    assert row["follow_through"] == "0" and row["total"] == "0"
    assert row["wrong"] == "32"


def test_a_row_summing_to_one_with_impossible_weights_is_wrong(tmp_path, key):
    # 7 - 3 - 3 + 0 = 1, but no softmax gives 7 or -3; 0 is not reached from the
    # key's scores either (they are within a few units of each other)
    text = FT.format(scores="", weights=rows([["7", "-3", "-3", "0"]]))
    row = grade(tmp_path, key, text)
    assert row["follow_through"] == "0" and row["wrong"] == "4"


@pytest.mark.parametrize("big", ["1e50", "1e20", "123456789012345678901.37"])
def test_a_blown_up_enclosure_credits_nothing(tmp_path, key, big):
    """Scores [big, 0, 0, 0] give weights [1, 0, 0, 0] to 1e-8 and closer (mpmath);
    [0.70, 0.10, 0.10, 0.10] sums to 1 and lies in [0, 1] but is not reached, however
    wide the enclosure of the huge inputs is; the true weights follow through."""
    weights = softmax([Fraction(big), Fraction(0), Fraction(0), Fraction(0)])
    assert [r2(w) for w in weights] == [1, 0, 0, 0]
    scores = rows([[big, "0", "0", "0"]])
    row = grade(tmp_path, key, FT.format(scores=scores,
                                         weights=rows([["0.70", "0.10", "0.10", "0.10"]])))
    assert row["follow_through"] == "0" and row["wrong"] == "8"
    row = grade(tmp_path, key, FT.format(scores=scores,
                                         weights=rows([["1.00", "0.00", "0.00", "0.00"]])),
                "b.toml")
    assert row["follow_through"] == "4"


def test_equal_huge_scores_follow_through_to_a_quarter(tmp_path, key):
    """Equal scores, however large, give weights of exactly 1/4 (mpmath agrees)."""
    assert [r2(w) for w in softmax([Fraction(10) ** 50] * 4)] == [Fraction(1, 4)] * 4
    text = FT.format(scores=rows([["1e50"] * 4] * 4), weights=rows([["0.25"] * 4] * 4))
    row = grade(tmp_path, key, text)
    assert row["follow_through"] == "16" and row["wrong"] == "16"


def _kept_digits() -> tuple[list[Fraction], list[Fraction], int]:
    """Scores as written (2 decimals), the student's unrounded scores within their
    rounding, and an entry whose weight rounds differently from the two."""
    written = [Fraction(3), Fraction(1), Fraction(0), Fraction(2)]
    for d in range(1, 50):
        kept = [written[0] + Fraction(d, 10000), *written[1:]]
        a, b = softmax(written), softmax(kept)
        for j in range(4):
            if r2(a[j]) != r2(b[j]):
                return written, kept, j
    raise AssertionError("no design found")


def test_follow_through_from_kept_digits_is_credited(tmp_path, key):
    """A student who kept more digits than written: their weights round differently
    from the weights of the scores as written, but some scores within the written
    rounding give them, so it is follow-through; one cent further is wrong."""
    written, kept, j = _kept_digits()
    assert abs(kept[0] - written[0]) < Fraction(1, 200)
    weights = [r2(w) for w in softmax(kept)]
    assert weights[j] != r2(softmax(written)[j])  # not the value as written
    scores = [[f"{float(x):.2f}" for x in written]]
    text = FT.format(scores=rows(scores), weights=rows([[f"{float(w):.2f}" for w in weights]]))
    row = grade(tmp_path, key, text)
    verdicts = feedback_verdicts(tmp_path)
    assert all(verdicts[f"{HEAD}weights[0,{c}]"] == "follow-through" for c in range(4))
    assert row["follow_through"] == "4"
    off = [f"{float(w + (Fraction(1, 100) if c == j else 0)):.2f}"
           for c, w in enumerate(weights)]
    grade(tmp_path, key, FT.format(scores=rows(scores), weights=rows([off])), "b.toml")
    assert feedback_verdicts(tmp_path)[f"{HEAD}weights[0,{j}]"] == "wrong"


# -- item 8: text from answer files is escaped --------------------------------------
NASTY = "\x1b]0;TITLE\x07\x1b[31mRED\x00"


def test_control_characters_never_reach_the_terminal_or_the_csv(tmp_path, key, capsys):
    answers = tmp_path / "esc.csv"
    answers.write_text(f"student,{NASTY}\nvariant,v01\nlayer1.head1.Q,0,0,0.00\n")
    out = tmp_path / "out"
    assert main(["grade", str(answers), "--key", str(key), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    summary = (out / "summary.csv").read_text()
    feedback = (out / "feedback" / "esc.md").read_text()
    for text in (printed.out, printed.err, summary, feedback):
        assert not any(unicodedata.category(c) == "Cc" and c != "\n" for c in text)
    assert "\\x1b[31mRED" in printed.out and "\\x1b[31mRED\\x00" in summary


@pytest.mark.parametrize(("lead", "shown"), [
    ("\ufeff", "\\ufeff"), ("\u200b", "\\u200b"), ("\u2060", "\\u2060"),
    (" \u200b\t", "\\u200b\\t"), ("\x00", "\\x00"), ("\u3164", "\\u3164"), (" ", "'")])
@pytest.mark.parametrize("formula", ["+1+1", "=1+1", "-1+1", "@SUM(A1)"])
def test_formula_guard_after_invisible_characters(tmp_path, key, lead, shown, formula):
    """Leading invisible characters are shown escaped (never dropped: the cell would
    look like another name), and the cell then starts with a backslash, not a formula;
    after leading ASCII spaces, the formula gets its quote."""
    answers = tmp_path / "f.csv"
    answers.write_text(f"student,{lead}{formula}\nvariant,v01\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["grade", str(answers), "--key", str(key), "--out", str(out),
                 "--quiet"]) == 0
    raw = (out / "summary.csv").read_text(encoding="utf-8").splitlines()[1]
    assert raw.startswith(shown + formula) and raw[:1] not in "=+-@"


#: Names that look blank or like another: Hangul fillers (letters), a braille blank, a
#: musical null notehead, variation selectors, a combining grapheme joiner, tags, and
#: spaces other than U+0020; each with the escape the summary and terminal must show.
FILLERS = ["\u3164", "\u115f", "\u1160", "\u2800", "\uffa0", "\u200b", "\u00a0", "\u3000",
           "\u2007", "\u034f", "\ufe0f", "\U000e0041", "\U0001d159", "\u180e", "\u00ad"]


@pytest.mark.parametrize("filler", FILLERS, ids=lambda c: f"U+{ord(c):04X}")
def test_names_of_invisible_fillers_are_shown_escaped(tmp_path, key, capsys, filler):
    answers = tmp_path / "f.csv"
    name = filler * 3 + "B" + filler + "o"  # the reader strips leading Unicode spaces
    answers.write_text(f"student,{name}\nvariant,v01\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["grade", str(answers), "--key", str(key), "--out", str(out)]) == 0
    code = ord(filler)
    escape = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    if code <= 0xFF:
        escape = f"\\x{code:02x}"
    with open(out / "summary.csv", encoding="utf-8", newline="") as f:
        cell = next(iter(list(csv.reader(f))[1:]))[0]
    want = ("" if filler.isspace() else escape * 3) + "B" + escape + "o"
    assert cell == want
    printed = capsys.readouterr().out
    assert want in printed and filler not in printed
    feedback = (out / "feedback" / "f.md").read_text(encoding="utf-8")
    assert filler not in feedback


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_plain_text_shows_no_invisible_character(text):
    shown = plain_text(text)
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Cn")
                   for c in shown)
    regex = pytest.importorskip("regex", reason="regex (a dependency of transformers, "
                                "the test extra) is the reference for Unicode properties")
    blank = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Zs}\u2800\U0001D159]")
    assert not any(blank.match(c) and c != " " for c in shown)
    if all((c.isprintable() or c == " ") and not blank.match(c) or c == " " for c in text):
        assert shown == text  # visible text is kept as typed


# -- items 10 and 12: messages ------------------------------------------------------
def test_key_that_is_no_folder_says_what_it_is(tmp_path, key, capsys):
    answers = tmp_path / "a.csv"
    answers.write_text("variant,v01\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [(fifo, "a FIFO"), (plain, "a file, not a folder"),
             (empty, "a folder without manifest.toml"), (tmp_path / "none", "no such folder")]
    if Path("/dev/zero").exists() and stat.S_ISCHR(os.stat("/dev/zero").st_mode):
        cases.append((Path("/dev/zero"), "a character device"))
    for path, words in cases:
        status = run(["grade", str(answers), "--key", str(path), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip()
        assert status == 2 and f"{path}: {words}" in err and len(err.splitlines()) == 1
        assert "no such file" not in err or words == "no such folder"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("example", ["../outside.toml", "/etc/passwd", "v01/../../outside.toml",
                                     "link.toml"])
def test_manifest_example_outside_the_key_is_refused(tmp_path, key, capsys, example):
    folder = tmp_path / "k"
    folder.mkdir()
    (tmp_path / "outside.toml").write_text((key / "v01" / "example.toml").read_text())
    (folder / "link.toml").symlink_to(tmp_path / "outside.toml")
    manifest = (key / "manifest.toml").read_text()
    manifest = manifest.replace('"v01/example.toml"', f'"{example}"')
    (folder / "manifest.toml").write_text(manifest)
    answers = tmp_path / "a.csv"
    answers.write_text("variant,v01\n")
    status = run(["grade", str(answers), "--key", str(folder), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "lies outside the key folder" in err and repr(example) in err


def test_grade_requires_out(tmp_path, key, capsys):
    answers = tmp_path / "a.csv"
    answers.write_text("variant,v01\n")
    assert run(["grade", str(answers), "--key", str(key)]) == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_singular_in_the_copied_note(tmp_path, key):
    """One answer, variant v02's key value, on a v01 sheet: "1 of 1 answer"."""
    from symformer.grade.key import load_key

    k = load_key(key)
    v1, v2 = k.variants["v01"], k.variants["v02"]
    stage = HEAD + "Q"
    r, c = next((r, c) for r, row in enumerate(v2.correct(stage)) for c, x in enumerate(row)
                if x != v1.correct(stage)[r][c])
    value = v2.correct_text(stage, r, c)
    row = grade(tmp_path, key, f"variant,v01\n{stage},{r},{c},{value}\n", "c.csv")
    assert row["note"] == "1 of 1 answer is from variant v02's key (0 from variant v01's)"


def test_a_file_name_from_a_student_is_escaped_in_messages(tmp_path, key, capsys):
    folder = tmp_path / "answers"
    folder.mkdir()
    (folder / "\x1b[31mred.csv").write_text("student,R\nvariant,v99\n")
    status = run(["grade", str(folder), "--key", str(key), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "\\x1b[31mred.csv" in err and "\x1b" not in err
    status = run(["grade", str(folder), "--key", str(key), "--out", str(tmp_path / "o"),
                  "--keep-going"])
    printed = capsys.readouterr()
    assert status == 1 and "\x1b" not in printed.err + printed.out
    assert "\x1b" not in (tmp_path / "o" / "summary.csv").read_text()


# -- LayerNorm: follow-through from the student's own sum, mean and variance --------
LN = "layer1.add_norm1"


@pytest.fixture(scope="module")
def ln_key(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lnkey") / "key"
    asked = [a for part in ("sum", "mean", "std", "variance") for a in ("--ask", f"{LN}.{part}")]
    assert main(["exercise", "--variants", "1", "--seed", "5", *asked, "--ask", LN, "--out",
                 str(folder), "--every-entry", "--quiet"]) == 0  # row 0 is graded
    return folder


def _ln_answers(variance: str, output: list[str]) -> str:
    return (f'variant = "v01"\n[answers]\n"{LN}.sum" = [[4, 2, 0, 2]]\n'
            f'"{LN}.mean" = [[2]]\n"{LN}.variance" = [["{variance}"]]\n'
            f'"{LN}" = [{rows([output])}]\n')


def test_layer_norm_from_own_numbers_follows_through(tmp_path, ln_key):
    """Row [4, 2, 0, 2]: mean 2, biased variance 2, y = (x - 2)/sqrt(2 + 1e-6) (the
    built-in eps), by mpmath: 1.41, 0.00, -1.41, 0.00."""
    y = [(x - 2) / mpmath.sqrt(mpmath.mpf(2) + mpmath.mpf("1e-6")) for x in (4, 2, 0, 2)]
    assert [r2(v) for v in y] == [Fraction(141, 100), 0, Fraction(-141, 100), 0]
    grade(tmp_path, ln_key, _ln_answers("2", ["1.41", "0.00", "-1.41", "0.00"]))
    verdicts = feedback_verdicts(tmp_path)
    assert [verdicts.get(f"{LN}[0,{c}]") for c in range(4)] == ["follow-through"] * 4


def test_layer_norm_over_a_variance_box_holding_zero_credits_nothing(tmp_path, ln_key):
    """A variance written 0.00 spans [-0.005, 0.005]: the square root is undefined on
    part of the box, so nothing there is certified; 0.50 is no follow-through."""
    grade(tmp_path, ln_key, _ln_answers("0.00", ["0.50", "0.50", "0.50", "0.50"]))
    verdicts = feedback_verdicts(tmp_path)
    assert [verdicts.get(f"{LN}[0,{c}]") for c in range(4)] == ["wrong"] * 4


def test_a_variant_example_that_is_no_file_says_what_it_is(tmp_path, key, capsys):
    folder = tmp_path / "k"
    (folder / "v01").mkdir(parents=True)
    (folder / "manifest.toml").write_text((key / "manifest.toml").read_text())
    answers = tmp_path / "a.csv"
    answers.write_text("variant,v01\n")
    os.mkfifo(folder / "v01" / "example.toml")
    status = run(["grade", str(answers), "--key", str(folder), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "example.toml: a FIFO (named pipe), expected an example file" in err
