"""The fuzzer in the test suite: mutated shipped examples and claims, every command.

Each case (tests/fuzz_mutations.py) mutates a shipped example or the post's claims
(numbers, shapes, keys, strings, nesting, types) and runs one command on it through
``symformer.cli.main``; it must end with exit status 0, 1 or 2, without a traceback,
with a message when the status is 2, within the per-case bound.  The budget is small
and fixed (derandomized, so CI runs the same cases every time);
``SYMFORMER_FUZZ_CASES=N`` runs N cases per command instead, and
``python benchmarks/fuzz.py --cases N --seed S`` is the longer run of the same fuzzer.
"""

from __future__ import annotations

import os
import random
import tomllib

import pytest
from fuzz_mutations import (
    CLAIMS,
    DEFAULT_BOUND,
    EXAMPLES,
    NUMBERS,
    STRINGS,
    TYPE_SWAPS,
    Raw,
    dumps,
    make_case,
    run_case,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

#: Cases per command: 7 in the test suite (the whole file takes about 20 s of CPU);
#: ``SYMFORMER_FUZZ_CASES=200 python -m pytest tests/test_fuzz.py`` is a longer run of
#: the same derandomized cases and more.
CASES_PER_COMMAND = int(os.environ.get("SYMFORMER_FUZZ_CASES", "7"))

COMMANDS = ["derive", "export", "trace", "check", "prove", "crosscheck", "generate",
            "backward", "train"]


@pytest.mark.parametrize("path", [*EXAMPLES.values(), CLAIMS], ids=lambda p: p.stem)
def test_writer_round_trips_the_shipped_files(path):
    """The fuzzer's TOML writer gives back what tomllib read from the shipped file."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert tomllib.loads(dumps(doc)) == doc


def test_writer_writes_the_odd_values_as_toml():
    """Every replacement value the mutations use is written as valid TOML, and the
    strings (control characters, Unicode, quotes) come back unchanged."""
    values = [v for v in NUMBERS + STRINGS + TYPE_SWAPS if not isinstance(v, Raw)]
    doc = {"v": values, "k\x1bey": 1, "": "empty key"}
    assert tomllib.loads(dumps(doc)) == doc
    for raw in (v for v in NUMBERS + TYPE_SWAPS if isinstance(v, Raw)):
        if raw.text.replace("_", "").isdigit() and len(raw.text) > 4300:
            continue  # Python's own limit on integer literals (tomllib raises ValueError)
        tomllib.loads(dumps({"x": raw}))


@pytest.mark.parametrize("command", COMMANDS)
@settings(max_examples=CASES_PER_COMMAND, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],  # no shrinking: a hang costs a bound per run
          suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_mutated_inputs_end_with_a_status_and_no_traceback(command, seed):
    # Hypothesis picks the seed; the case comes from the same generator as the longer
    # run's (hypothesis's own `randoms()` favour degenerate draws: empty files, every
    # optional mutation at once).
    case = make_case(random.Random(seed), command=command)
    outcome = run_case(case, bound=DEFAULT_BOUND)
    assert not outcome.failed, (
        f"{outcome.report(case)}\nrerun: make_case(random.Random({seed}), command={command!r})")
