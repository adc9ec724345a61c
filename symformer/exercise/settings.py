"""What an exercise draws and demands: the ``[exercise]`` table of a template.

A template is an ordinary example file; an optional ``[exercise]`` table sets the
ranges the numbers are drawn from and the constraints every variant must meet
(all optional; the defaults suit the built-in example)::

    [exercise]
    embeddings = { low = 0, high = 2, step = 1 }             # token embeddings
    weights    = { low = "-1/2", high = "1/2", step = "1/4" } # every W_* matrix
    biases     = { low = -1, high = "1/2", step = "1/4" }     # every b_* vector
    margin     = "1/100"  # in units of the last asked decimal: no asked value that close
                          # to a rounding boundary (k + 1/2) 10^-D
    min_spread = "1/10"   # every softmax row asked: largest weight - smallest >= this
    max_score  = 4        # every scaled score a student exponentiates: |s| <= this
    max_weight = "9/10"   # every softmax row asked: largest weight <= this
    relu_signs = "token"  # an asked FFN activation's input has both signs in the worked
                          # token's row ("token"), anywhere in its table ("table"), or
                          # need not ("off")
    stated     = true     # every asked value is 0 or rounds to a nonzero number
    attempts   = 5000     # draws tried per variant before giving up (exit 2)

Every number is read exactly (``"1/4"``, ``0.25``); the table is removed before the
template is loaded as an example, so variants never carry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symformer.errors import InputError
from symformer.example.literals import exact_number

#: The most values one range may offer (keeps draws and messages small).
MAX_CHOICES = 1000
#: The most draws tried per variant (``attempts``).
MAX_ATTEMPTS = 10_000


@dataclass(frozen=True)
class Range:
    """The values ``low, low + step, ..., high`` (exact rationals)."""

    low: Fraction
    high: Fraction
    step: Fraction

    @property
    def count(self) -> int:
        """How many values the range offers."""
        return int((self.high - self.low) / self.step) + 1

    def value(self, k: int) -> Fraction:
        """The ``k``-th value (0-based)."""
        return self.low + k * self.step

    def entries(self) -> tuple:
        """Every value as an example file holds it: an int, a decimal's text
        (:class:`~symformer.example.literals.DecimalText`) or a fraction's text."""
        from symformer.exercise.toml_text import toml_number

        return tuple(toml_number(self.value(k)) for k in range(self.count))

    def describe(self) -> str:
        """``0 to 1/2 in steps of 1/4``."""
        return f"{self.low} to {self.high} in steps of {self.step}"


#: Extra places of the given (not asked) input tables of a sheet asking every entry
#: (``--every-entry``): it prints them at ``decimals + GIVEN_EXTRA_DECIMALS``, and the
#: key's worked lines substitute them so.  A sheet of one token's path (the default)
#: gives them at the asked decimals, as a TA's sheet does (:func:`given_places`).
GIVEN_EXTRA_DECIMALS = 2


def given_places(asked: list[str], decimals: int) -> int:
    """The decimals a sheet gives its (not asked) input tables at: the asked ones on
    one token's path (:class:`~symformer.exercise.cells.Asked`), else
    ``decimals + GIVEN_EXTRA_DECIMALS``; the ``given`` constraint keeps only the draws
    whose answers these printed numbers still give."""
    return decimals if hasattr(asked, "cells") else decimals + GIVEN_EXTRA_DECIMALS


@dataclass(frozen=True)
class Settings:
    """The ranges and constraints of an exercise (see the module docstring)."""

    embeddings: Range = Range(Fraction(0), Fraction(2), Fraction(1))
    weights: Range = Range(Fraction(-1, 2), Fraction(1, 2), Fraction(1, 4))
    biases: Range = Range(Fraction(-1), Fraction(1, 2), Fraction(1, 4))
    margin: Fraction = Fraction(1, 100)
    min_spread: Fraction = Fraction(1, 10)
    attempts: int = 5000
    #: |s| <= max_score for every scaled score of an asked softmax (None: no bound)
    max_score: Fraction | None = Fraction(4)
    #: every asked softmax row's largest weight <= max_weight (rows of one key exempt)
    max_weight: Fraction = Fraction(9, 10)
    #: where an asked FFN activation's input must have both signs: "token", "table", "off"
    relu_signs: str = "token"
    #: every asked value is exactly 0 or rounds to a nonzero number at the asked decimals
    stated: bool = True


