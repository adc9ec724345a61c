"""`symformer grade`: planted answer files get exactly the designed grades.

The key folders are built by hand (manifest.toml + two variant example files: the
built-in example and a copy with head 1's W_Q changed).  Every expected value is
computed here independently: the block's head 1 in mpmath at 50 digits, steps from
printed numbers with Python fractions, roundings with the decimal module.
"""

from __future__ import annotations

import csv
import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from symformer.cli import main
from symformer.example.loader import builtin_text
from symformer.grade.answers import read_answers
from symformer.grade.grader import Grader
from symformer.grade.key import load_key

mpmath.mp.dps = 50
HEAD = "layer1.head1."
ASKED = [HEAD + s for s in ("Q", "K", "V", "scores", "weights", "output")]
W_Q_V01 = "W_Q = [[0.25, 0], [0.25, 0], [0, 0.25], [0, 0.25]]"
W_Q_V02 = "W_Q = [[0.5, 0], [0.25, 0], [0, 0.25], [0, 0.75]]"
HALF = Fraction(1, 200)

MANIFEST = """\
[exercise]
format = 1
template = "template.toml"
seed = 7
decimals = 2
margin = "1/20"
token = 1
asked = [{asked}]

[[variant]]
id = "v01"
example = "v01/example.toml"

[[variant]]
id = "v02"
example = "v02/example.toml"
"""


# -- the independent reference --------------------------------------------------------
def _example(text: str) -> dict:
    return tomllib.loads(text, parse_float=Fraction)


def _texts() -> dict[str, str]:
    v01 = builtin_text()
    assert W_Q_V01 in v01
    return {"v01": v01, "v02": v01.replace(W_Q_V01, W_Q_V02)}


