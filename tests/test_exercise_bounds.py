"""`symformer exercise` ends within a bound the user knows, and says so (issue 20).

The reproducer ex_spread10k.toml (the built-in example with every weight drawn from
{0, 1e-100}: every softmax row is flat to 1e-99, so no draw meets min_spread = 1/10,
and attempts = 10000) ran 156 s before exiting 2; the search now stops at the work
limit, naming the constraint with its counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from symformer.blocks.cost import EXERCISE_START
from symformer.blocks.work import estimated_work, operations
from symformer.cli import main
from symformer.example.loader import builtin_text, load_example
from symformer.exercise.generate import (
    ATTEMPT_PASSES,
    PREFILTERED_SHARE,
    SHEET_PASSES,
    attempt_work,
    sheet_work,
)
from symformer.words import plural

SPREAD = '\n[exercise]\nweights = { low = 0, high = "1e-100", step = "1e-100" }\n' \
         'attempts = 10000\nstated = false\n'  # values of 1e-100 round to 0: not the point


def run(args: list[str]) -> int:
    """The command's exit status (argparse's errors exit through SystemExit)."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code)


@pytest.fixture
def spread10k(tmp_path) -> Path:
    path = tmp_path / "ex_spread10k.toml"
    path.write_text(builtin_text() + SPREAD)
    return path


def test_attempt_work_counts_forward_passes():
    """A derived draw costs ATTEMPT_PASSES forward passes, a prefiltered one half a pass."""
    example = load_example(None)
    forward = estimated_work(example)
    assert forward > 0
    assert attempt_work(example) == (ATTEMPT_PASSES * forward, forward // PREFILTERED_SHARE)
    assert sheet_work(example) == SHEET_PASSES * forward


def test_hopeless_search_stops_at_the_work_limit(spread10k, tmp_path, capsys):
    example = load_example(None)
    full, cheap = attempt_work(example)
    # the float prefilter rejects every flat draw (half a pass each); a draw starts only
    # while a derived one would still fit: room for 12 draws (after the command's start)
    limit = EXERCISE_START + sheet_work(example) + full + 11 * cheap + cheap // 2
    out = tmp_path / "o"
    assert run(["exercise", str(spread10k), "--variants", "1", "--seed", "1", "--out",
                str(out), "--max-work", str(limit), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "variant v01: no draw met `spread`: 12 of 12 rejected by it" in err
    assert f"stopped at the work limit of {limit:,} operations (--max-work) after 12 " \
           f"draws of the 10000 attempts allowed" in err
    assert "softmax weights closer together than min_spread = 1/10" in err
    assert not out.exists()


def test_attempts_run_out_before_the_limit(spread10k, tmp_path, capsys):
    spread10k.write_text(spread10k.read_text().replace("attempts = 10000", "attempts = 1"))
    assert run(["exercise", str(spread10k), "--variants", "1", "--seed", "1", "--out",
                str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no draw met `spread`: 1 of 1 rejected by it (all 1 attempt of [exercise] " \
           "attempts used)" in err


def test_too_many_variants_for_the_limit_are_refused_before_any_draw(tmp_path, capsys):
    example = load_example(None)
    least = EXERCISE_START + 5 * (attempt_work(example)[0] + sheet_work(example))
    assert run(["exercise", "--variants", "5", "--seed", "1", "--out", str(tmp_path / "o"),
                "--max-work", str(least - 1)]) == 2
    err = capsys.readouterr().err
    assert f"5 variants (at least one draw each, {attempt_work(example)[0]:,} operations " \
           f"a draw" in err
    assert f"is estimated at {operations(least)} operations" in err
    assert "a variant for its sheets and key" in err
    assert "--max-work" in err and not (tmp_path / "o").exists()


def test_one_variant_one_stage_in_the_singular(tmp_path, capsys):
    assert main(["exercise", "--variants", "1", "--seed", "3", "--ask", "layer1.head1.Q",
                 "--out", str(tmp_path / "o"), "--quiet", "--max-work", "0"]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"wrote 9 files to {re.escape(str(tmp_path / 'o'))}: 1 variant, "
                        r"1 asked stage; (1 draw|\d+ draws) rejected \(.*\)", line), line
    sheet = (tmp_path / "o" / "v01" / "sheet.md").read_text()
    assert "rounded to 2 decimals" in sheet


def test_one_decimal_in_the_singular(tmp_path):
    assert main(["exercise", "--variants", "1", "--seed", "3", "--ask", "layer1.head1.Q",
                 "--decimals", "1", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    sheet = (tmp_path / "o" / "v01" / "sheet.md").read_text()
    assert "rounded to 1 decimal." in sheet and "1 decimals" not in sheet


@pytest.mark.parametrize("seed", ["-1", "1" * 32, "x"])
def test_seed_out_of_range_names_the_range(tmp_path, capsys, seed):
    assert run(["exercise", "--variants", "1", "--seed", seed, "--out",
                str(tmp_path / "o")]) == 2
    assert "--seed: expected a whole number from 0 to 9223372036854775807" \
        in capsys.readouterr().err


@pytest.mark.parametrize(("n", "word", "text"), [(0, "file", "0 files"), (1, "file", "1 file"),
                                                 (2, "variant", "2 variants")])
def test_plural(n, word, text):
    assert plural(n, word) == text


def test_a_long_search_reports_its_progress(spread10k, monkeypatch):
    """The search says how far it is every NOTE_EVERY draws (the progress line)."""
    from symformer.errors import InputError
    from symformer.exercise import SheetRequest, generate, make_exercise

    every = 3
    monkeypatch.setattr(generate, "NOTE_EVERY", every)  # a note every 3 draws: fast
    example = load_example(None)
    draws = 2 * every + 1
    full, cheap = attempt_work(example)  # every flat draw is prefiltered: half a pass
    limit = EXERCISE_START + sheet_work(example) + full + (draws - 1) * cheap + cheap // 2
    notes: list[str] = []
    with pytest.raises(InputError, match=f"{draws} of {draws} rejected"):
        make_exercise(SheetRequest(str(spread10k), 1, 1, max_work=limit), searching=notes.append)
    assert [n.split(",")[0] for n in notes] == [f"variant v01: {every} draws tried",
                                               f"variant v01: {2 * every} draws tried"]
    assert notes[-1].endswith("% of the work limit")
