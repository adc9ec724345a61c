"""Exercise sheets a teaching assistant uses as they are (issue 22).

* the draws are fair: scores a student can exponentiate (|s| <= 4), no saturated
  softmax row (largest weight <= 0.9), a feed-forward activation whose input has both
  signs in the worked token's row, no nonzero asked value that rounds to 0 -- checked
  on the variant files with an independent float64 forward (tests/blocks_reference.py);
* every key.json line, parsed and evaluated here (fractions, mpmath for exp/sqrt/sin/cos:
  tests/recompute.py, a small grammar, never eval), gives the key's student value at the
  sheet's decimals, reads only numbers the sheet gives or earlier answers as written, and
  `symformer grade` accepts that value (right or reader rounding);
* sheets and keys carry no internal names, say each caption once, and define the
  functions and symbols their equations use (d_k, SiLU, RoPE's m, theta_i and R).
"""

from __future__ import annotations

import csv
import json
import re
import tomllib
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from blocks_reference import forward
from hypothesis import given, settings
from hypothesis import strategies as st
from recompute import correctly_rounded, evaluate

from symformer.cli import main
from symformer.example import load_example
from symformer.exercise import SheetRequest, make_exercise
from symformer.exercise.cells import entries_of
from symformer.exercise.settings import Settings

LLAMA_COUNT = 8
COUNT = 12
DEFAULTS = Settings()
#: float64 slack on the certified bounds (the engine proves them exactly)
SLACK = 1e-9


def write(made, root: Path) -> Path:
    for name, text in made.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def exercises(tmp_path_factory) -> dict[str, tuple[object, Path]]:
    """12 variants of the default exercise and 8 of llama_style's (RoPE, causal: no
    prefilter, so every draw is certified -- the expensive one), a few
    of the built-in feed-forward block (ReLU) and of llama_style's gated activation
    (SiLU), each generated once and written to its own folder."""
    requests = {"default": SheetRequest(None, COUNT, 5),
                "llama": SheetRequest("llama_style", LLAMA_COUNT, 5, max_work=0),  # no prefilter
                "relu": SheetRequest(None, 3, 5, ask=("layer1.ffn.*",)),
                "silu": SheetRequest("llama_style", 2, 5, ask=("layer1.ffn.activation",))}
    out = {}
    for name, request in requests.items():
        made = make_exercise(request)
        out[name] = (made, write(made, tmp_path_factory.mktemp(name)))
    return out


def reference(root: Path, vid: str) -> dict[str, np.ndarray]:
    """The variant's stages in float64, from its example file (independent forward)."""
    return forward(load_example(root / vid / "example.toml"))


def fair_draw(values: dict[str, np.ndarray], asked: list[str], decimals: int,
              token: int) -> None:
    """Assert the fairness constraints on a float64 forward of one variant."""
    for name in asked:  # the default: one token's path, only its entries are asked
        mask = np.zeros(values[name].shape, dtype=bool)
        for i, j in entries_of(asked, name, values[name].shape):
            mask[i, j] = True
        v = np.where(mask, values[name], np.nan)
        finite = v[np.isfinite(v)]
        # stated: 0, or at least half a unit of the last decimal (rounds to nonzero)
        assert np.all((np.abs(finite) < SLACK) | (np.abs(finite) >= 0.5 * 10.0 ** -decimals
                                                  - SLACK)), name
        if name.endswith(".weights"):
            scores = values[name.replace(".weights", ".scores")]
            rows = mask.any(axis=1)
            scores = np.where(rows[:, None], scores, np.nan)
            assert np.all(np.abs(scores[np.isfinite(scores)]) <= DEFAULTS.max_score + SLACK)
            for w, s, asked_row in zip(values[name], scores, rows):
                if asked_row and np.isfinite(s).sum() >= 2:
                    assert w.max() <= DEFAULTS.max_weight + SLACK, (name, w)
        if name.endswith(".ffn.activation"):
            source = name.replace(".activation", ".gate" if f"{name[:-11]}.gate" in values
                                  else ".hidden")
            row = values[source][token]
            assert (row > SLACK).any() and (row < -SLACK).any(), (source, row)


@pytest.mark.parametrize("which", ["default", "llama", "relu", "silu"])
def test_every_draw_is_fair(exercises, which):
    made, root = exercises[which]
    manifest = (root / "manifest.toml").read_text()
    token = int(re.search(r"^token = (\d+)", manifest, re.M).group(1))
    for v in made.variants:
        fair_draw(reference(root, v.id), made.asked, 2, token)


@given(st.integers(0, 2 ** 63 - 1))
@settings(max_examples=3, deadline=None)
def test_any_seed_gives_fair_draws(seed):
    made = make_exercise(SheetRequest(None, 1, seed))
    values = forward(made.variants[0].example)
    fair_draw(values, made.asked, 2, 1)