def r2(x) -> Fraction:
    """Round to 2 decimals, half to even, from an mpmath number or a Fraction."""
    if isinstance(x, Fraction):
        d = Decimal(x.numerator) / Decimal(x.denominator)  # 28 digits: ample here
    else:
        d = Decimal(mpmath.nstr(x, 45, strip_zeros=False))
    return Fraction(d.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def matmul(a, b):
    return [[sum((a[i][k] * b[k][j] for k in range(len(b))), start=0 * a[0][0])
             for j in range(len(b[0]))] for i in range(len(a))]


def mp(m):
    return [[mpmath.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else v
             for v in row] for row in m]


def scores_of(q, k):
    qt = mp(q)
    kt = mp([list(col) for col in zip(*k)])
    return [[v / mpmath.sqrt(2) for v in row] for row in matmul(qt, kt)]


def softmax(s):
    out = []
    for row in s:
        e = [mpmath.exp(v) for v in mp([row])[0]]
        out.append([v / sum(e) for v in e])
    return out


def rounded(m):
    return [[r2(v) for v in row] for row in m]


class Reference:
    """One variant's head 1, exactly (mpmath) and as printed at 2 decimals."""

    def __init__(self, text: str) -> None:
        ex = _example(text)
        vocab, table = ex["vocab"], ex["embeddings"]
        ids = [vocab.index(t) for t in ex["tokens"]]
        d = len(table[0])
        pe = [[(mpmath.sin if c % 2 == 0 else mpmath.cos)(
            pos / mpmath.power(10000, mpmath.mpf(c - c % 2) / d)) for c in range(d)]
            for pos in range(len(ids))]
        x = [[table[t][c] + pe[p][c] for c in range(d)] for p, t in enumerate(ids)]
        head = ex["layer"][0]["head"][0]
        w = {n: [[Fraction(v) for v in row] for row in head[n]] for n in ("W_Q", "W_K", "W_V")}
        q, k, v = (matmul(x, mp(w[n])) for n in ("W_Q", "W_K", "W_V"))
        s = scores_of(q, k)
        a = softmax(s)
        o = matmul(a, v)
        self.exact = dict(zip(ASKED, (q, k, v, s, a, o)))
        self.key = {name: rounded(m) for name, m in self.exact.items()}
        # reader rounding: Q, K, V from the input rounded to 2 decimals; the rest from
        # the key's printed previous tables
        xr = [[r2(mpmath.mpf(0) + e) for e in row] for row in x]
        # (unrounded: the step's value from the printed numbers)
        self.reader = {HEAD + n[-1]: matmul(xr, w[n]) for n in ("W_Q", "W_K", "W_V")}
        self.reader.update(steps(self.key))


def steps(tables: dict) -> dict:
    """Scores, weights and output recomputed from printed Q, K / scores / weights, V
    (exact for the output, a rational step; 50 digits for the others), unrounded."""
    return {HEAD + "scores": scores_of(tables[HEAD + "Q"], tables[HEAD + "K"]),
            HEAD + "weights": softmax(tables[HEAD + "scores"]),
            HEAD + "output": matmul(tables[HEAD + "weights"], tables[HEAD + "V"])}


def close(value, a: Fraction) -> bool:
    """|value - a| <= half a unit of the 2nd decimal (exactly for fractions)."""
    if isinstance(value, Fraction):
        return abs(value - a) <= HALF
    return abs(value - mpmath.mpf(a.numerator) / a.denominator) <= mpmath.mpf(1) / 200


def carried(tables: dict, start: int) -> dict:
    """A student who recomputes every stage from ``ASKED[start]`` on from their own."""
    out = {k: [row[:] for row in v] for k, v in tables.items()}
    for name in ASKED[start:]:
        out[name] = rounded(steps(out)[name])
    return out


def _product_range(a: Fraction, b: Fraction) -> tuple[Fraction, Fraction]:
    corners = [(a + x) * (b + y) for x in (-HALF, HALF) for y in (-HALF, HALF)]
    return min(corners), max(corners)


def _dot_range(row, col) -> tuple[Fraction, Fraction]:
    """The exact range of sum_k row_k col_k over every input within its rounding
    (each input appears once, so interval arithmetic is exact)."""
    ranges = [_product_range(a, b) for a, b in zip(row, col)]
    return sum(r[0] for r in ranges), sum(r[1] for r in ranges)


def step_ranges(tables: dict) -> dict:
    """The exact range of every entry of scores, weights and output over every input
    within half a unit of the student's printed previous numbers."""
    q, k, s, a, v = (tables[HEAD + n] for n in ("Q", "K", "scores", "weights", "V"))
    root2 = mpmath.sqrt(2)
    scores = [[tuple(mp([list(_dot_range(qi, kj))])[0][t] / root2 for t in (0, 1))
               for kj in k] for qi in q]
    weights = []
    for row in s:
        lo = [mpmath.exp(mp([[x - HALF]])[0][0]) for x in row]
        hi = [mpmath.exp(mp([[x + HALF]])[0][0]) for x in row]
        weights.append([(lo[j] / (lo[j] + sum(hi) - hi[j]), hi[j] / (hi[j] + sum(lo) - lo[j]))
                        for j in range(len(row))])
    output = [[_dot_range(ai, [vk[j] for vk in v]) for j in range(len(v[0]))] for ai in a]
    return {HEAD + "scores": scores, HEAD + "weights": weights, HEAD + "output": output}


def meets(bounds, a: Fraction) -> bool:
    """Does [low, high] meet [a - half, a + half]?"""
    low, high = (b if not isinstance(b, Fraction) else mpmath.mpf(b.numerator) / b.denominator
                 for b in bounds)
    lo_a = mpmath.mpf((a - HALF).numerator) / (a - HALF).denominator
    hi_a = mpmath.mpf((a + HALF).numerator) / (a + HALF).denominator
    return not (high < lo_a or low > hi_a)


def expected(ref: Reference, answers: dict) -> dict:
    """The designed verdict of every entry: right, reader rounding, follow-through
    (the step from the student's own numbers as printed, or from any numbers within
    their rounding: the exact range, which the grader's enclosure contains), wrong."""
    own = steps(answers)
    ranges = step_ranges(answers)
    verdicts = {}
    for name in ASKED:
        for i, row in enumerate(answers[name]):
            for j, a in enumerate(row):
                if close(ref.exact[name][i][j], a):
                    verdicts[name, i, j] = "right"
                elif close(ref.reader[name][i][j], a):
                    verdicts[name, i, j] = "reader_rounding"
                elif name in own and (close(own[name][i][j], a)
                                      or meets(ranges[name][i][j], a)):
                    verdicts[name, i, j] = "follow_through"
                else:
                    verdicts[name, i, j] = "wrong"
    return verdicts


@pytest.fixture(scope="module")
def refs() -> dict[str, Reference]:
    return {vid: Reference(text) for vid, text in _texts().items()}


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("key")
    for vid, text in _texts().items():
        (folder / vid).mkdir()
        (folder / vid / "example.toml").write_text(text)
    (folder / "manifest.toml").write_text(
        MANIFEST.format(asked=", ".join(f'"{a}"' for a in ASKED)))
    return folder


@pytest.fixture(scope="module")
def grader(key_dir) -> Grader:
    return Grader(load_key(key_dir))


def write_csv(path: Path, student: str, variant: str, tables: dict,
              lines: list[str] = ()) -> Path:
    rows = [f"student,{student}", f"variant,{variant}", "stage,row,col,value"]
    for name in ASKED:
        for i, row in enumerate(tables[name]):
            for j, v in enumerate(row):
                rows.append(f"{name},{i},{j},{Decimal(v.numerator) / Decimal(v.denominator):.2f}")
    path.write_text("\n".join([*rows, *lines]) + "\n")
    return path


def verdicts_of(grade) -> dict:
    return {(e.stage, e.row, e.col): e.verdict for e in grade.entries}


# -- planted answers ------------------------------------------------------------------
def test_all_right(tmp_path, refs, grader):
    g = grader.grade(read_answers(write_csv(tmp_path / "ada.csv", "Ada", "v01",
                                            refs["v01"].key)))
    assert set(verdicts_of(g).values()) == {"right"}
    assert g.total == g.maximum == 8 * 3 + 16 * 2 + 8
    assert not g.extra and not g.copied


def test_reader_rounding_of_q_think(tmp_path, refs, grader):
    """The post's 1.59: exact 1.5954..., from the printed input (4.84 + 1.54)/4 = 1.595."""
    ref = refs["v01"]
    assert ref.key[HEAD + "Q"][1][0] == Fraction("1.60")
    tables = dict(ref.key, **{HEAD + "Q": [r[:] for r in ref.key[HEAD + "Q"]]})
    tables[HEAD + "Q"][1][0] = Fraction("1.59")
    g = grader.grade(read_answers(write_csv(tmp_path / "r.csv", "R", "v01", tables)))
    assert verdicts_of(g) == expected(ref, tables)
    assert verdicts_of(g)[HEAD + "Q", 1, 0] == "reader_rounding"
    assert g.total == g.maximum  # reader rounding earns full points by default


def _slip(ref: Reference, name: str) -> tuple[int, int, Fraction]:
    """An entry of ``name`` where writing the key value + 0.01 is neither right nor
    reader rounding."""
    for i, row in enumerate(ref.key[name]):
        for j, v in enumerate(row):
            slip = v + Fraction(1, 100)
            if not close(ref.reader[name][i][j], slip):
                return i, j, slip
    raise AssertionError("no entry to slip")


def test_one_rounding_slip(tmp_path, refs, grader):
    """V off by 0.01 in one entry; the output recomputed from it (follow-through)."""
    ref = refs["v01"]
    i, j, slip = _slip(ref, HEAD + "V")
    tables = {k: [r[:] for r in v] for k, v in ref.key.items()}
    tables[HEAD + "V"][i][j] = slip
    tables = carried(tables, ASKED.index(HEAD + "output"))
    g = grader.grade(read_answers(write_csv(tmp_path / "slip.csv", "Slip", "v01", tables)))
    got = verdicts_of(g)
    assert got == expected(ref, tables)
    assert got[HEAD + "V", i, j] == "wrong"
    assert [w for w, v in got.items() if v == "wrong"] == [(HEAD + "V", i, j)]
    for e in g.entries:
        if e.verdict == "follow_through":
            assert e.stage == HEAD + "output" and e.first_wrong == (HEAD + "V", i, j)


def test_early_error_carried_through(tmp_path, refs, grader, key_dir):
    """K[2,0] wrong by 0.5, every later stage computed from it consistently."""
    ref = refs["v01"]
    tables = {k: [r[:] for r in v] for k, v in ref.key.items()}
    tables[HEAD + "K"][2][0] += Fraction(1, 2)
    tables = carried(tables, ASKED.index(HEAD + "scores"))
    path = write_csv(tmp_path / "early.csv", "Early", "v01", tables)
    g = grader.grade(read_answers(path))
    got = verdicts_of(g)
    assert got == expected(ref, tables)
    through = [w for w, v in got.items() if v == "follow_through"]
    assert {w[0] for w in through} == {HEAD + "scores", HEAD + "weights", HEAD + "output"}
    assert [w for w, v in got.items() if v == "wrong"] == [(HEAD + "K", 2, 0)]
    assert g.total == g.maximum - 1 - Fraction(len(through), 2)
    assert {g.entry(w).first_wrong for w in through} == {(HEAD + "K", 2, 0)}
    # scores row i, column j is computed from Q row i and K row j only
    assert grader.feeding(grader.key.variants["v01"], (HEAD + "scores", 1, 3)) == {
        (HEAD + s, r, c) for s, r in (("Q", 1), ("K", 3)) for c in (0, 1)}
    # the feedback names the first step that went wrong, and the correct values
    out = tmp_path / "out"
    assert main(["grade", str(path), "--key", str(key_dir), "--out", str(out), "--quiet"]) == 0
    md = (out / "feedback" / "early.md").read_text()
    correct_k = f"{Decimal(ref.key[HEAD + 'K'][2][0].numerator) / 100:.2f}"
    assert f"The first step that went wrong: `{HEAD}K[2,0]`" in md
    assert f"correct `{correct_k}`" in md
    assert md.count("**follow-through**") == len(through)
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert summary[0]["follow_through"] == str(len(through))
    assert Fraction(summary[0]["total"]) == g.total


def test_copied_from_another_variant(tmp_path, refs, grader):
    """v02's correct answers handed in as v01: Q wrong, K and V right, the rest follows."""
    tables = refs["v02"].key
    g = grader.grade(read_answers(write_csv(tmp_path / "copy.csv", "Copy", "v01", tables)))
    got = verdicts_of(g)
    assert got == expected(refs["v01"], tables)
    assert all(got[HEAD + s, i, j] == "right" for s in "KV" for i in range(4) for j in range(2))
    assert any(got[HEAD + "Q", i, j] == "wrong" for i in range(4) for j in range(2))
    assert "from variant v02's key" in g.copied


def test_garbage_missing_and_extra(tmp_path, refs, grader, key_dir):
    ref = refs["v01"]
    path = write_csv(tmp_path / "messy.csv", "Messy", "v01", ref.key, [
        "this line is not an entry",
        f"{HEAD}Q,two,0,1.00",                # a row that is no number
        f"{HEAD}raw_scores,0,0,2.00",         # not asked
        f"{HEAD}nonsense,0,0,2.00",           # no such stage
        f"{HEAD}V,4,0,1.00",                  # outside the stage
    ])
    text = path.read_text().splitlines()
    lines = {}
    for n, line in enumerate(text, start=1):
        if line.startswith(f"{HEAD}K,1,1,"):
            text[n - 1] = f"{HEAD}K,1,1,1.1.4"          # unreadable
            lines["unreadable"] = n
        elif line.startswith(f"{HEAD}V,0,0,"):
            text[n - 1] = f"{HEAD}V,0,0,"                # blank: missing
        elif line.startswith(f"{HEAD}weights,3,3,"):
            text[n - 1] = ""                             # deleted: missing
    text.append(f"{HEAD}Q,0,0,9.99")  # a second, different answer: unreadable
    path.write_text("\n".join(text) + "\n")
    g = grader.grade(read_answers(path))
    got = verdicts_of(g)
    assert got[HEAD + "K", 1, 1] == "unreadable"
    assert g.entry((HEAD + "K", 1, 1)).line == lines["unreadable"]
    assert got[HEAD + "Q", 0, 0] == "unreadable"
    assert got[HEAD + "V", 0, 0] == got[HEAD + "weights", 3, 3] == "missing"
    assert sum(v != "right" for v in got.values()) == 4
    assert len(g.extra) == 5
    assert [r.line for r in g.extra] == sorted(r.line for r in g.extra)
    out = tmp_path / "out"
    assert main(["grade", str(path), "--key", str(key_dir), "--out", str(out), "--quiet"]) == 0
    md = (out / "feedback" / "messy.md").read_text()
    assert f"line {lines['unreadable']}" in md and "## Not graded" in md


def test_toml_answers_and_points(tmp_path, refs, key_dir):
    """TOML answers (bare numbers or strings), an unreadable entry, an unknown key;
    a points file: 2 points an entry, the weights 1 an entry."""
    ref = refs["v01"]
    rows = []
    for k, name in enumerate(ASKED):
        quote = '"' if k else ""  # Q as bare TOML numbers, the rest as strings
        table = [[f"{quote}{Decimal(v.numerator) / Decimal(v.denominator):.2f}{quote}"
                  for v in row] for row in ref.key[name]]
        rows.append(f'"{name}" = [' + ", ".join("[" + ", ".join(r) + "]" for r in table)
                    + "]")
    first = rows[1].index("[[") + 2
    rows[1] = rows[1][:first] + '"x"' + rows[1][rows[1].index(",", first):]  # K[0][0]
    answers = tmp_path / "toml_student.toml"
    answers.write_text('student = "Tom L."\nvariant = "v01"\ncomment = "hi"\n\n[answers]\n'
                       + "\n".join(rows) + "\n")
    points = tmp_path / "points.toml"
    points.write_text(f'entry = 2\nfollow_through = "1/4"\n[stage]\n"{HEAD}weights" = 1\n')
    out = tmp_path / "out"
    assert main(["grade", str(answers), "--key", str(key_dir), "--out", str(out), "--points",
                 str(points), "--quiet"]) == 0
    (row,) = list(csv.DictReader((out / "summary.csv").open()))
    assert row["student"] == "Tom L." and row["variant"] == "v01"
    assert row[HEAD + "weights"] == "16" and row[HEAD + "Q"] == "16"
    assert row[HEAD + "K"] == "14" and row["unreadable"] == "1" and row["extra"] == "1"
    assert row["maximum"] == str(2 * (8 * 3 + 16 + 8) + 16)
    assert row["total"] == str(2 * (8 * 3 + 16 + 8) + 16 - 2)
    md = (out / "feedback" / "toml_student.md").read_text()
    assert f"`{HEAD}K[0,0]`" in md and "line 7" in md and "unknown key 'comment'" in md


def test_summary_is_whole_class(tmp_path, refs, key_dir):
    files = [write_csv(tmp_path / f"s{k}.csv", f"S{k}", vid, refs[vid].key)
             for k, vid in enumerate(("v01", "v02", "v01"))]
    out = tmp_path / "out"
    assert main(["grade", *map(str, files), "--key", str(key_dir), "--out", str(out),
                 "--quiet"]) == 0
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["student"] for r in rows] == ["S0", "S1", "S2"]
    assert [r["variant"] for r in rows] == ["v01", "v02", "v01"]
    assert all(r["total"] == r["maximum"] == "64" for r in rows)
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["s0.md", "s1.md", "s2.md"]
    # on two local processes: the same files, in the same order (symformer.parallel)
    (tmp_path / "s1.csv").write_text("not,a\nsheet\n")  # a failure is named, others kept
    parallel, serial = tmp_path / "par", tmp_path / "ser"
    for folder, jobs in ((serial, "1"), (parallel, "2")):
        assert main(["grade", *map(str, files), "--key", str(key_dir), "--out", str(folder),
                     "--quiet", "--keep-going", "--jobs", jobs]) == 1
    for name in ("summary.csv", "feedback/s0.md", "feedback/s2.md"):
        assert (parallel / name).read_text() == (serial / name).read_text()
    assert "s1.csv" in (parallel / "summary.csv").read_text()


