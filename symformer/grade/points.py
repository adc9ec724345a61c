"""Points: per asked entry, per stage, and the shares reader rounding and follow-through earn.

A points file (TOML, every key optional; defaults in :data:`DEFAULTS`)::

    entry = 1                  # points for each right entry of any asked stage
    reader_rounding = 1        # share of an entry's points for reader rounding
    follow_through = 0.5       # share for a wrong entry consistent with the
                               # student's own previous step
    [stage]                    # points per entry of one stage (overrides entry)
    "layer1.head1.weights" = 2

Numbers are read exactly (``0.5``, ``"1/3"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symformer.errors import InputError
from symformer.example.literals import exact_number
from symformer.example.loader import read_text_file, read_toml
from symformer.grade.lines import at_line, line_of, table_line

#: entry, reader_rounding and follow_through when the points file does not say.
DEFAULTS = {"entry": Fraction(1), "reader_rounding": Fraction(1),
            "follow_through": Fraction(1, 2)}
_SHARES = ("reader_rounding", "follow_through")


@dataclass(frozen=True)
class Points:
    """What each verdict earns."""

    entry: Fraction = DEFAULTS["entry"]
    reader_rounding: Fraction = DEFAULTS["reader_rounding"]
    follow_through: Fraction = DEFAULTS["follow_through"]
    stage: dict[str, Fraction] = field(default_factory=dict)

    def of(self, stage: str) -> Fraction:
        """The points of one right entry of ``stage``."""
        return self.stage.get(stage, self.entry)

    def share(self, verdict: str) -> Fraction:
        """The share of an entry's points a verdict earns."""
        return {"right": Fraction(1), "reader_rounding": self.reader_rounding,
                "follow_through": self.follow_through}.get(verdict, Fraction(0))


def load_points(path: str | Path, asked: tuple[str, ...]) -> Points:
    """Read a points file; a bad key or number is an :class:`InputError` naming its line."""
    source = str(path)
    text = read_text_file(Path(path), "a points file (TOML)")
    data = read_toml(text, source)
    found: dict[str, Fraction] = {}
    for key, value in data.items():
        where = at_line(source, line_of(text, key) or table_line(text, key))
        if key == "stage":
            continue
        if key not in DEFAULTS:
            raise InputError(f"{where}: unknown key {key!r} (known: "
                             f"{', '.join([*DEFAULTS, '[stage]'])})")
        found[key] = _number(value, key, where, 1 if key in _SHARES else None)
    stages = data.get("stage", {})
    if not isinstance(stages, dict):
        where = at_line(source, line_of(text, "stage"))
        raise InputError(f"{where}: stage must be a table [stage] of \"STAGE\" = points")
    per_stage: dict[str, Fraction] = {}
    after = table_line(text, "stage") or 0
    for name, value in stages.items():
        where = at_line(source, line_of(text, name, after=after))
        if name not in asked:
            raise InputError(f"{where}: {name!r} is not an asked stage (asked: "
                             f"{', '.join(asked)})")
        per_stage[name] = _number(value, name, where, None)
    return Points(**found, stage=per_stage)


def _number(value: object, key: str, where: str, most: int | None) -> Fraction:
    r = exact_number(value, f"{where}: {key}")
    number = Fraction(int(r.p), int(r.q))
    if number < 0 or (most is not None and number > most):
        bound = f"from 0 to {most}" if most is not None else "0 or more"
        raise InputError(f"{where}: {key} must be {bound}, found {value}")
    return number
