"""symformer exercise: variants, the certified rounding margin, sheets, keys, bad input.

References are independent of the engine: a float64 NumPy pass
(tests/blocks_reference.py) for every key value, an mpmath pass at 60 digits written
here from the published formulas (reading the variant files with tomllib) for the
rounding margin and the softmax spread, and exact fractions for the margin test.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import tomllib
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
from blocks_reference import forward
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.cli import main
from symformer.engine.arbmath import precision
from symformer.example import load_example
from symformer.exercise import SheetRequest, make_exercise
from symformer.exercise.draw import Stream
from symformer.exercise.margin import clears_margin, margin_ball
from symformer.exercise.toml_text import number_text

SEED, COUNT, DECIMALS = 11, 4, 2
ASKED = ["layer1.head1.Q", "layer1.head1.K", "layer1.head1.V", "layer1.head1.raw_scores",
         "layer1.head1.scores", "layer1.head1.weights", "layer1.head1.output"]


@pytest.fixture(scope="module")
def made():
    """Four variants of the built-in example."""
    return make_exercise(SheetRequest(None, COUNT, SEED, decimals=DECIMALS))


def key_tables(markdown: str, asked: list[str] = ASKED) -> dict[str, list[list[str]]]:
    """The filled table under each asked stage's heading in a key (Markdown): the
    sections after "Given" are the asked stages, in the asked order (the headings are
    the stages' titles, never their internal names)."""
    tables = {}
    sections = [s for s in markdown.split("\n## ")[1:] if not s.startswith("Given")]
    for name, section in zip(asked, sections):
        body = section.partition("\n")[2].split("Worked lines")[0]
        rows = [line for line in body.splitlines() if re.match(r"\| \d+ \|", line)]
        tables[name] = [
            [n for cell in row.split("|")[3:-1]
             for n in re.findall(r"-?\d+\.\d+", re.sub(r"<[^>]*>", "", cell))]
            for row in rows]
    return tables


def mp_head(path: Path, digits: int = 60) -> dict[str, list[list[mpmath.mpf]]]:
    """Layer 1, head 1 of a variant file at ``digits`` digits (tomllib + mpmath)."""
    mpmath.mp.dps = digits
    data = tomllib.loads(path.read_text(), parse_float=str)
    num = mpmath.mpf
    table = {w: [num(str(v)) for v in row] for w, row in zip(data["vocab"],
                                                              data["embeddings"])}
    d = len(data["embeddings"][0])
    x = []
    for pos, token in enumerate(data["tokens"]):
        row = list(table[token])
        for i in range(0, d, 2):  # sinusoidal: sin(pos / 10000^(i/d)), cos(...)
            angle = pos / mpmath.power(10000, mpmath.mpf(i) / d)
            row[i] += mpmath.sin(angle)
            if i + 1 < d:
                row[i + 1] += mpmath.cos(angle)
        x.append(row)
    head = data["layer"][0]["head"][0]

    def project(w):
        m = [[num(str(v)) for v in r] for r in head[w]]
        return [[mpmath.fsum(xr[k] * m[k][j] for k in range(d)) for j in range(len(m[0]))]
                for xr in x]

    q, k, v = project("W_Q"), project("W_K"), project("W_V")
    raw = [[mpmath.fsum(a * b for a, b in zip(qi, kj)) for kj in k] for qi in q]
    scores = [[u / mpmath.sqrt(len(q[0])) for u in row] for row in raw]
    weights = []
    for row in scores:
        e = [mpmath.exp(s) for s in row]
        weights.append([t / mpmath.fsum(e) for t in e])
    out = [[mpmath.fsum(a * v[j][c] for j, a in enumerate(row)) for c in range(len(v[0]))]
           for row in weights]
    return {**dict(zip(ASKED, (q, k, v, raw, scores, weights, out))), "input": x}


def boundary_distance(value: mpmath.mpf, decimals: int) -> mpmath.mpf:
    """How far ``value`` lies from a rounding boundary at ``decimals`` decimals, in units
    of the last decimal (0: exactly halfway; 1/2: on a printed value)."""
    t = value * 10 ** decimals - mpmath.mpf(1) / 2
    return abs(t - mpmath.nint(t))


def run(args: list[str]) -> int:
    """The command's exit status (argparse's errors exit through SystemExit)."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code)


def written(made, tmp_path: Path) -> Path:
    for name, text in made.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_manifest_follows_the_contract(made):
    manifest = tomllib.loads(made.files["manifest.toml"])
    ex = manifest["exercise"]
    assert (ex["format"], ex["seed"], ex["decimals"], ex["token"]) == (1, SEED, DECIMALS, 1)
    assert Fraction(ex["margin"]) == Fraction(1, 100)
    assert ex["asked"] == ASKED
    ids = [v["id"] for v in manifest["variant"]]
    assert ids == ["v01", "v02", "v03", "v04"]
    for v in manifest["variant"]:
        assert v["example"] == f"{v['id']}/example.toml"
        for name in ("example.toml", "sheet.tex", "sheet.md", "key.tex", "key.md"):
            assert f"{v['id']}/{name}" in made.files
    assert {"key-all.tex", "key-all.md"} <= set(made.files)


def key_entries(made, vid: str) -> list[dict]:
    import json

    return json.loads(made.files[f"{vid}/key.json"])["entries"]


def test_every_key_value_agrees_with_float64(made, tmp_path):
    """Each asked entry's exact rounding in key.json is the float64 value rounded (the
    margin keeps float64's error far from any boundary); the key's tables hold the
    student's-path values of key.json, on the asked rows only (one token's path)."""
    root = written(made, tmp_path)
    checked = 0
    for v in made.variants:
        reference = forward(load_example(root / v.id / "example.toml"))
        tables = key_tables(made.files[f"{v.id}/key.md"])
        entries = key_entries(made, v.id)
        for e in entries:
            x = reference[e["stage"]][e["row"]][e["col"]]
            assert e["exact"] == f"{x:.{DECIMALS}f}".replace("-0.00", "0.00"), (v.id, e)
            checked += 1
        for name in ASKED:
            rows = sorted({e["row"] for e in entries if e["stage"] == name})
            student = {(e["row"], e["col"]): e["student"] for e in entries
                       if e["stage"] == name}
            expected = [[student[r, c] for c in range(len(reference[name][0]))]
                        for r in rows]
            assert tables[name] == expected, (v.id, name)
        assert f"## Variant {v.id}" in made.files["key-all.md"]
    # one token's path: q and u, s, alpha, o of "think" (2 + 3*4 + 2), every k and v
    assert checked == COUNT * (2 + 8 + 8 + 3 * 4 + 2)


def test_no_asked_value_near_a_rounding_boundary(made, tmp_path):
    """mpmath at 60 digits: every asked value is more than the margin (1/100 of a unit
    of the last decimal) from every boundary (k + 1/2) 10^-D; softmax rows spread."""
    root = written(made, tmp_path)
    margin = mpmath.mpf(1) / 100
    for v in made.variants:
        values = mp_head(root / v.id / "example.toml")
        for e in key_entries(made, v.id):
            value = values[e["stage"]][e["row"]][e["col"]]
            t = value * 10 ** DECIMALS - mpmath.mpf(1) / 2
            assert abs(t - mpmath.nint(t)) > margin, (v.id, e["stage"], value)
        row = values["layer1.head1.weights"][1]
        assert max(row) - min(row) >= mpmath.mpf(1) / 10


def test_same_seed_same_bytes_other_seed_other_numbers(made):
    again = make_exercise(SheetRequest(None, COUNT, SEED, decimals=DECIMALS))
    assert again.files == made.files
    other = make_exercise(SheetRequest(None, 2, SEED + 1, decimals=DECIMALS))
    assert other.files["v01/example.toml"] != made.files["v01/example.toml"]
    assert other.files["v02/example.toml"] != made.files["v02/example.toml"]
    texts = [made.files[f"{v.id}/example.toml"].split("\n", 3)[3] for v in made.variants]
    assert len(set(texts)) == COUNT  # one variant per student


def test_variants_keep_the_template_and_draw_from_the_ranges(made, tmp_path):
    template = tomllib.loads(made.files["v01/example.toml"], parse_float=str)
    builtin = load_example()
    example = load_example(written(made, tmp_path) / "v01/example.toml")
    assert example.tokens == builtin.tokens and example.vocab == builtin.vocab
    assert example.layers[0].eps == builtin.layers[0].eps
    for row in template["embeddings"]:
        assert all(isinstance(x, int) and 0 <= x <= 2 for x in row)
    for name in ("W_Q", "W_K", "W_V"):
        for row in template["layer"][0]["head"][1][name]:
            assert all(Fraction(str(x)) in {Fraction(k, 4) for k in range(-2, 3)} for x in row)


def test_sheet_has_empty_tables_and_key_has_worked_lines(made):
    sheet, key = made.files["v01/sheet.md"], made.files["v01/key.md"]
    assert "fill in every entry" in sheet and "Worked lines" not in sheet
    assert sheet.count("*Working:*") == len(ASKED)  # room for working under every table
    assert all(not rows or all(r == [] for r in rows)
               for name, rows in key_tables(sheet).items() if name in ASKED)
    assert "Worked lines for \u201cthink\u201d (position 1)" in key
    assert r"\hphantom" in made.files["v01/sheet.tex"]
    assert "W_{Q}" in sheet and "rounded to 2 decimals" in sheet


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_sheet_and_key_compile(made):
    from symformer.latex.compile import compile_log

    for name in ("v01/sheet.tex", "v01/key.tex"):
        pdf, log = compile_log({"main.tex": made.files[name]})
        assert pdf.startswith(b"%PDF")
        assert "Undefined control sequence" not in log


def test_cli_writes_byte_identical_folders(tmp_path, capsys):
    for out in ("a", "b"):
        args = ["exercise", "--variants", "2", "--seed", "3", "--out", str(tmp_path / out),
                "--quiet"]
        assert main(args) == 0
    assert "draws rejected" in capsys.readouterr().out
    names = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*")
                   if p.is_file())
    assert len(names) == 1 + 2 * 6 + 2  # manifest, 2 x (example, sheets, keys, key.json)
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize(("args", "message"), [
    (["--ask", "layer9.*"], "--ask 'layer9.*' matches no stage"),
    (["--variants", "0"], "--variants: must be from 1 to 500"),
    (["--variants", "501"], "--variants: must be from 1 to 500"),
    (["--margin", "1/2"], "--margin: the margin must be at least 0 and below 1/2"),
    (["--margin", "x"], "--margin: 'x' is not a number"),
    (["--decimals", "7"], "--decimals: must be from 0 to 6"),
    (["--token", "9"], "token position 9 is out of range"),
])
def test_bad_options(tmp_path, capsys, args, message):
    base = ["exercise", "--variants", "2", "--seed", "1", "--out", str(tmp_path / "o")]
    if "--variants" in args:
        base = ["exercise", "--seed", "1", "--out", str(tmp_path / "o")]
    assert run([*base, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def _template(tmp_path: Path, table: str) -> Path:
    from symformer.example.loader import builtin_text

    path = tmp_path / "template.toml"
    path.write_text(builtin_text() + "\n[exercise]\n" + table)
    return path


def test_impossible_margin_names_the_constraint_and_stops(tmp_path, capsys):
    path = _template(tmp_path, "attempts = 5\nmargin = \"0.49\"\n")
    assert run(["exercise", str(path), "--variants", "1", "--seed", "1",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no draw met `margin`: 5 of 5 rejected by it (all 5 attempts of [exercise] " \
        "attempts used)" in err and "5 put an asked value within 49/100" in err \
        and str(path) in err


def test_flat_softmax_is_rejected(tmp_path, capsys):
    # all weights 0: every score is 0, every softmax row uniform
    path = _template(tmp_path, "attempts = 3\nmargin = 0\n"
                               "weights = { low = 0, high = 0, step = 1 }\n")
    assert run(["exercise", str(path), "--variants", "1", "--seed", "1",
                 "--ask", "layer1.head1.weights", "--decimals", "2",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no draw met `spread`: 3 of 3 rejected by it" in err
    assert "softmax weights closer together than min_spread = 1/10" in err


@pytest.mark.parametrize(("table", "message"), [
    ("colour = 1\n", "[exercise]: unknown key 'colour'"),
    ("weights = { low = 1, high = 0 }\n", "[exercise].weights: high (0) is below low (1)"),
    ("weights = { step = 0 }\n", "[exercise].weights.step: must be positive"),
    ("attempts = 0\n", "[exercise].attempts: expected a whole number"),
])
def test_bad_exercise_table(tmp_path, capsys, table, message):
    path = _template(tmp_path, table)
    assert run(["exercise", str(path), "--variants", "1", "--seed", "1",
                 "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


@given(st.integers(-10**6, 10**6), st.integers(1, 10**4), st.integers(0, 4),
       st.fractions(Fraction(0), Fraction(49, 100), max_denominator=1000))
def test_margin_check_matches_exact_fractions(num, den, decimals, margin):
    """The certified ball check agrees with exact rational arithmetic on a point."""
    value = Fraction(num, den)
    scale = 10 ** decimals
    near = [Fraction(2 * k + 1, 2) for k in range(math.floor(value * scale) - 2,
                                                   math.ceil(value * scale) + 2)]
    expected = all(abs(value * scale - h) > margin for h in near)
    with precision(256):
        ball = arb(num) / den
        assert clears_margin(ball, decimals, margin_ball(margin)) == expected


def test_margin_check_refuses_a_wide_ball():
    with precision(256):
        wide = arb("1.234") + arb(0, 0.01)  # 1.224 .. 1.244: holds the boundary 1.235
        assert not clears_margin(wide, 2, margin_ball(Fraction(1, 100)))
        assert clears_margin(arb(1234) / 1000, 2, margin_ball(Fraction(1, 100)))


@given(st.fractions(max_denominator=1000).filter(lambda x: abs(x) < 10**6))
def test_numbers_are_written_exactly(x):
    text = number_text(x)
    parsed = tomllib.loads(f"v = {text}", parse_float=str)["v"]
    assert Fraction(str(parsed)) == x


@given(st.integers(0, 2**64), st.integers(1, 50), st.integers(1, 1000))
def test_stream_is_deterministic_and_in_range(seed, variant, n):
    a, b = Stream(seed, variant, 0), Stream(seed, variant, 0)
    draws = [a.below(n) for _ in range(5)]
    assert draws == [b.below(n) for _ in range(5)]
    assert all(0 <= k < n for k in draws)


def test_stream_is_sha256_of_fixed_text():
    """The draws are SHA-256 of fixed text, each digest read 3 bits at a time from the
    top (rejection sampling): the same on every machine and Python version, recomputed
    here with hashlib alone."""
    import hashlib

    expected, counter = [], 0
    while len(expected) < 100:  # more than one digest's worth (85 draws of 3 bits)
        digest = hashlib.sha256(f"symformer-exercise:7:1:0:{counter}".encode()).digest()
        counter += 1
        bits = format(int.from_bytes(digest, "big"), "0256b")
        for k in (int(bits[i:i + 3], 2) for i in range(0, 255, 3)):
            if k < 5:
                expected.append(k)
    stream = Stream(7, 1, 0)
    drawn = [stream.below(5) for _ in range(100)]
    assert drawn == expected[:100]


def test_prefilter_decides_nothing(made, monkeypatch):
    """Without the float prefilter (every draw built and certified) a seed gives the
    same files and as many rejected draws: it only rejects draws earlier."""
    assert made.search.prefiltered > 0
    # two variants (each has its own stream): 159 rejected draws, every one certified
    fast = make_exercise(SheetRequest(None, 2, SEED, decimals=DECIMALS, max_work=0))
    monkeypatch.setattr("symformer.exercise.generate.prefilter", lambda *args: None)
    slow = make_exercise(SheetRequest(None, 2, SEED, decimals=DECIMALS, max_work=0))
    assert slow.search.prefiltered == 0 and fast.search.prefiltered > 0
    assert slow.files == fast.files
    assert slow.files["v02/key.json"] == made.files["v02/key.json"]
    # a draw failing two constraints may be counted under another reason (the prefilter
    # finds the clear failures, in the certified order): the total is the same
    assert slow.search.total_rejected == fast.search.total_rejected > 100


@given(st.integers(0, 2 ** 63 - 1), st.sampled_from([0, 1, 2]))
@settings(max_examples=25, deadline=None)
def test_prefilter_rejects_only_draws_within_the_margin(seed, decimals):
    """mpmath at 60 digits: a draw the prefilter rejects has an asked value within the
    margin of a rounding boundary (so the certified check would reject it too), and a
    draw it lets through has none clearly within it (it misses no clear case)."""
    from symformer.blocks import derive
    from symformer.example.loader import example_from_dict
    from symformer.exercise import read_template
    from symformer.exercise.draw import draw
    from symformer.exercise.prefilter import prefilter
    from symformer.exercise.settings import read_settings
    from symformer.exercise.toml_text import toml_text

    data, source, _ = read_template(None)
    config = read_settings(data.pop("exercise", None), source)
    quick = prefilter(data, derive(example_from_dict(data, source)), ASKED, decimals,
                      config.margin)
    drawn = draw(data, config, Stream(seed, 1, 0))
    failed = quick.failure(drawn)
    with tempfile.TemporaryDirectory() as folder:  # hypothesis: no tmp_path fixture
        path = Path(folder) / "draw.toml"
        path.write_text(toml_text(drawn))
        values = mp_head(path)
    margin = mpmath.mpf(config.margin.numerator) / config.margin.denominator
    if failed is not None:
        stage, index = failed.split("[")
        i, j = map(int, index.rstrip("]").split(","))
        assert boundary_distance(values[stage][i][j], decimals) < margin
        return
    closest = min(boundary_distance(v, decimals) for stage in ASKED
                  for row in values[stage] for v in row)
    assert closest > margin - mpmath.mpf(10) ** -6


def test_prefilter_is_off_when_it_cannot_place_the_numbers(tmp_path):
    """A template whose asked stages read a table the prefilter does not place (a
    decoder's) gets none: every draw is then built and certified.  The encoder's
    numbers it places: its verdict on the template's own numbers is mpmath's."""
    from symformer.blocks import derive
    from symformer.example.loader import example_from_dict
    from symformer.exercise import read_template
    from symformer.exercise.prefilter import prefilter
    from symformer.exercise.toml_text import toml_text

    data, source, _ = read_template("encoder_decoder")
    g = derive(example_from_dict(data, source))
    decoder = [s.name for s in g if s.side == "decoder" and s.op.parameters()][:1]
    assert decoder and prefilter(data, g, decoder, 2, Fraction(1, 100)) is None
    path = tmp_path / "template.toml"
    path.write_text(toml_text(data))
    q = mp_head(path)["layer1.head1.Q"]
    # first entry within the margin: none; Q[2,1]; Q[1,0]
    for margin in (Fraction(1, 1000), Fraction(1, 100), Fraction(49, 100)):
        near = [f"layer1.head1.Q[{i},{j}]" for i, row in enumerate(q)
                for j, v in enumerate(row)
                if boundary_distance(v, 2) < mpmath.mpf(margin.numerator) / margin.denominator]
        quick = prefilter(data, g, ["layer1.head1.Q"], 2, margin)
        assert quick.failure(data) == (near[0] if near else None), margin


def test_worked_lines_substitute_the_given_numbers(made):
    """The key's worked lines for q use the input row exactly as the sheet gives it
    (at the sheet's D = 2 decimals), so a reader can recompute them from the sheet."""
    sheet, key = made.files["v01/sheet.md"], made.files["v01/key.md"]
    given = re.search(r"^\| 1 \| think \|(.*)$", sheet, re.M).group(1)
    x = re.findall(r"-?\d+\.\d+", given)
    assert len(x) == 4 and all(len(v.split(".")[1]) == DECIMALS for v in x)
    lines = key.split("Worked lines", 1)[1].split("\\end{aligned}")[0]
    numeric = [line for line in lines.splitlines() if line.startswith("&= ")]
    used = {n for line in numeric for n in re.findall(r"(-?\d+\.\d+) \\cdot", line)}
    assert used and used <= set(x)


def test_the_given_numbers_lead_to_the_key(made, tmp_path):
    """Q, K and V recomputed exactly (fractions) from the input rows as the sheet gives
    them (rounded to 4 decimals with the decimal module, from mpmath at 60 digits) round
    to the key's values and clear the margin too: a student working from the sheet gets
    the key's answers."""
    from decimal import ROUND_HALF_EVEN, Decimal

    root = written(made, tmp_path)
    margin = Fraction(1, 100)
    for v in made.variants:
        values = mp_head(root / v.id / "example.toml")
        given = [[Fraction(Decimal(mpmath.nstr(e, 40, strip_zeros=False)).quantize(
            Decimal("0.0001"), rounding=ROUND_HALF_EVEN)) for e in row]
            for row in values["input"]]
        head = tomllib.loads((root / v.id / "example.toml").read_text(),
                             parse_float=str)["layer"][0]["head"][0]
        for name, w in (("Q", "W_Q"), ("K", "W_K"), ("V", "W_V")):
            weights = [[Fraction(str(e)) for e in row] for row in head[w]]
            exact = values[f"layer1.head1.{name}"]
            for i, row in enumerate(given):
                for j in range(len(weights[0])):
                    t = sum(row[k] * weights[k][j] for k in range(len(row))) * 10 ** DECIMALS
                    assert abs(t - math.floor(t) - Fraction(1, 2)) > margin
                    assert round(t) == int(mpmath.nint(exact[i][j] * 10 ** DECIMALS))