@given(st.sets(st.integers(0, 63), max_size=12), st.sets(st.integers(0, 63), max_size=12))
def test_any_garbling_is_graded_not_fatal(tmp_path_factory, refs, grader, garbled, blank):
    """Entries turned into text or left blank are counted, whatever they are."""
    blank -= garbled
    path = write_csv(tmp_path_factory.mktemp("h") / "h.csv", "H", "v01", refs["v01"].key)
    text = path.read_text().splitlines()
    for k in garbled:
        text[3 + k] = text[3 + k].rsplit(",", 1)[0] + ",n/a"
    for k in blank:
        text[3 + k] = text[3 + k].rsplit(",", 1)[0] + ","
    path.write_text("\n".join(text) + "\n")
    g = grader.grade(read_answers(path))
    assert g.count("unreadable") == len(garbled) and g.count("missing") == len(blank)
    assert g.count("right") == 64 - len(garbled) - len(blank)


# -- bad input: one line naming the file and line, exit 2 ---------------------------------
def run(args: list[str], capsys, out: Path | None = None) -> tuple[int, str]:
    """``grade ARGS`` (with ``--out OUT`` when ARGS has none: it is required)."""
    if "--out" not in args:
        assert out is not None, "grade requires --out"
        args = [*args, "--out", str(out)]
    status = main(["grade", *args])
    return status, capsys.readouterr().err.strip()


