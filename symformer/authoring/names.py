"""The LaTeX macro name of an address: ``layer1.head1.weights[1,3]`` ->
``symLayerOneHeadOneWeightsOneThree`` (docs/values.md).

The rule: split the address at ``.``, ``_``, ``[``, ``,``, ``]`` and wherever letters
and digits meet; write a run of letters with its first letter upper-cased
(``weights`` -> ``Weights``, ``Q`` -> ``Q``), a run of digits digit by digit in words
(``12`` -> ``OneTwo``); an entry of a stage with more than 10 rows or columns writes its
indices as ``Row…Col…`` (``[12,3]`` -> ``RowOneTwoColThree``), so that the two indices
never run together; prefix ``sym`` (values) or ``symWorked`` (worked lines).  Macro
names are letters only, as TeX requires.  The rule can map two different addresses to
one name (``raw_scores`` and ``raw.scores``); :func:`macro_names` refuses such a set,
naming both, so the names of one export are always distinct.
"""

from __future__ import annotations

import re

from symformer.errors import InputError

_DIGITS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")
_RUNS = re.compile(r"[A-Za-z]+|[0-9]+")


def words(text: str) -> str:
    """``layer1.add_norm1`` -> ``LayerOneAddNormOne`` (letters and digit words)."""
    out = []
    for run in _RUNS.findall(text):
        if run.isdigit():
            out.append("".join(_DIGITS[int(d)] for d in run))
        else:
            out.append(run[0].upper() + run[1:])
    return "".join(out)


def entry_words(stage: str, row: int, col: int | None, wide: bool) -> str:
    """The words of one entry (``col`` None: a whole row's quantity, ``…RowOneAll``)."""
    if col is None:
        return f"{words(stage)}Row{words(str(row))}All"
    if wide:
        return f"{words(stage)}Row{words(str(row))}Col{words(str(col))}"
    return words(stage) + _DIGITS[row] + _DIGITS[col]


def macro_names(addresses: dict[str, str], prefix: str) -> dict[str, str]:
    """Address -> macro name (``prefix`` + words); an :class:`InputError` naming both
    addresses when two would get one name."""
    seen: dict[str, str] = {}
    out = {}
    for address, name in addresses.items():
        full = prefix + name
        if full in seen:
            raise InputError(f"{address} and {seen[full]} would both be the LaTeX macro "
                             f"\\{full}; rename one of the stages")
        seen[full] = address
        out[address] = full
    return out
