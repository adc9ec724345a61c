"""Escaping user text (token names, titles) for LaTeX and for Markdown with math.

Text may hold anything: ``& % $ # _ { } ~ ^ \\`` and non-ASCII letters.  LaTeX
output targets pdflatex with ``fontenc`` T1 and ``inputenc`` utf8, which typeset
Latin letters with diacritics directly; Greek letters are set as math symbols;
any other character the T1 encoding cannot show is printed as its code point
(``U+4E2D``) rather than breaking the compile.

Names print as typed: TeX's ligatures are broken (``a--b`` stays two hyphens, not a
dash; ``,,`` stays two commas), and the ASCII quotes ``'`` and
````` print straight (``\textquotesingle``, ``\textasciigrave``), so prose written
here uses the typographic apostrophe ``’``.  Names longer than :data:`LABEL_CHARS`
are shortened with an ellipsis in table labels and formulas (:func:`label_text`);
running text may break them anywhere (``latex_text(..., breaks=True)``).
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
#: ASCII quotes, printed straight rather than as TeX's curly quotes.
_STRAIGHT = {"'": r"\textquotesingle{}", "`": r"\textasciigrave{}"}
#: Pairs of characters that T1 fonts join into one glyph (a dash, quotes, ¡, ¿, „, «).
_LIGATURES = frozenset({"--", ",,", "?`", "!`", "``", "''", "<<", ">>"})
#: Longest name printed whole in table labels and formulas.
LABEL_CHARS = 24
#: In running text, a word longer than this (about half a line in the title's size)
#: may break every :data:`_BREAK_EVERY` characters.
_BREAK_WORD = 40
_BREAK_EVERY = 8
_SPACES = re.compile(r"(\s+)")


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


def latex_text(text: str, breaks: bool = False) -> str:
    """``text`` escaped for LaTeX text mode (also inside ``\\text{}`` in math).

    ``breaks`` allows a line break every few characters of a word longer than
    :data:`_BREAK_WORD` (running text only: ``\\allowbreak`` is unknown to KaTeX).
    """
    if breaks:
        return "".join(_breakable(word) for word in _SPACES.split(text))
    out: list[str] = []
    for char in text:
        if char in _STRAIGHT:
            piece = _STRAIGHT[char]
        elif char in _LATEX_SPECIALS:
            piece = _LATEX_SPECIALS[char]
        elif char.isascii():
            piece = char if char.isprintable() else " "
        elif _t1_letter(char):
            piece = char
        elif (greek := _greek(char)) is not None:
            piece = f"\\ensuremath{{{greek}}}"
        else:
            piece = f"\\texttt{{U+{ord(char):04X}}}"
        if out and out[-1][-1] + piece[0] in _LIGATURES:
            out.append("{}")  # an empty group keeps the two characters apart
        out.append(piece)
    return "".join(out)


def _breakable(word: str) -> str:
    """A word escaped, with a break allowed every few characters when it is long."""
    if len(word) <= _BREAK_WORD:
        return latex_text(word)
    return r"\allowbreak{}".join(latex_text(word[k:k + _BREAK_EVERY])
                                 for k in range(0, len(word), _BREAK_EVERY))


def short_name(name: str) -> str:
    """``name``, or its start and end around an ellipsis when longer than
    :data:`LABEL_CHARS` (the full name is printed once in running text)."""
    if len(name) <= LABEL_CHARS:
        return name
    return f"{name[:LABEL_CHARS // 2]}\u2026{name[-(LABEL_CHARS // 3):]}"


def label_text(name: str) -> str:
    """A name for a table label or a formula: escaped and shortened (:func:`short_name`)."""
    return latex_text(short_name(name))


def markdown_text(text: str) -> str:
    """``text`` escaped for Markdown prose and table cells: no emphasis, links, HTML,
    entities (``&amp;``), table cell breaks or ``$`` math triggered; control characters
    (refused by the loader) become spaces."""
    out = []
    for k, c in enumerate(text):
        after = text[k + 1:k + 2]
        if c in _MARKDOWN_SPECIALS or c == "&" and (after.isalnum() or after == "#"):
            out.append(f"\\{c}")
        else:
            out.append(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c)
    return "".join(out)


#: Unicode categories never written raw to a terminal or a CSV cell: controls (ESC,
#: NUL, ...), format characters (BOM, zero-width space, bidi overrides), line and
#: paragraph separators, surrogates, unassigned code points, and every space but
#: U+0020 (no-break, ideographic, thin spaces look like one, or like nothing).
_INVISIBLE = frozenset(("Cc", "Cf", "Zl", "Zp", "Zs", "Cs", "Cn"))
#: Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt: drawn
#: as nothing, whatever their category: the Hangul fillers U+115F, U+1160, U+3164,
#: U+FFA0 are letters, the variation selectors marks), and characters drawn blank
#: (U+2800 BRAILLE PATTERN BLANK, U+1D159 MUSICAL SYMBOL NULL NOTEHEAD).
_BLANK_RANGES = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
                 (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
                 (0x2060, 0x206F), (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F),
                 (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
                 (0x1D159, 0x1D159), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def invisible(char: str) -> bool:
    """Whether ``char`` is a control, format, separator (but the ASCII space),
    unassigned, default-ignorable or blank character: one a reader cannot see."""
    if char == " ":
        return False
    if unicodedata.category(char) in _INVISIBLE:
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _BLANK_RANGES)


def plain_text(text: str) -> str:
    """``text`` safe for a terminal or a CSV cell: every invisible character
    (:func:`invisible`) written as its Python escape (``\\x1b``, ``\\u200b``,
    ``\\u3164``), so no escape sequence reaches the terminal and nothing hides in a
    cell (a name of Hangul fillers does not look blank)."""
    return "".join(c.encode("unicode_escape").decode("ascii") if invisible(c) else c
                   for c in text)


def word_label(word: str) -> str:
    """A vocabulary word as math: ``\\text{pense}`` (shortened when long)."""
    return rf"\text{{{label_text(word)}}}"


def token_label(token: str, position: int) -> str:
    """A token with its position as math: ``\\text{think}_{1}``."""
    return rf"{word_label(token)}_{{{position}}}"


_ENSUREMATH = re.compile(r"\\ensuremath\{\\([A-Za-z]+)\}")
_CODEPOINT = re.compile(r"\\texttt\{U\+([0-9A-F]{4,6})\}")
_GREEK_CHARS = {}


def unicode_math(latex: str) -> str:
    """Math from :func:`latex_text` with its Greek and code points back as Unicode.

    KaTeX and MathJax show Unicode inside ``\\text{}`` as typed (pdflatex cannot),
    and ``\\ensuremath`` is unknown to KaTeX; straight quotes become ``\\verb!'!``.
    """
    if not _GREEK_CHARS:
        for code in range(0x391, 0x3CA):
            if (command := _greek(chr(code))) is not None:
                _GREEK_CHARS.setdefault(command.lstrip("\\"), chr(code))
    latex = _ENSUREMATH.sub(lambda m: _GREEK_CHARS.get(m[1], m[0]), latex)
    for char, command in _STRAIGHT.items():  # KaTeX curls quotes everywhere but \verb
        latex = latex.replace(command, f"\\verb!{char}!")
    return _CODEPOINT.sub(lambda m: chr(int(m[1], 16)), latex)


#: Backslash sequences a Markdown parser reads as escapes before MathJax sees the math
#: (CommonMark: a backslash before ASCII punctuation), written the way both MathJax and
#: KaTeX read after it: ``\\`` as ``\cr``, ``\{`` as ``\lbrace``.
PORTABLE = ((r"\\", r"\cr "), (r"\{", r"\lbrace "), (r"\}", r"\rbrace "),
            (r"\,", r"\thinspace "), (r"\;", r"\medspace "), (r"\!", r"\negthinspace "))


def portable(markdown: str) -> str:
    """``markdown`` with the math in ``$...$`` and ``$$...$$`` written so MathJax
    (which reads the page after the Markdown parser) renders it as KaTeX does: no
    backslash before punctuation that the parser would eat (:data:`PORTABLE`)."""
    def fix(m: re.Match) -> str:
        math = m.group(0)
        for old, new in PORTABLE:
            math = math.replace(old, new)
        return math
    return re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", fix, markdown, flags=re.S)