def test_bad_key(tmp_path, capsys, refs):
    path = write_csv(tmp_path / "a.csv", "A", "v01", refs["v01"].key)
    out = tmp_path / "out"
    status, err = run([str(path), "--key", str(tmp_path / "nokey")], capsys, out)
    assert status == 2 and "nokey: no such folder" in err and len(err.splitlines()) == 1
    (tmp_path / "k").mkdir()
    status, err = run([str(path), "--key", str(tmp_path / "k")], capsys, out)
    assert status == 2 and "k: a folder without manifest.toml" in err
    (tmp_path / "k" / "manifest.toml").write_text("[exercise]\nformat = 1\ndecimals = \n")
    status, err = run([str(path), "--key", str(tmp_path / "k")], capsys, out)
    assert status == 2 and "manifest.toml: invalid TOML" in err and "line 3" in err
    (tmp_path / "k" / "manifest.toml").write_text(
        MANIFEST.format(asked='"layer1.head1.Q"').replace("decimals = 2", 'decimals = "2"'))
    status, err = run([str(path), "--key", str(tmp_path / "k")], capsys, out)
    assert status == 2 and "manifest.toml, line 5: decimals must be" in err
    (tmp_path / "k" / "manifest.toml").write_text(MANIFEST.format(asked='"layer1.head1.Q"'))
    status, err = run([str(path), "--key", str(tmp_path / "k")], capsys, out)
    assert status == 2 and "manifest.toml, line 11: variant v01's example" in err
    (tmp_path / "k" / "v01").mkdir()
    (tmp_path / "k" / "v01" / "example.toml").write_text(builtin_text())
    (tmp_path / "k" / "manifest.toml").write_text(MANIFEST.format(asked='"layer1.head1.Qx"'))
    status, err = run([str(path), "--key", str(tmp_path / "k")], capsys, out)
    assert status == 2 and "manifest.toml, line 8: " in err and "layer1.head1.Q" in err


