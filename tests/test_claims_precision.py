"""Claims as published examples print them: each number's own printed digits, significant
digits, ``cols`` and ``entry``; checked against an independent float64 pass
(tests/float_reference.py) rounded with Python's decimal, far from rounding ties."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Context, Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer import derive, load_example
from symformer.cli import main
from symformer.verify.check import Checker
from symformer.verify.claims import claims_from_toml, printed_decimals, validate
from tests.float_reference import float_forward

EXAMPLE = load_example()
G = derive(EXAMPLE)
REF = float_forward(EXAMPLE)
#: a float64 value this close to a rounding tie (in units of the last place) is not used
MARGIN = Decimal("1e-6")


def to_decimals(x: float, d: int) -> str:
    """x rounded to d decimals with Python's decimal, as text; far from a tie."""
    exact = Decimal(repr(float(x)))
    unit = Decimal(1).scaleb(-d)
    rounded = exact.quantize(unit, rounding=ROUND_HALF_EVEN)
    assert abs(abs(exact - rounded) / unit - Decimal("0.5")) > MARGIN, (x, d)
    return str(rounded)


def to_significant(x: float, s: int) -> str:
    """x rounded to s significant digits, in scientific notation (6.3379e-02)."""
    exact = Decimal(repr(float(x)))
    rounded = Context(prec=s, rounding=ROUND_HALF_EVEN).plus(exact)
    unit = Decimal(1).scaleb(rounded.adjusted() - s + 1)
    assert abs(abs(exact - rounded) / unit - Decimal("0.5")) > MARGIN, (x, s)
    return f"{rounded:.{s - 1}e}"


def bump(text: str) -> str:
    """The text with its last printed digit moved by one unit (same printed precision)."""
    mantissa, e, exponent = text.partition("e")
    d = Decimal(mantissa)
    moved = d + Decimal(1).scaleb(d.as_tuple().exponent)
    return f"{moved}{e}{exponent}"


def check(text: str):
    claims = claims_from_toml(text, "<test>")
    validate(claims, G)
    return Checker(EXAMPLE).check_all(claims)


def strings(rows: list[list[str]]) -> str:
    return "[" + ", ".join("[" + ", ".join(f'"{v}"' for v in row) + "]" for row in rows) + "]"


def test_printed_digits_mixed_in_one_row() -> None:
    stage = "layer1.head1.weights"
    row = REF[stage][1]
    texts = [to_decimals(v, 2 if j % 2 else 3) for j, v in enumerate(row)]
    toml = f'[[claim]]\nname = "w"\nstage = "{stage}"\nrows = [1]\nvalues = {strings([texts])}\n'
    (result,) = check(toml)
    assert result.wrong == []
    assert [len(e.correct.split(".")[1]) for e in result.entries] == [3, 2, 3, 2]
    # each entry at its own precision: a 2-decimal number more than 0.0005 away from the
    # value is right, it would be wrong at 3 decimals
    assert any(abs(Decimal(texts[j]) - Decimal(repr(float(row[j])))) > Decimal("0.0005")
               for j in (1, 3))
    for j in range(4):
        moved = list(texts)
        moved[j] = bump(texts[j])
        (result,) = check(toml.replace(strings([texts]), strings([moved])))
        assert [(e.row, e.col) for e in result.wrong] == [(1, j)]
        assert result.wrong[0].correct == texts[j]


def test_trailing_zero_is_read_from_the_text_not_a_float() -> None:
    # a TOML float literal 0.260 claims 3 decimals: a float would have lost the zero
    stage, (i, j) = "layer1.head1.weights", (0, 1)
    x = REF[stage][i][j]
    two = to_decimals(x, 2)
    assert abs(Decimal(two) - Decimal(repr(float(x)))) > Decimal("0.0005")
    base = f'[[claim]]\nname = "one"\nstage = "{stage}"\nentry = [{i}, {j}]\n'
    (right,) = check(base + f"values = {two}\n")
    (wrong,) = check(base + f"values = {two}0\n")
    assert right.wrong == [] and [(e.row, e.col) for e in wrong.wrong] == [(i, j)]
    assert wrong.wrong[0].correct == to_decimals(x, 3)


def test_scientific_notation_is_significant_digits() -> None:
    stage = "layer1.ffn.hidden"
    rows = [[to_significant(v, 5) for v in row] for row in REF[stage]]
    toml = f'[[claim]]\nname = "h"\nstage = "{stage}"\nvalues = {strings(rows)}\n'
    (result,) = check(toml)
    assert result.wrong == []
    moved = [list(r) for r in rows]
    moved[2][3] = bump(rows[2][3])
    (result,) = check(toml.replace(strings(rows), strings(moved)))
    assert [(e.row, e.col) for e in result.wrong] == [(2, 3)]


def test_significant_key() -> None:
    stage = "layer1.head1.output"  # values from about 0.5 to 3: decimals differ per entry
    rows = [[f"{Decimal(to_significant(v, 3)):f}" for v in row] for row in REF[stage]]
    toml = (f'[[claim]]\nname = "o"\nstage = "{stage}"\nsignificant = 3\n'
            f"values = {strings(rows)}\n")
    (result,) = check(toml)
    assert result.wrong == []
    moved = [list(r) for r in rows]
    moved[1][0] = bump(rows[1][0])
    (result,) = check(toml.replace(strings(rows), strings(moved)))
    assert [(e.row, e.col) for e in result.wrong] == [(1, 0)]


