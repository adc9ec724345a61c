"""Numbers an author typed by hand in prose, tied to a stage entry by an annotation.

An annotation is a comment on the line of the number, so it never shows in the
rendered document::

    the word think puts 33\\% of its attention on itself % symformer: layer1.head1.weights[1,1]
    $\\alpha_{1,3} = 0.16$. <!-- symformer: layer1.head1.weights["think", "understand"] -->

* LaTeX: ``% symformer: ADDRESS`` (an unescaped ``%``); Markdown or HTML:
  ``<!-- symformer: ADDRESS -->``.
* ``ADDRESS`` is ``STAGE[ROW, COL]``: a stage name (``symformer derive --list``;
  ``causal:STAGE`` for the causally masked derivation), positions from 0 or the quoted
  token / column names (``"think"``).  Several addresses, separated by commas, tie the
  last numbers before the comment, in order.
* The number tied is the last number before the annotation on its line; an annotation
  alone on its line ties the last number of the previous non-empty line.  Digits in a
  sub- or superscript (``\\alpha_{1,3}``, ``x^2``) are indices, not numbers.  A number
  followed by ``%`` or ``\\%`` is a percentage (``33%`` claims 0.33 to 2 decimals).
  The claimed precision is the number's printed digits.

Each tied number is a :class:`ProseNumber`; :mod:`symformer.verify.claims` makes it a
one-entry claim named ``line N``, checked like every other claim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from symformer.engine.graph import unknown_stage_message
from symformer.errors import InputError


@dataclass(frozen=True)
class ProseNumber:
    """A hand-typed number tied to one stage entry."""

    line: int       # 1-based line of the number
    stage: str
    causal: bool    # ``causal:STAGE``: the causally masked derivation
    row: int
    col: int
    text: str       # the claimed value as decimal text (a percentage already divided)

_LATEX = re.compile(r"(?<!\\)%\s*symformer:\s*(?P<body>.*?)\s*$")
_HTML = re.compile(r"<!--\s*symformer:\s*(?P<body>.*?)\s*-->")
#: A number in prose: an optional minus (ASCII or U+2212), digits, optional decimals,
#: and a percent sign (``%`` or ``\%``, with an optional thin space) after it.
_NUMBER = re.compile(r"(?<![\w.])(?P<sign>[-\u2212])?(?P<digits>\d+(?:\.\d+)?)(?!\w)"
                     r"(?P<percent>(?:\\,|\s)?\\?%)?", re.ASCII)
#: A sub- or superscript (``_{1,3}``, ``^2``): its digits are indices, not numbers.
_SCRIPT = re.compile(r"[_^](?:\{[^{}]*\}|\S)")
_ADDRESS = re.compile(r"(?P<causal>causal:)?(?P<stage>[A-Za-z_][\w.]*)\s*\[(?P<index>[^\]]*)\]")
_INDEX = re.compile(r"""\s*(?:(?P<int>\d+)|"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*""")


def prose_numbers(text: str, source: str, stages: Mapping[str, tuple[tuple[str, ...],
                                                                tuple[str, ...]]]
                  ) -> list[ProseNumber]:
    """The annotated numbers of ``text``.

    ``stages`` maps a stage name to its (row labels, column labels), to read quoted
    token and column names.  A malformed annotation, or one with fewer numbers before
    it than addresses, is an :class:`InputError` naming the line.
    """
    lines = text.splitlines()
    found: list[ProseNumber] = []
    for n, line in enumerate(lines, start=1):
        for match in (*_HTML.finditer(line), *_LATEX.finditer(line)):
            if match.re is _LATEX and _HTML.search(line[:match.start()] + "-->"):
                continue  # a "%" inside an HTML annotation
            if match.group("body").startswith("equation "):
                continue  # an equation's tag (symformer.verify.equation_claims)
            where = f"{source}, line {n}"
            before = _without_annotations(line[:match.start()])
            number_line = n
            if not before.strip():
                number_line, before = _previous_text(lines, n)
            addresses = _addresses(match.group("body"), where, stages)
            numbers = list(_NUMBER.finditer(_SCRIPT.sub(_blank, before)))
            if len(numbers) < len(addresses):
                raise InputError(f"{where}: the annotation names {len(addresses)} "
                                 f"entr{'y' if len(addresses) == 1 else 'ies'} but "
                                 f"{len(numbers)} number{'' if len(numbers) == 1 else 's'} "
                                 "stand before it")
            for (causal, stage, i, j), number in zip(addresses,
                                                     numbers[len(numbers) - len(addresses):]):
                found.append(ProseNumber(number_line, stage, causal, i, j,
                                         claimed_text(number)))
    return found


def claimed_text(number: re.Match) -> str:
    """The claimed value as decimal text: ``33%`` -> ``0.33``, ``−0.5`` -> ``-0.5``.

    A percentage moves the point two places, in decimal text (never a float), so the
    printed digits stay the claim's precision.
    """
    text = ("-" if number.group("sign") else "") + number.group("digits")
    if number.group("percent"):
        text = str(Decimal(text).scaleb(-2))
        if "E" in text:  # 0% -> 0E-2: write the places out
            text = f"{Decimal(text):f}"
    return text


def _blank(match: re.Match) -> str:
    return " " * len(match.group(0))


def _without_annotations(text: str) -> str:
    return _HTML.sub("", text)


def _previous_text(lines: list[str], n: int) -> tuple[int, str]:
    """The last non-empty line before line ``n`` (1-based), without annotations."""
    for k in range(n - 1, 0, -1):
        text = _LATEX.sub("", _without_annotations(lines[k - 1]))
        if text.strip():
            return k, text
    return n, ""


def _addresses(body: str, where: str, stages: Mapping[str, tuple[tuple[str, ...],
                                                              tuple[str, ...]]]
               ) -> list[tuple[bool, str, int, int]]:
    """(causal, stage, row, col) of every address in an annotation."""
    found = list(_ADDRESS.finditer(body))
    rest = _ADDRESS.sub("", body).replace(",", "").strip()
    if not found or rest:
        raise InputError(f"{where}: expected an annotation 'symformer: STAGE[ROW, COL]' "
                         f"(positions from 0 or quoted names), found {body[:80]!r}")
    out = []
    for m in found:
        stage = m.group("stage")
        parts = m.group("index").split(",")
        if len(parts) != 2:
            raise InputError(f"{where}: {m.group(0)}: give [row, column]")
        labels = stages.get(stage)
        if labels is None:
            raise InputError(f"{where}: {unknown_stage_message(stage, list(stages))}")
        i, j = (_index(p, names, what, where, stage)
                for p, names, what in zip(parts, labels, ("row", "column")))
        out.append((bool(m.group("causal")), stage, i, j))
    return out


def _index(text: str, names: tuple[str, ...], what: str, where: str, stage: str) -> int:
    m = _INDEX.fullmatch(text)
    if m is None:
        raise InputError(f"{where}: {stage}: a {what} is a position or a quoted name, "
                         f"found {text.strip()!r}")
    if m.group("int") is not None:
        k = int(m.group("int"))
        if k >= len(names):
            raise InputError(f"{where}: {stage} has {len(names)} {what}s (0 to "
                             f"{len(names) - 1}), found {k}")
        return k
    name = m.group("dq") if m.group("dq") is not None else m.group("sq")
    if name not in names:
        raise InputError(f"{where}: {stage} has no {what} {name!r}; its {what}s: "
                         + ", ".join(names))
    return names.index(name)
