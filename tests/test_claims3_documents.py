"""A notebook that prints slices, as lecturers do: ``print(np.round(Q[1], 2))`` (a row),
``u[-1, :]`` (the last row), ``u[:, 0]`` (a column), ``A[0, 2]`` and ``A[0][3]`` (one
entry, printed as a bare number).  Each is judged on its own entries, every verdict
against the mpmath forward pass of tests/test_claims3_builtin.py; the score row a
reader computed from the printed q_1 and K is reader rounding citing those two
slices, not V (printed, but not read by the scores)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from test_claims3_builtin import Builtin, table, wrong_entries
from test_side_stages import run_cli

NAMES = ["--name", "Q=layer1.head1.Q", "--name", "K=layer1.head1.K", "--name",
         "V=layer1.head1.V", "--name", "u=layer1.head1.raw_scores", "--name",
         "A=layer1.head1.weights"]


def printed(name: str, rows: list[list[str]], decimals: int, one_row: bool = False) -> str:
    """A print(np.round(NAME, k)) line and NumPy's comment lines for ``rows``."""
    body = ("[" + " ".join(rows[0]) + "]" if one_row else
            "[" + "\n#  ".join("[" + " ".join(r) + "]" for r in rows) + "]")
    return f"print(np.round({name}, {decimals}))\n# {body}\n"


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    ref = Builtin().heads[0]
    q1, K, V = table([ref["Q"][1]], 2), table(ref["K"], 2), table(ref["V"], 2)
    by_hand = [[str((sum(Decimal(a) * Decimal(b) for a, b in zip(q1[0], k))).quantize(
        Decimal("0.01"))) for k in K]]
    last = table([ref["raw"][3]], 2)
    column = table([[r[0] for r in ref["raw"]]], 2)
    a02, a03 = table([[ref["alpha"][0][2]]], 3, (0, 0)), table([[ref["alpha"][0][3]]], 3)
    text = ("```python\n" + printed("Q[1]", q1, 2, True) + printed("K", K, 2)
            + printed("V", V, 2) + printed("u[1]", by_hand, 2, True)
            + printed("u[-1, :]", last, 2, True) + printed("u[:, 0]", column, 2, True)
            + f"print(np.round(A[0, 2], 3))\n# {a02[0][0]}\n"
            + f"print(np.round(A[0][3], 3))\n# {a03[0][0]}\n```\n")
    path = tmp_path_factory.mktemp("claims3doc") / "notebook.md"
    path.write_text(text)
    code, out = run_cli(["check", str(path), "--json", *NAMES])
    assert code == 1, out
    claims = {c["name"]: c for c in json.loads(out)["claims"]}
    raw, alpha = ref["raw"], ref["alpha"]
    expected = {"Q[1]": [[1, j] for _, j in wrong_entries([ref["Q"][1]], q1)],
                "K": wrong_entries(ref["K"], K), "V": wrong_entries(ref["V"], V),
                "u[1]": [[1, j] for _, j in wrong_entries([raw[1]], by_hand)],
                "u[-1, :]": [[3, j] for _, j in wrong_entries([raw[3]], last)],
                "u[:, 0]": [[i, 0] for _, i in wrong_entries([[r[0] for r in raw]], column)],
                "A[0, 2]": [[0, 2]] if wrong_entries([[alpha[0][2]]], a02) else [],
                "A[0, 3]": [[0, 3]] if wrong_entries([[alpha[0][3]]], a03) else []}
    return claims, expected


def test_slices_are_judged_on_their_own_entries(judged):
    claims, expected = judged
    assert sorted(claims) == sorted(expected)
    for name, wrong in expected.items():
        assert claims[name]["wrong"] == wrong, (name, claims[name])
    assert expected["A[0, 2]"] and expected["u[1]"] and not expected["u[:, 0]"]


def test_reader_rounding_from_printed_slices(judged):
    claims, _ = judged
    why = [w for w in claims["u[1]"]["explanations"] if w.startswith("reader rounding")]
    assert why and why[0].endswith("as printed (Q[1], K)"), claims["u[1]"]


def test_a_slice_outside_the_stage_is_one_line(tmp_path):
    path = tmp_path / "bad.md"
    path.write_text("print(np.round(Q[-9], 2))\n# [1.6  0.75]\n")
    code, out = run_cli(["check", str(path), "--name", "Q=layer1.head1.Q"])
    assert code == 2 and "index -9 is outside layer1.head1.Q" in out, out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out


def test_arrays_nobody_mapped_are_named_as_not_compared(tmp_path):
    """The count is over what was compared: an unmapped printed array is named after it
    (text and --json), an array skipped with NAME=- is not (the author chose)."""
    ref = Builtin().heads[0]
    Q = table(ref["Q"], 1)
    assert wrong_entries(ref["Q"], Q) == []
    path = tmp_path / "notes.md"
    path.write_text(printed("Q", Q, 1) + "print(np.round(V[0], 1))\n# [1.  1.8]\n"
                    "print(np.round(K, 1))\n# [[1. 1.]\n#  [1.2 1.1]\n#  [1.2 0.7]\n"
                    "#  [0.3 1.8]]\n")
    code, out = run_cli(["check", str(path), "--name", "Q=layer1.head1.Q", "--name", "K=-"])
    assert code == 0 and out.splitlines()[-2:] == [
        "8 of 8 numbers correct", "not compared (no --name mapping): V[0] (line 6)"], out
    code, out = run_cli(["check", str(path), "--name", "Q=layer1.head1.Q", "--name", "K=-",
                         "--json"])
    assert json.loads(out)["unchecked"] == ["V[0] (line 6)"], out