def test_bad_answer_files(tmp_path, capsys, refs, key_dir):
    good = write_csv(tmp_path / "good.csv", "G", "v01", refs["v01"].key)
    unknown = write_csv(tmp_path / "unknown.csv", "U", "v09", refs["v01"].key)
    out = tmp_path / "out"
    status, err = run([str(good), str(unknown), "--key", str(key_dir), "--out", str(out)],
                      capsys)
    assert status == 2 and f"{unknown}, line 2: unknown variant id 'v09'" in err
    assert not out.exists()  # nothing written
    novariant = tmp_path / "novariant.csv"
    novariant.write_text("student,N\nlayer1.head1.Q,0,0,1\n")
    status, err = run([str(novariant), "--key", str(key_dir), "--out", str(out)], capsys)
    assert status == 2 and f"{novariant}: no variant id" in err
    broken = tmp_path / "broken.toml"
    broken.write_text('variant = "v01"\n[answers]\n"layer1.head1.Q" = [[1.2.3]]\n')
    status, err = run([str(broken), "--key", str(key_dir), "--out", str(out)], capsys)
    assert status == 2 and f"{broken}: invalid TOML" in err and "line 3" in err
    status, err = run([str(tmp_path / "absent.csv"), "--key", str(key_dir)], capsys, out)
    assert status == 2 and "absent.csv: no such file" in err
    # --keep-going: the good file is graded, the others listed as skipped
    status = main(["grade", str(good), str(unknown), str(broken), "--key", str(key_dir), "--out",
                   str(out), "--keep-going", "--quiet"])
    assert status == 1
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["total"] for r in rows] == ["64", "", ""]
    assert rows[1]["note"].startswith("not graded: ") and "v09" in rows[1]["note"]


