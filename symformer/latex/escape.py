"""Escaping user text (token names, titles) for LaTeX and for Markdown with math.

Text may hold anything: ``& % $ # _ { } ~ ^ \\`` and non-ASCII letters.  LaTeX
output targets pdflatex with ``fontenc`` T1 and ``inputenc`` utf8, which typeset
Latin letters with diacritics directly; Greek letters are set as math symbols;
any other character the T1 encoding cannot show is printed as its code point
(``U+4E2D``) rather than breaking the compile.
"""

from __future__ import annotations

import re
import unicodedata

_LATEX_SPECIALS = {
    "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",
    # Typographic punctuation, spelled the way plain LaTeX spells it.
    "\u2018": "`", "\u2019": "'", "\u201c": "``", "\u201d": "''", "\u2013": "--",
    "\u2014": "---", "\u2026": r"\ldots{}",
}
_MARKDOWN_SPECIALS = set("\\`*_[]<>#|$~")


def _greek(char: str) -> str | None:
    """``\\alpha`` for α, ``\\Omega`` for Ω; None for anything else."""
    name = unicodedata.name(char, "")
    if not name.startswith(("GREEK SMALL LETTER ", "GREEK CAPITAL LETTER ")):
        return None
    word = name.rsplit(" ", 1)[-1].lower()
    if word == "lamda":
        word = "lambda"
    if " " in name.split("LETTER ", 1)[1]:  # accented or final forms
        return None
    if name.startswith("GREEK CAPITAL"):
        capital = word.capitalize()
        return f"\\{capital}" if capital in _CAPITAL_GREEK else None
    return f"\\{word}" if word != "omicron" else "o"


_CAPITAL_GREEK = {"Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon",
                  "Phi", "Psi", "Omega"}


def _t1_letter(char: str) -> bool:
    """Characters pdflatex's utf8 + T1 set as typed: Latin-1 and Latin Extended-A."""
    return 0xA0 <= ord(char) <= 0x17F and char not in "\u00ad"


def latex_text(text: str) -> str:
    """``text`` escaped for LaTeX text mode (also inside ``\\text{}`` in math)."""
    out = []
    for char in text:
        if char in _LATEX_SPECIALS:
            out.append(_LATEX_SPECIALS[char])
        elif char.isascii():
            out.append(char if char.isprintable() else " ")
        elif _t1_letter(char):
            out.append(char)
        elif (greek := _greek(char)) is not None:
            out.append(f"\\ensuremath{{{greek}}}")
        else:
            out.append(f"\\texttt{{U+{ord(char):04X}}}")
    return "".join(out)


def markdown_text(text: str) -> str:
    """``text`` escaped for Markdown prose: no emphasis, links or ``$`` math triggered."""
    return "".join(f"\\{c}" if c in _MARKDOWN_SPECIALS else c for c in text)


def word_label(word: str) -> str:
    """A vocabulary word as math: ``\\text{pense}``."""
    return rf"\text{{{latex_text(word)}}}"


def token_label(token: str, position: int) -> str:
    """A token with its position as math: ``\\text{think}_{1}``."""
    return rf"{word_label(token)}_{{{position}}}"


_ENSUREMATH = re.compile(r"\\ensuremath\{\\([A-Za-z]+)\}")
_CODEPOINT = re.compile(r"\\texttt\{U\+([0-9A-F]{4,6})\}")
_GREEK_CHARS = {}


def unicode_math(latex: str) -> str:
    """Math from :func:`latex_text` with its Greek and code points back as Unicode.

    KaTeX and MathJax show Unicode inside ``\\text{}`` as typed (pdflatex cannot),
    and ``\\ensuremath`` is unknown to KaTeX.
    """
    if not _GREEK_CHARS:
        for code in range(0x391, 0x3CA):
            if (command := _greek(chr(code))) is not None:
                _GREEK_CHARS.setdefault(command.lstrip("\\"), chr(code))
    latex = _ENSUREMATH.sub(lambda m: _GREEK_CHARS.get(m[1], m[0]), latex)
    return _CODEPOINT.sub(lambda m: chr(int(m[1], 16)), latex)