#: Where ``relu_signs`` looks for both signs.
RELU_SIGNS = ("token", "table", "off")

_KEYS = {"embeddings", "weights", "biases", "margin", "min_spread", "attempts", "max_score",
         "max_weight", "relu_signs", "stated"}


def _fraction(value: Any, where: str) -> Fraction:
    number = exact_number(value, where)
    return Fraction(int(number.p), int(number.q))


def _range(table: Any, where: str, default: Range) -> Range:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table such as {{ low = 0, high = 1, step = "
                         f"\"1/4\" }}")
    unknown = sorted(set(table) - {"low", "high", "step"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (expected low, high, step)")
    low = _fraction(table.get("low", str(default.low)), f"{where}.low")
    high = _fraction(table.get("high", str(default.high)), f"{where}.high")
    step = _fraction(table.get("step", str(default.step)), f"{where}.step")
    if step <= 0:
        raise InputError(f"{where}.step: must be positive, found {step}")
    if high < low:
        raise InputError(f"{where}: high ({high}) is below low ({low})")
    found = Range(low, high, step)
    if found.count > MAX_CHOICES:
        raise InputError(f"{where}: offers {found.count} values, more than {MAX_CHOICES}; "
                         f"use a larger step or a smaller range")
    return found


def margin_value(value: Any, where: str) -> Fraction:
    """A margin: an exact rational from 0 up to (not including) 1/2."""
    margin = _fraction(value, where)
    if not 0 <= margin < Fraction(1, 2):
        raise InputError(f"{where}: the margin must be at least 0 and below 1/2 (a value "
                         f"is never farther than 1/2 unit from a rounding boundary), "
                         f"found {margin}")
    return margin


def read_settings(table: Any, source: str) -> Settings:
    """The settings of a template's ``[exercise]`` table (``None``: the defaults)."""
    base = Settings()
    if table is None:
        return base
    where = f"{source}: [exercise]"
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (known: "
                         f"{', '.join(sorted(_KEYS))})")
    attempts = table.get("attempts", base.attempts)
    if isinstance(attempts, bool) or not isinstance(attempts, int) \
            or not 1 <= attempts <= MAX_ATTEMPTS:
        raise InputError(f"{where}.attempts: expected a whole number from 1 to "
                         f"{MAX_ATTEMPTS}, found {attempts!r}")
    spread = _fraction(table.get("min_spread", str(base.min_spread)), f"{where}.min_spread")
    if not 0 <= spread <= 1:
        raise InputError(f"{where}.min_spread: must lie between 0 and 1, found {spread}")
    score = table.get("max_score", str(base.max_score))
    max_score = None if score == "none" else _fraction(score, f"{where}.max_score")
    if max_score is not None and max_score <= 0:
        raise InputError(f"{where}.max_score: must be positive (or \"none\"), found "
                         f"{max_score}")
    weight = _fraction(table.get("max_weight", str(base.max_weight)), f"{where}.max_weight")
    if not 0 < weight <= 1:
        raise InputError(f"{where}.max_weight: must lie above 0 and at most 1, found {weight}")
    signs = table.get("relu_signs", base.relu_signs)
    if signs not in RELU_SIGNS:
        raise InputError(f"{where}.relu_signs: expected one of {', '.join(RELU_SIGNS)}, "
                         f"found {signs!r}")
    stated = table.get("stated", base.stated)
    if not isinstance(stated, bool):
        raise InputError(f"{where}.stated: expected true or false, found {stated!r}")
    return Settings(
        embeddings=_range(table.get("embeddings", {}), f"{where}.embeddings", base.embeddings),
        weights=_range(table.get("weights", {}), f"{where}.weights", base.weights),
        biases=_range(table.get("biases", {}), f"{where}.biases", base.biases),
        margin=margin_value(table.get("margin", str(base.margin)), f"{where}.margin"),
        min_spread=spread, attempts=attempts, max_score=max_score, max_weight=weight,
        relu_signs=signs, stated=stated)
