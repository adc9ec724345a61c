"""Line numbers in TOML text, for messages (``tomllib`` does not keep positions)."""

from __future__ import annotations

import re


def line_of(text: str, key: str, value: str | None = None, after: int = 0) -> int | None:
    """The 1-based line where ``key = ...`` (quoted or bare) is assigned, or None.

    With ``value``, the line must also hold that value's text; only lines after
    line ``after`` are searched.
    """
    pattern = re.compile(r'^\s*(?:"' + re.escape(key) + r'"|\'' + re.escape(key) + r"'|"
                         + re.escape(key) + r")\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if number > after and pattern.match(line) and (value is None or value in line):
            return number
    return None


def at_line(source: str, line: int | None) -> str:
    """``source, line N`` (or ``source`` when the line is unknown)."""
    return f"{source}, line {line}" if line else source


def table_line(text: str, name: str) -> int | None:
    """The 1-based line of the table header ``[name]``, or None."""
    pattern = re.compile(r"^\s*\[\s*" + re.escape(name) + r"\s*\]")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None
