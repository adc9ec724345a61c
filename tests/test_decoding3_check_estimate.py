"""``check`` on claims about a generation run (``step3.kept``): the steps the check has
to generate are in its work estimate, so a limit that affords the check without them
refuses it before any work, naming the time, and the measured CPU over the estimate
stays in ``tests/test_work_estimate.py``'s band."""

from __future__ import annotations

from fractions import Fraction

import pytest
from test_work_estimate import BAND, measured

from symformer.blocks.cost import PER_SECOND, estimate
from symformer.cli import main
from symformer.example import load_example
from symformer.example.decoding import Decoding

CLAIMS = """
[decoding]
temperature = 0.7
top_p = 0.9
seed = 1
steps = 3

[[claim]]
stage = "step3.kept"
values = [[1, 1, 1, 1, 1]]
"""


@pytest.fixture
def claims(tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text(CLAIMS, encoding="utf-8")
    return str(path)


def test_the_generation_is_in_the_estimate_and_a_refusal_names_its_time(claims, capsys):
    example = load_example("gpt2_style")
    plain = estimate("check", example, claims=1, numbers=5)
    rule = Decoding(temperature=Fraction(7, 10), top_p=Fraction(9, 10), seed=1)
    generating = estimate("check", example, claims=1, numbers=5, generated_steps=3,
                          decoding=rule)
    assert generating >= plain + estimate("generate", example, steps=3, decoding=rule) \
        - estimate("generate", example, steps=0)
    assert main(["check", claims, "--example", "gpt2_style", "--max-work",
                 str(plain + 1)]) == 2
    err = capsys.readouterr().err.strip()
    assert "estimated at" in err and "of CPU" in err and "\n" not in err
    assert main(["check", claims, "--example", "gpt2_style", "--max-work",
                 str(generating + 1)]) in (0, 1)
    assert "step3.kept" in capsys.readouterr().out


def test_measured_work_over_estimate_stays_in_the_band(claims):
    work, seconds = measured(["check", claims, "--example", "gpt2_style"])
    ratio = seconds * PER_SECOND / work
    assert 1 / BAND <= ratio <= BAND, f"{seconds:.2f} s of CPU for an estimate of {work:,}"
