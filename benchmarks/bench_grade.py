"""Grading cost: 100 answer files from a few variants, time per student.

A key folder is built by hand (as ``symformer exercise`` writes it): the built-in
example and three copies with head 1's W_Q changed, the seven stages of head 1
asked at 2 decimals.  100 answer files (CSV) are made from them: all right, a
rounding slip, an early error carried through (later stages recomputed in float64
from the student's own rounded numbers), a copy of another variant's key, and
garbage lines, 20 of each.  Reported: the key's derivations (once per variant), the
grading of every file (per student, best of 3), and the whole command with its
output files.

Run: ``python benchmarks/bench_grade.py``
"""

from __future__ import annotations

import random
import tempfile
import time
from contextlib import redirect_stdout
from fractions import Fraction
from io import StringIO
from pathlib import Path

import numpy as np

from symformer.cli import main as cli
from symformer.example.loader import builtin_text
from symformer.grade.answers import read_answers
from symformer.grade.grader import VERDICTS, Grader
from symformer.grade.key import load_key

HEAD = "layer1.head1."
ASKED = [HEAD + s for s in ("Q", "K", "V", "raw_scores", "scores", "weights", "output")]
W_Q = "W_Q = [[0.25, 0], [0.25, 0], [0, 0.25], [0, 0.25]]"
OTHER_W_Q = ["W_Q = [[0.5, 0], [0.25, 0], [0, 0.25], [0, 0.75]]",
             "W_Q = [[0.25, 0.25], [0, 0.5], [0, 0.25], [0.5, 0]]",
             "W_Q = [[0, 0.5], [0.25, 0], [0.75, 0.25], [0, 0]]"]
STUDENTS = 100


def make_key(folder: Path) -> None:
    texts = [builtin_text()] + [builtin_text().replace(W_Q, w) for w in OTHER_W_Q]
    lines = ["[exercise]", "format = 1", 'template = "<built-in>"', "seed = 1",
             "decimals = 2", 'margin = "1/20"', "token = 1",
             "asked = [" + ", ".join(f'"{a}"' for a in ASKED) + "]"]
    for k, text in enumerate(texts, start=1):
        (folder / f"v{k:02d}").mkdir(parents=True)
        (folder / f"v{k:02d}" / "example.toml").write_text(text)
        lines += ["", "[[variant]]", f'id = "v{k:02d}"', f'example = "v{k:02d}/example.toml"']
    (folder / "manifest.toml").write_text("\n".join(lines) + "\n")


def later_stages(t: dict[str, np.ndarray]) -> None:
    """Raw scores, scores, weights and output from the student's own rounded numbers."""
    t[HEAD + "raw_scores"] = np.round(t[HEAD + "Q"] @ t[HEAD + "K"].T, 2)
    t[HEAD + "scores"] = np.round(t[HEAD + "raw_scores"] / np.sqrt(2), 2)
    e = np.exp(t[HEAD + "scores"])
    t[HEAD + "weights"] = np.round(e / e.sum(axis=1, keepdims=True), 2)
    t[HEAD + "output"] = np.round(t[HEAD + "weights"] @ t[HEAD + "V"], 2)


def make_answers(folder: Path, key) -> list[Path]:
    rng = random.Random(1)
    ids = list(key.variants)
    tables = {vid: {s: np.array([[float(x) for x in row] for row in
                                 key.variants[vid].correct(s)]) for s in ASKED} for vid in ids}
    kinds = ("right", "slip", "early", "copy", "garbage")
    paths = []
    for n in range(STUDENTS):
        vid, kind = ids[n % len(ids)], kinds[n % len(kinds)]
        t = {s: m.copy() for s, m in tables[vid].items()}
        extra: list[str] = []
        if kind == "slip":
            t[HEAD + "V"][rng.randrange(4), rng.randrange(2)] += 0.01
            later_stages(t)
        elif kind == "early":
            t[HEAD + "K"][rng.randrange(4), rng.randrange(2)] += 0.5
            later_stages(t)
        elif kind == "copy":
            t = {s: m.copy() for s, m in tables[ids[(n + 1) % len(ids)]].items()}
        elif kind == "garbage":
            extra = ["a line that is no entry", f"{HEAD}Q,0,0,1.2.3", f"{HEAD}V,9,9,1"]
        lines = [f"student,Student {n:03d}", f"variant,{vid}", "stage,row,col,value"]
        for s in ASKED:
            for (i, j), x in np.ndenumerate(t[s]):
                lines.append(f"{s},{i},{j},{x:.2f}")
        path = folder / f"student{n:03d}.csv"
        path.write_text("\n".join(lines + extra) + "\n")
        paths.append(path)
    return paths


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_key(folder / "key")
        start = time.perf_counter()
        key = load_key(folder / "key")
        for v in key.variants.values():
            for s in ASKED:
                v.correct(s)
        t_key = time.perf_counter() - start
        (folder / "answers").mkdir()
        paths = make_answers(folder / "answers", key)
        sheets = [read_answers(p) for p in paths]
        best = float("inf")
        for _ in range(3):
            grader = Grader(key)
            start = time.perf_counter()
            grades = [grader.grade(s) for s in sheets]
            best = min(best, time.perf_counter() - start)
        start = time.perf_counter()
        with redirect_stdout(StringIO()):
            status = cli(["grade", str(folder / "answers"), "--key", str(folder / "key"),
                          "--out", str(folder / "out")])
        t_cli = time.perf_counter() - start
    entries = sum(len(g.entries) for g in grades)
    counts = {v: sum(g.count(v) for g in grades) for v in VERDICTS}
    total = sum((g.total for g in grades), Fraction(0))
    print(f"key: {len(key.variants)} variants derived and rounded ({len(ASKED)} stages): "
          f"{t_key * 1000:.0f} ms ({t_key * 1000 / len(key.variants):.0f} ms per variant)")
    print(f"grading {STUDENTS} answer files ({entries} entries), best of 3: "
          f"{best:.2f} s, {best * 1000 / STUDENTS:.1f} ms per student")
    print("verdicts: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS)
          + f"; mean score {float(total / STUDENTS):.1f} of {float(grades[0].maximum):.0f}")
    print(f"`symformer grade` on the folder (fresh key, reading, grading, writing "
          f"summary.csv and 100 feedback files, in-process): {t_cli:.2f} s "
          f"(exit status {status})")


if __name__ == "__main__":
    main()