def test_cols_and_rows() -> None:
    stage, rows, cols = "layer1.head1.weights", [0, 2], [1, 3]
    texts = [[to_decimals(REF[stage][r][c], 4) for c in cols] for r in rows]
    toml = (f'[[claim]]\nname = "w"\nstage = "{stage}"\ndecimals = 4\nrows = {rows}\n'
            f"cols = {cols}\nvalues = {strings(texts)}\n")
    (result,) = check(toml)
    assert result.wrong == [] and [(e.row, e.col) for e in result.entries] == [
        (0, 1), (0, 3), (2, 1), (2, 3)]
    moved = [list(r) for r in texts]
    moved[1][0] = bump(texts[1][0])
    (result,) = check(toml.replace(strings(texts), strings(moved)))
    assert [(e.row, e.col) for e in result.wrong] == [(2, 1)]


@pytest.mark.parametrize("form", ["[[{x}]]", "{x}", '"{x}"', '[["{x}"]]'])
def test_entry_bare_and_nested(form: str) -> None:
    stage, (i, j) = "layer1.ffn.output", (3, 2)
    x = to_decimals(REF[stage][i][j], 3)
    base = f'[[claim]]\nname = "f"\nstage = "{stage}"\nentry = [{i}, {j}]\n'
    (result,) = check(base + f"values = {form.format(x=x)}\n")
    assert result.wrong == [] and [(e.row, e.col) for e in result.entries] == [(i, j)]
    (result,) = check(base + f"values = {form.format(x=bump(x))}\n")
    assert [(e.row, e.col, e.correct) for e in result.wrong] == [(i, j, x)]


def test_report_and_json(tmp_path: Path, capsys) -> None:
    x = to_significant(REF["layer1.head1.Q"][1][0], 4)
    path = tmp_path / "claims.toml"
    path.write_text(f'[[claim]]\nname = "q"\nstage = "layer1.head1.Q"\nentry = [1, 0]\n'
                    f'significant = 4\nvalues = "{bump(x)}"\n')
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "4 significant digits" in out and "1 of 1 wrong" in out
    assert main(["check", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["claims"][0]["significant"] == 4 and data["claims"][0]["wrong"] == [[1, 0]]


@given(st.integers(-10**9, 10**9), st.integers(-12, 12), st.booleans())
def test_printed_decimals_against_python_decimal(digits: int, exponent: int,
                                                 scientific: bool) -> None:
    number = Decimal(digits).scaleb(exponent)
    text = f"{number:e}" if scientific else f"{number:f}"
    assert printed_decimals(text) == -Decimal(text).as_tuple().exponent


ENTRY = '[[claim]]\nname = "bad one"\nstage = "layer1.head1.Q"\n'


@pytest.mark.parametrize("body, message", [
    ("entry = [1, 0]\nrows = [1]\nvalues = 1.5", "entry .* cannot be combined with rows"),
    ("entry = [1, 0]\ncols = [0]\nvalues = 1.5", "cannot be combined with cols"),
    ("entry = [4, 0]\nvalues = 1.5", r"entry \[4, 0\] is outside layer1.head1.Q, which is 4x2"),
    ("entry = [0, 2]\nvalues = 1.5", r"entry \[0, 2\] is outside"),
    ("entry = [0]\nvalues = 1.5", r"entry must be \[row, col\]"),
    ("entry = [0, 0]\nvalues = [[1.5, 2.5]]", "with entry, values must be one number"),
    ("decimals = 2\nsignificant = 3\nvalues = [[1.5, 2.5]]\nrows = [0]",
     "decimals or significant, not both"),
    ("significant = 0\nvalues = [[1.5, 2.5]]\nrows = [0]", "significant must be"),
    ("cols = [0, 5]\nrows = [0]\nvalues = [[1.5, 2.5]]", r"cols \[0, 5\] must be distinct"),
    ("cols = [1]\nrows = [0]\nvalues = [[1.5, 2.5]]", "values are 1x2 .* cols names 1"),
    ('entry = [0, 0]\nvalues = "3/4"', "not a printed decimal number"),
    ("entry = [0, 0]\nvalues = 1e-40", "more than 30 decimals"),
])
def test_bad_input_exit_2(tmp_path: Path, capsys, body: str, message: str) -> None:
    import re

    path = tmp_path / "claims.toml"
    path.write_text(ENTRY + body + "\n")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bad one" in err, err
    assert re.search(message, err), err


def test_significant_zero_is_exact() -> None:
    # N significant digits of a nonzero value never print 0: a claimed 0 means exactly 0
    stage = "layer1.head1.weights"
    causal = float_forward(EXAMPLE, causal=True)[stage]
    row = [to_significant(v, 3) if v else "0" for v in causal[1]]
    toml = (f'[[claim]]\nname = "m"\nstage = "{stage}"\ncausal = true\nsignificant = 3\n'
            f"rows = [1]\nvalues = {strings([row])}\n")
    (result,) = check(toml)
    assert row[2:] == ["0", "0"] and result.wrong == []
    (result,) = check(toml.replace(f'"{row[0]}"', '"0"'))
    assert [(e.row, e.col) for e in result.wrong] == [(1, 0)]