def answers_of(key: dict) -> dict[tuple[str, int, int], dict]:
    return {(e["stage"], e["row"], e["col"]): e for e in key["entries"]}


@pytest.mark.parametrize("which", ["default", "llama", "relu", "silu"])
def test_key_json_lines_recompute_at_the_sheets_decimals(exercises, which):
    """Each line, evaluated here, rounds to the student's value; its literals are the
    given numbers at D places (as the sheet prints them), earlier answers as the key
    prints them (D places), a weight the sheet gives exactly, or a softmax line's
    exponential of a printed score."""
    made, root = exercises[which]
    checked = 0
    for v in made.variants:
        key = json.loads((root / v.id / "key.json").read_text())
        decimals, given_places = key["decimals"], key["given_decimals"]
        assert (decimals, given_places) == (2, 2) and key["asked"] == made.asked
        values = reference(root, v.id)
        weights = _numbers(root / v.id / "example.toml")
        printed: set[Fraction] = set()   # earlier answers as written
        scores: set[Fraction] = set()    # the scaled scores as written
        given = {abs(Fraction(f"{x:.{given_places}f}")) for name, table in values.items()
                 if name not in made.asked for x in np.ravel(table) if np.isfinite(x)}
        for name in made.asked:
            for e in (e for e in key["entries"] if e["stage"] == name):
                exact = values[name][e["row"], e["col"]]
                if e["line"] is None:  # a masked score
                    assert e["exact"] == e["student"] == "-inf" and exact == -np.inf
                    continue
                # the exact value's rounding, against float64 (the margin keeps it clear)
                assert Fraction(e["exact"]) == Fraction(f"{exact:.{decimals}f}"), e
                value = evaluate(e["line"])
                assert correctly_rounded(value, decimals) == Fraction(e["student"]), e
                for literal in re.findall(r"\d+\.\d+", e["line"]):
                    places = len(literal.split(".")[1])
                    number = Fraction(literal)
                    assert (places == given_places and number in given) or \
                        (places == decimals and (number in printed or number in weights)) \
                        or number in weights or _rounded_exp(number, places, scores), \
                        (literal, e)
                checked += 1
            # the student's answers as the key writes them (its own chain)
            printed |= {abs(Fraction(e["student"])) for e in key["entries"]
                        if e["stage"] == name and e["student"] != "-inf"}
            scores |= {Fraction(e["student"]) for e in key["entries"]
                       if e["stage"] == name and e["student"] != "-inf"
                       and name.endswith(".scores")}
    assert checked >= 4 * (1 if which in ("relu", "silu") else 0) + 1


def _rounded_exp(number: Fraction, places: int, scores: set[Fraction]) -> bool:
    """Whether ``number`` is e^s correctly rounded to ``places`` for a printed score s
    (mpmath at 50 digits): a softmax line's exponential."""
    mpmath.mp.dps = 50
    half = mpmath.mpf(1) / 2 * mpmath.mpf(10) ** -places
    value = mpmath.mpf(number.numerator) / number.denominator
    return any(abs(mpmath.exp(mpmath.mpf(s.numerator) / s.denominator) - value) <= half
               for s in scores)


def _numbers(path: Path) -> set[Fraction]:
    """The magnitude of every number of a variant file (the weights a sheet prints
    exactly are among them), read with tomllib."""
    found: set[Fraction] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, (int, str)) and not isinstance(value, bool):
            try:
                found.add(abs(Fraction(str(value))))
            except ValueError:
                pass
    walk(tomllib.loads(path.read_text(), parse_float=str))
    return found


def test_grade_accepts_the_students_path(exercises, tmp_path):
    """An answer file holding every key.json student value gets only `right` and
    `reader_rounding` from `symformer grade`, and at least one variant has a value of
    the student's path that differs from the exact rounding (the point of the key)."""
    made, root = exercises["default"]
    answers = tmp_path / "answers"
    answers.mkdir()
    differ = 0
    for v in made.variants[:6]:
        key = json.loads((root / v.id / "key.json").read_text())
        lines = [f"student,{v.id}", f"variant,{v.id}", "stage,row,col,value"]
        for e in key["entries"]:
            lines.append(f"{e['stage']},{e['row']},{e['col']},{e['student']}")
            differ += e["student"] != e["exact"]
        (answers / f"{v.id}.csv").write_text("\n".join(lines) + "\n")
    assert main(["grade", str(answers), "--key", str(root), "--out",
                 str(tmp_path / "grades"), "--quiet"]) == 0
    rows = list(csv.DictReader((tmp_path / "grades" / "summary.csv").open()))
    assert len(rows) == 6
    for row in rows:
        assert int(row["wrong"]) == int(row["follow_through"]) == int(row["missing"]) == 0
        assert row["total"] == row["maximum"], row
    assert differ > 0


