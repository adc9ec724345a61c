"""End to end: `symformer exercise` writes variants, planted students answer, `symformer
grade` gives exactly the designed grades.

Every expected value comes from an independent computation of each variant's example
file (tomllib + NumPy float64 for the values involving the sinusoidal encoding, Python
fractions for the steps from printed numbers), never from the engine.  The float64
values are safe to round: the exercise proves every asked value at least 1/100 of a
unit of the 2nd decimal (1e-4) from a rounding boundary, far beyond float64's error;
the test checks its own inputs are that clear too.
"""

from __future__ import annotations

import csv
import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symformer.cli import main

HEAD = "layer1.head1."
ASKED = [HEAD + s for s in ("Q", "K", "V", "raw_scores")]
H = Fraction(1, 200)  # half a unit of the 2nd decimal
CENT = Fraction(1, 100)


def r2(x: float | Fraction) -> Fraction:
    """Round to 2 decimals, half to even."""
    if isinstance(x, Fraction):
        d = Decimal(x.numerator) / Decimal(x.denominator)
    else:
        assert abs(x * 100 - np.floor(x * 100) - 0.5) > 1e-6, "too close to call in float64"
        d = Decimal(repr(float(x)))
    return Fraction(d.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def exact(matrix) -> list[list[Fraction]]:
    return [[Fraction(str(v)) for v in row] for row in matrix]


def fmatmul(a, b) -> list[list[Fraction]]:
    return [[sum((a[i][k] * b[k][j] for k in range(len(b))), Fraction(0))
             for j in range(len(b[0]))] for i in range(len(a))]


def transpose(m):
    return [list(col) for col in zip(*m)]


class Reference:
    """A variant's asked stages from its file alone: exact (float64) and as keyed."""

    def __init__(self, path: Path) -> None:
        ex = tomllib.loads(path.read_text())
        ids = [ex["vocab"].index(t) for t in ex["tokens"]]
        table = np.array(exact(ex["embeddings"]), dtype=float)
        n, d = len(ids), table.shape[1]
        pe = np.array([[(np.sin if c % 2 == 0 else np.cos)(p / 10000 ** ((c - c % 2) / d))
                        for c in range(d)] for p in range(n)])
        x = table[ids] + pe
        head = ex["layer"][0]["head"][0]
        self.w = {n: exact(head[n]) for n in ("W_Q", "W_K", "W_V")}
        q, k, v = (x @ np.array(self.w[n], dtype=float) for n in ("W_Q", "W_K", "W_V"))
        values = dict(zip(ASKED, (q, k, v, q @ k.T)))
        self.key = {s: [[r2(float(e)) for e in row] for row in m] for s, m in values.items()}
        # reader rounding of Q, K, V: from the input rounded to 2 decimals
        xr = [[r2(float(e)) for e in row] for row in x]
        self.reader = {HEAD + n[-1]: fmatmul(xr, self.w[n]) for n in ("W_Q", "W_K", "W_V")}
        self.reader[HEAD + "raw_scores"] = dot_scores(self.key)


def dot_scores(tables: dict) -> list[list[Fraction]]:
    """u = Q K^T from the given Q and K, exactly."""
    return fmatmul(tables[HEAD + "Q"], transpose(tables[HEAD + "K"]))


def dot_range(qi, kj) -> tuple[Fraction, Fraction]:
    """The exact range of q_i . k_j over every q, k within half a unit of the given
    (each input appears once: interval arithmetic is exact)."""
    lo = hi = Fraction(0)
    for a, b in zip(qi, kj):
        corners = [(a + s) * (b + t) for s in (-H, H) for t in (-H, H)]
        lo, hi = lo + min(corners), hi + max(corners)
    return lo, hi


def verdicts(ref: Reference, answers: dict) -> dict:
    """The designed verdict of every entry: right (the key value; no value lies within
    the margin of a boundary), reader rounding, follow-through (raw_scores from the
    student's own Q and K, as written or anywhere within their rounding), wrong."""
    own = dot_scores(answers)
    out = {}
    for stage in ASKED:
        for i, row in enumerate(answers[stage]):
            for j, a in enumerate(row):
                if a == ref.key[stage][i][j]:
                    verdict = "right"
                elif abs(ref.reader[stage][i][j] - a) <= H:
                    verdict = "reader_rounding"
                elif stage == HEAD + "raw_scores" and (
                        abs(own[i][j] - a) <= H
                        or not (lambda lo, hi: hi < a - H or lo > a + H)(
                            *dot_range(answers[HEAD + "Q"][i], answers[HEAD + "K"][j]))):
                    verdict = "follow_through"
                else:
                    verdict = "wrong"
                out[stage, i, j] = verdict
    return out


SHARE = {"right": 1, "reader_rounding": 1, "follow_through": Fraction(1, 2), "wrong": 0}


def copy(tables: dict) -> dict:
    return {s: [row[:] for row in m] for s, m in tables.items()}


def write_csv(path: Path, student: str, variant: str, tables: dict) -> Path:
    lines = [f"student,{student}", f"variant,{variant}", "stage,row,col,value"]
    for stage in ASKED:
        for i, row in enumerate(tables[stage]):
            for j, v in enumerate(row):
                lines.append(f"{stage},{i},{j},{Decimal(v.numerator) / v.denominator:.2f}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict, dict]:
    """Three variants, four planted students graded: (summary rows, designed verdicts)."""
    root = tmp_path_factory.mktemp("e2e")
    key = root / "class"
    ask = [a for s in ASKED for a in ("--ask", s)]
    # every entry asked (not one token's path): the planted students fill whole tables
    assert main(["exercise", "--variants", "3", "--seed", "11", "--out", str(key), *ask,
                 "--every-entry", "--quiet"]) == 0
    manifest = tomllib.loads((key / "manifest.toml").read_text())
    assert manifest["exercise"]["asked"] == ASKED
    refs = {v["id"]: Reference(key / v["example"]) for v in manifest["variant"]}
    assert sorted(refs) == ["v01", "v02", "v03"]

    students: dict[str, tuple[str, dict]] = {"ada": ("v01", copy(refs["v01"].key))}
    # a rounding slip: one Q entry written one cent off (neither right nor reader
    # rounding); everything after it from the right values
    slip = copy(refs["v01"].key)
    q = HEAD + "Q"
    i, j, value = next((i, j, v + d) for i, row in enumerate(slip[q])
                       for j, v in enumerate(row) for d in (CENT, -CENT)
                       if abs(refs["v01"].reader[q][i][j] - (v + d)) > H)
    slip[q][i][j] = value
    students["slip"] = ("v01", slip)
    # an early error carried through: K[2,0] off by 1/2, u computed from their own K
    early = copy(refs["v02"].key)
    early[HEAD + "K"][2][0] += Fraction(1, 2)
    early[HEAD + "raw_scores"] = [[r2(u) for u in row] for row in dot_scores(early)]
    students["early"] = ("v02", early)
    # a copy: variant v01 on the file, variant v03's key in it
    students["copy"] = ("v01", copy(refs["v03"].key))

    files = [write_csv(root / f"{name}.csv", name, vid, tables)
             for name, (vid, tables) in students.items()]
    out = root / "grades"
    assert main(["grade", *map(str, files), "--key", str(key), "--out", str(out),
                 "--quiet"]) == 0
    rows = {row["student"]: row for row in csv.DictReader((out / "summary.csv").open())}
    designed = {name: verdicts(refs[vid], tables) for name, (vid, tables) in students.items()}
    return rows, designed


def test_summary_has_the_designed_grades(graded):
    rows, designed = graded
    assert sorted(rows) == ["ada", "copy", "early", "slip"]
    for name, expected in designed.items():
        row = rows[name]
        for stage in ASKED:
            score = sum((SHARE[v] for (s, _, _), v in expected.items() if s == stage),
                        Fraction(0))
            assert Fraction(row[stage]) == score, (name, stage)
        assert Fraction(row["total"]) == sum((SHARE[v] for v in expected.values()),
                                             Fraction(0))
        assert Fraction(row["maximum"]) == len(expected) == 8 * 3 + 16
        for verdict in SHARE:
            assert int(row[verdict]) == list(expected.values()).count(verdict), (name, verdict)
        assert row["missing"] == row["unreadable"] == "0"


def test_the_designs_are_what_they_claim(graded):
    """The planted students are the cases the issue names, per the independent reference."""
    rows, designed = graded
    assert set(designed["ada"].values()) == {"right"}
    assert rows["ada"]["total"] == rows["ada"]["maximum"]
    assert [v for v in designed["slip"].values() if v != "right"] == ["wrong"]
    early = designed["early"]
    assert [w for w, v in early.items() if v == "wrong"] == [(HEAD + "K", 2, 0)]
    through = [w for w, v in early.items() if v == "follow_through"]
    assert through and {w[0] for w in through} == {HEAD + "raw_scores"}
    assert {w[2] for w in through} == {2}  # only the column of key 2 changed
    # u from their rounded Q and K elsewhere: reader rounding (full points)
    assert Fraction(rows["early"]["total"]) == 40 - 1 - Fraction(len(through), 2)
    assert "v03" in rows["copy"]["note"]
    assert list(designed["copy"].values()).count("wrong") > 12

