"""Writing a variant back as TOML: the subset example files use, byte-stable.

Keys keep the template's order; exact numbers are written as decimals where they
terminate (``0.25``) and as quoted fractions otherwise (``"1/3"``); float literals
read from the template are written back as their own text.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from symformer.example.literals import DecimalText


def number_text(x: Fraction) -> str:
    """An exact rational as TOML: ``3``, ``-0.25``, or ``"1/3"``."""
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return f'"{x.numerator}/{x.denominator}"'
    places = max(twos, fives)
    scaled = abs(x.numerator) * 10 ** places // x.denominator
    text = str(scaled).rjust(places + 1, "0")
    sign = "-" if x < 0 else ""
    return f"{sign}{text[:-places]}.{text[-places:]}"


def toml_number(x: Fraction) -> int | DecimalText | str:
    """An exact rational as the parsed TOML value an example file would hold: an int,
    a decimal literal's text, or a fraction's text (a quoted string)."""
    text = number_text(x)
    if x.denominator == 1:
        return x.numerator
    return text.strip('"') if text.startswith('"') else DecimalText(text)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Fraction):
        return number_text(v)
    if isinstance(v, DecimalText):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        if v and all(isinstance(e, list) for e in v):
            return "[\n" + "".join(f"    {_value(e)},\n" for e in v) + "]"
        return "[" + ", ".join(_value(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(e)}" for k, e in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() and k.isascii() \
        else json.dumps(k)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(e, dict) for e in v)


def toml_text(data: dict[str, Any], path: str = "") -> str:
    """``data`` as TOML: plain keys first, then sub-tables and arrays of tables."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items()
             if not isinstance(v, dict) and not _is_table_array(v)]
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in data.items():
        name = f"{path}.{_key(k)}" if path else _key(k)
        if isinstance(v, dict):
            out += f"\n[{name}]\n" + toml_text(v, name)
        elif _is_table_array(v):
            for table in v:
                out += f"\n[[{name}]]\n" + toml_text(table, name)
    return out