@pytest.mark.parametrize("text, line, words", [
    ("entry = 1\nbonus = 2\n", 2, "unknown key 'bonus'"),
    ("follow_through = 2\n", 1, "follow_through must be from 0 to 1"),
    ("entry = \"x\"\n", 1, "not a number"),
    ("[stage]\n\"layer1.head1.raw_scores\" = 3\n", 2, "is not an asked stage"),
])
def test_bad_points_file(tmp_path, capsys, refs, key_dir, text, line, words):
    good = write_csv(tmp_path / "good.csv", "G", "v01", refs["v01"].key)
    points = tmp_path / "points.toml"
    points.write_text(text)
    status, err = run([str(good), "--key", str(key_dir), "--points", str(points)], capsys,
                      tmp_path / "out")
    assert status == 2 and f"points.toml, line {line}" in err and words in err


def test_keep_going_skips_a_folder_without_answers(tmp_path, capsys, refs, key_dir):
    """Attack 5, M9: a folder with no answer files stopped a --keep-going run; now it is
    reported on stderr, listed in summary.csv as not graded, and the others are graded."""
    good = write_csv(tmp_path / "good.csv", "G", "v01", refs["v01"].key)
    empty = tmp_path / "dir.csv"
    empty.mkdir()
    out = tmp_path / "out"
    status, err = run([str(good), str(empty), "--key", str(key_dir), "--out", str(out)],
                      capsys)
    assert status == 2 and "dir.csv: a folder without .csv or .toml answer files" in err
    assert not out.exists()
    status = main(["grade", str(empty), str(good), "--key", str(key_dir), "--out", str(out),
                   "--keep-going", "--quiet"])
    err = capsys.readouterr().err
    assert status == 1 and "skipped: " in err and "a folder without" in err
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert sorted(r["total"] for r in rows) == ["", "64"]
    note = next(r["note"] for r in rows if not r["total"])
    assert note.startswith("not graded: ") and "a folder without" in note
