"""ε in the notation table as the notes print numbers (issue 39, item 6).

Below 10^-4 a number is set in scientific notation (``10^{-6}``, not "0.000001"), an
exact short decimal as it is (``0.001``); the table's ε is math, as every other number
of the notes is.  The expected strings are written by hand.
"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from symformer.notation import epsilon_values


def _stages(*eps):
    return [SimpleNamespace(op=SimpleNamespace(eps=e)) for e in eps]


@pytest.mark.parametrize(("eps", "latex", "text"), [
    (Fraction(1, 10**6), "10^{-6}", "10\u207b\u2076"),
    (Fraction(1, 10**5), "10^{-5}", "10\u207b\u2075"),
    (Fraction(25, 10**7), r"2.5 \times 10^{-6}", "2.5 \u00d7 10\u207b\u2076"),
    (Fraction(1, 1000), "0.001", "0.001"),
    (Fraction(1, 10**4), "0.0001", "0.0001"),
])
def test_epsilon_as_the_notes_print_numbers(eps, latex, text):
    (value,) = epsilon_values(_stages(eps, eps, 0))  # once, and a stage without ε: none
    assert (value.latex, value.text) == (latex, text)


def test_two_epsilons_each_once():
    values = epsilon_values(_stages(Fraction(1, 10**6), Fraction(1, 10**5), Fraction(1, 10**6)))
    assert [v.latex for v in values] == ["10^{-6}", "10^{-5}"]


def test_the_notes_table_sets_epsilon_as_math():
    from test_notation_meanings import notation_table
    from test_notation_scans import tex_files

    table = dict(notation_table(tex_files("builtin")["main.tex"]))
    meaning = table[r"$\varepsilon$"]
    assert meaning.endswith("(here $10^{-6}$)") and "0.000001" not in meaning, meaning