#: Internal names a page must not show: stage names, snake_case names, code points.
INTERNAL = re.compile(r"layer\d+\.|head\d+\.|kv_head|raw_scores|\\_|[A-Za-z]+_[A-Za-z]{2,}"
                      r"|U\+[0-9A-F]{4}|\bffn\.|\\mathrm\{(?:gamma|beta)\}")


@pytest.mark.parametrize("which", ["default", "llama", "relu", "silu"])
def test_sheets_and_keys_show_no_internal_names(exercises, which):
    made, root = exercises[which]
    for v in made.variants[:3]:
        for name in ("sheet.tex", "sheet.md", "key.tex", "key.md"):
            text = (root / v.id / name).read_text()
            body = re.sub(r"\\label\{[^}]*\}", "",  # labels are never printed
                          text.split("\\begin{document}")[-1])
            found = INTERNAL.findall(body)
            assert not found, (v.id, name, found[:5])
            assert "Values correctly rounded" not in text  # the caption says it once
            assert not re.search(r"rounded to \d decimals?\.[^\n]*rounded to", text)


def test_sheets_define_every_function_and_symbol(exercises):
    """RoPE: the position m, the frequencies theta_i and the rotation R; SiLU and the
    gated product; d_k for the scaled scores -- each before the steps use it."""
    llama = (exercises["llama"][1] / "v01" / "sheet.md").read_text()
    given = llama.index("## Given")
    if r"\cos(m\theta)" in llama:  # the equation q cos(m theta) + q R sin(m theta)
        needed = (r"position $m$", r"\theta_i = b^{-2i/d_k}", r"m\theta_i",
                  r"(a, b) \mapsto (-b, a)", r"\tilde{q}_{i} = q_{i} \cos(m\theta_i)",
                  "d_k = 2")
    else:  # the equation q_{pos,l} cos(pos 10000^{-2l/d}) - q_{pos,l+d/2} sin(...)
        assert r"10000^{-2 l/d}" in llama
        needed = (r"position $\mathit{pos}$", r"\mathit{pos} \cdot 10000^{-2l/d}",
                  "d = d_k = 2", r"(q_{\mathit{pos},l}, ")
    for text in needed:
        assert text in llama[:given], text
    silu = (exercises["silu"][1] / "v01" / "sheet.md").read_text()
    given = silu.index("## Given")
    assert r"\operatorname{SiLU}(x) = \frac{x}{1 + e^{-x}}" in silu[:given]
    # \, written \thinspace in the Markdown (a Markdown parser would eat the comma's
    # backslash before MathJax sees it)
    assert r"a_j = \operatorname{SiLU}(g_j)\thinspace  h_j" in silu[:given]
    # the equation, from the gated product's proved source: SiLU written out (layer 1
    # of two: every symbol carries the layer)
    assert (r"a^{(1)}_{i,j} &= \frac{g^{(1)}_{i,j}}{1 + \exp \mathopen{}\left( -g^{(1)}_{i,j} "
            r"\mathclose{}\right)} h^{(1)}_{i,j}") in silu
    relu = (exercises["relu"][1] / "v01" / "sheet.md").read_text()
    assert r"\operatorname{ReLU}(x) = \max(0, x)" in relu


def test_sheets_leave_room_for_working(exercises):
    made, root = exercises["default"]
    tex = (root / "v01" / "sheet.tex").read_text()
    assert tex.count(r"\textit{Working:}") == len(made.asked)
    assert tex.count(r"\needspace") == len(made.asked)
    assert r"\underline{\hphantom{-000.0000}}" in tex  # ruled cells for 4 digits and sign


@given(st.integers(0, 2 ** 63 - 1))
@settings(max_examples=10, deadline=None)
def test_prefilter_rejects_only_what_the_certified_check_rejects(seed):
    """A draw the float prefilter rejects for a fairness reason (score, saturated,
    stated, given, spread, path) is rejected by the certified check too."""
    from symformer.blocks import derive
    from symformer.example.loader import example_from_dict, parse_example
    from symformer.exercise import read_template
    from symformer.exercise.draw import Stream, draw
    from symformer.exercise.generate import Search, _check
    from symformer.exercise.prefilter import prefilter
    from symformer.exercise.settings import read_settings
    from symformer.exercise.toml_text import toml_text

    data, source, _ = read_template(None)
    config = read_settings(data.pop("exercise", None), source)
    g = derive(example_from_dict(data, source))
    asked = [s.name for s in g if s.name.startswith("layer1.head1.")]
    quick = prefilter(data, g, asked, 2, config.margin, config)
    for attempt in range(60):
        drawn = draw(data, config, Stream(seed, 1, attempt))
        found = quick.rejection(drawn)
        if found is None or found[0] == "margin":
            continue
        text = toml_text(drawn)
        reason, _ = _check(lambda text=text: parse_example(text, "draw.toml"), asked, 2,
                           config,
                           Search(), 1)
        assert reason is not None, found
        return
