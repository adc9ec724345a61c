"""How wide and how tall a piece of a frame will be: the deck's plan of its frames.

The deck never shrinks a line to fit (its text stays at least 10.5 pt): a long worked
line is broken by TeX at its operators, and a block too tall for a frame is split over
frames.  Widths in em (an upper estimate, erring on the wide side) plan tables side by
side, their column slices and the brackets kept whole; heights in pt come from the
model of TeX's layout (:mod:`symformer.slides.layout`): the lines of a worked line, a
general equation, a paragraph of text, a table.  Sub- and superscripts are set at 10.5
pt in 12 pt maths (:data:`symformer.slides.beamer.PREAMBLE`), hence ``SCRIPT``.
"""

from __future__ import annotations

import math
import re

#: Widths in em of the body font: a character (letter or digit, rounded up), a binary
#: operator with its spaces, a relation with its spaces, a delimiter, a script's scale.
CHAR = 0.5
BINARY = 1.25
CDOT = 0.65
RELATION = 1.4
DELIMITER = 0.35
SCRIPT = 0.85
TEXT_CHAR = 0.5
_TOKEN = re.compile(r"\\(?:left|right|[Bb]igg?[lr]?)\s*(?:\\[{}|]|[()\[\].|])"
                    r"|\\[A-Za-z]+|\\.|[{}_^&]|\s+|.", re.S)
_BINARY = {"+", "-", r"\cdot", r"\odot", r"\times", r"\pm"}
_RELATION = {"=", r"\approx", "<", ">", r"\leq", r"\geq", r"\to", r"\mapsto"}
#: Commands whose name is printed (their letters count), and spacing commands.
_NAMED = {r"\sin", r"\cos", r"\tanh", r"\max", r"\min", r"\log", r"\exp"}
_SPACE = {r"\quad": 1.0, r"\qquad": 2.0, r"\,": 0.17, r"\;": 0.28, r"\:": 0.22, r"\ ": 0.33}
#: Commands that take a group and print only it (or nothing around it worth counting).
_TRANSPARENT = {r"\mathrm", r"\text", r"\operatorname", r"\mathit", r"\mathbf", r"\tilde",
                r"\hat", r"\overline", r"\mathopen", r"\mathclose", r"\displaystyle",
                r"\nobreak", r"\sqrt", r"\mathbin", r"\mathrel", r"\boldsymbol"}


def width(latex: str) -> float:
    """An upper estimate of the width of ``latex`` (math, display style) in em."""
    tokens = [t for t in _TOKEN.findall(latex) if not t.isspace()]
    total, _ = _sequence(tokens, 0, 1.0)
    return total


def _sequence(tokens: list[str], k: int, scale: float) -> tuple[float, int]:
    """The width of tokens from ``k`` up to the closing brace of this group."""
    total = 0.0
    while k < len(tokens):
        t = tokens[k]
        if t == "}":
            return total, k + 1
        w, k = _item(tokens, k, scale)
        total += w
    return total, k


def _group(tokens: list[str], k: int, scale: float) -> tuple[float, int]:
    """One argument: a braced group or a single token."""
    if k < len(tokens) and tokens[k] == "{":
        return _sequence(tokens, k + 1, scale)
    if k < len(tokens):
        return _item(tokens, k, scale)
    return 0.0, k


def _item(tokens: list[str], k: int, scale: float) -> tuple[float, int]:
    t = tokens[k]
    if t == "{":
        return _sequence(tokens, k + 1, scale)
    if t in "_^":
        w, k = _group(tokens, k + 1, scale * SCRIPT)
        if k < len(tokens) and tokens[k] in "_^" and tokens[k] != t:
            # a subscript and a superscript stand one over the other: the wider counts
            other, k = _group(tokens, k + 1, scale * SCRIPT)
            w = max(w, other)
        return w, k
    if t == r"\frac":
        num, k = _group(tokens, k + 1, scale)
        den, k = _group(tokens, k, scale)
        return max(num, den) + 0.3 * scale, k
    if t in (r"\begin", r"\end"):
        _, k = _group(tokens, k + 1, 0.0)  # the environment's name prints nothing
        return (DELIMITER * scale if t == r"\begin" else DELIMITER * scale), k
    if t in _TRANSPARENT:
        return (0.9 * scale if t == r"\sqrt" else 0.0), k + 1
    if t in _NAMED:
        return (len(t) - 1) * CHAR * scale, k + 1
    if t in _SPACE:
        return _SPACE[t] * scale, k + 1
    if t == r"\cdot" and scale == 1.0:
        return CDOT, k + 1
    if t in _BINARY:
        return (BINARY if scale == 1.0 else CHAR) * scale, k + 1
    if t in _RELATION:
        return (RELATION if scale == 1.0 else CHAR) * scale, k + 1
    if t == "&":
        return 1.0 * scale, k + 1
    if t == r"\\":
        return 0.0, k + 1
    if t.startswith((r"\left", r"\right", r"\B", r"\b")):
        return DELIMITER * scale, k + 1
    return CHAR * scale, k + 1  # a letter, a digit, a Greek letter, punctuation


def widest_unbreakable(latex: str) -> float:
    """The width in em of the widest part of ``latex`` TeX cannot break: the pieces
    between its sums and differences outside any group or ``\\left``...``\\right``."""
    depth, piece, widest = 0, [], 0.0
    for t in _TOKEN.findall(latex):
        opens = t.startswith("\\left") or re.match(r"\\[Bb]igg?l", t) is not None
        closes = t.startswith("\\right") or re.match(r"\\[Bb]igg?r", t) is not None
        depth += (opens or t == "{") - (closes or t == "}")
        if depth == 0 and t in ("+", "-") and piece:
            widest = max(widest, width("".join(piece)))
            piece = []
        piece.append(t)
    return max(widest, width("".join(piece)))


def text_width(text: str) -> float:
    """An upper estimate of the width of plain text in em (Latin Modern's letters
    average under half an em)."""
    return TEXT_CHAR * len(text)


#: A frame title is set \large (14.4 pt, bold): its scale, and the height of its second line.
TITLE_SCALE = 1.25
TITLE_LINE = 19.0
#: The frame (160 mm x 90 mm, 12 pt, metropolis or the fallback theme): the text width
#: in em (398 pt), the baseline skip of its text (pt), the hanging indent of a worked
#: line's continuation (em).
TEXT_WIDTH = 33.19
LINE = 16.7
HANG = 1.5
#: Tables are set at 10.5 pt (``beamer.TABLE_FONT``): the scale of their widths.
TABLE_SCALE = 0.9
#: How much wider than the estimate a piece may be set (pieces of 5 em or more were
#: set at most 0.986 of their estimate): the room a bracket kept whole must leave.
MARGIN = 1.05


def title_overflow(title: str) -> float:
    """Height in pt a frame title (LaTeX, set large) takes beyond one line: a line more
    for each further :data:`TEXT_WIDTH` of it (a decoder's gradient title may take
    three)."""
    plain = re.sub(r"\$[^$]*\$", "xxx", title)  # a symbol in maths: a few letters' width
    lines = math.ceil(text_width(plain) * TITLE_SCALE / (TEXT_WIDTH - 1.0))
    return TITLE_LINE * max(0, lines - 1)


def column_width(label: str, cells: list[str], pad: float = 1.0) -> float:
    """Width in em of a table column (its label and cells are math, at the tables'
    size) and its padding ``pad``.  A label is at least as wide as the layout model
    sets it (:func:`label_width`)."""
    return TABLE_SCALE * max([label_width(label)] + [_cell_width(c) for c in cells]) + pad


def label_width(label: str) -> float:
    """Width in em of a column's label (math): the estimate of :func:`width`, or the
    layout model's (the fonts' metrics) where that is wider: a heading of wide letters
    and scripts, ``(\\partial L/\\partial W_{E}^{\\text{lookup}})_{0}``, which the estimate's
    half an em a character set 55 pt too narrow."""
    from symformer.slides import layout

    return max(width(label), layout.box(label, False).w / layout.EM)


def _cell_width(latex: str) -> float:
    """A cell's width: its leading minus is a sign (a character), not an operator."""
    if latex.startswith("-"):
        return width(latex[1:]) + 1.6 * CHAR
    return width(latex)


def label_columns_width(tokens: list[str], pad: float = 1.0) -> float:
    """Width in em of a table's position and token columns (their padding ``pad``)."""
    return TABLE_SCALE * (2.5 + max([text_width("token")] + [text_width(t) for t in tokens])) \
        + pad


# --- Heights from the layout model (symformer.slides.layout) -----------------------
#
# The widths above plan tables and brackets; the heights of a frame's equations,
# working, notes and tables come from the model of TeX's layout, which sets them as
# pdflatex does (checked against pdflatex in tests/test_slides_fill.py).

#: The room (pt) under the frame title, from the top of the body to the bottom of the
#: frame's box (measured with pdflatex: 187.2 pt for a title on one line), less a
#: margin for the model's error; a title on two lines takes :data:`TITLE_LINE` more.
ROOM = 185.0
#: ``\smallskip`` and ``\medskip`` (pt).
SMALLSKIP, MEDSKIP = 3.0, 6.0


def _pt(em: float) -> float:
    return em * 12.0


def lhs_width(lhs: str) -> float:
    """The width (pt) of a left-hand side set in display style."""
    from symformer.slides import layout

    return layout.box(lhs).w


def worked_lines(lhs: str, pieces: tuple[str, ...], lhs_pt: float,
                 room: float = TEXT_WIDTH) -> tuple:
    """The lines (:class:`~symformer.slides.layout.Line`) of a worked line or general
    equation ``lhs`` then ``pieces`` (each starting with its relation, set as
    ``$\\displaystyle {}piece$``, a break allowed between them), its left-hand side in a
    box ``lhs_pt`` wide, in a column ``room`` em wide (continuations indented)."""
    from symformer.slides import layout

    head = layout.box(lhs)
    first = layout.Box(lhs_pt, head.h, head.d)
    return _paragraph(first, tuple(("math", "{}" + p) for p in pieces), _pt(room),
                      lhs_pt + _pt(HANG))


def equation_lines(lhs: str, rhs: str, remark: str, lhs_pt: float) -> tuple:
    """The lines of a general equation ``lhs = rhs`` and its remark in words."""
    from symformer.slides import layout

    head = layout.box(lhs)
    parts: tuple[tuple[str, str], ...] = (("math", "{}= " + rhs),)
    if remark:
        parts += (("text", "\u2003 (" + _plain(remark) + ")"),)
    return _paragraph(layout.Box(lhs_pt, head.h, head.d), parts, _pt(TEXT_WIDTH),
                      lhs_pt + _pt(HANG))


def _paragraph(first, parts, room: float, hang: float) -> tuple:
    from symformer.slides import layout

    return layout.paragraph(first, parts, room, hang)


def _plain(latex: str) -> str:
    """Text of a LaTeX paragraph, maths counted as a few letters."""
    text = re.sub(r"\$[^$]*\$", "xxx", latex)
    return re.sub(r"\\[A-Za-z]+\s*|[{}]", "", text)


#: How full a line of text is planned at most (a line within this of its room may be
#: broken by TeX: the words' kerns and ligatures are not modelled).
TEXT_FILL = 0.97


def text_lines(latex: str, room: float = TEXT_WIDTH) -> tuple:
    """The lines of a paragraph of text (LaTeX, maths counted as a few letters)."""
    from symformer.slides import layout

    # words, and each piece of maths as one word of its own width
    words = []
    for k, part in enumerate(re.split(r"\$([^$]*)\$", latex)):
        if k % 2:
            words.append(layout.box(part, display=False).w)
        else:
            words += [layout.text_box(word).w for word in _plain(part).split()]
    space = layout.text_box(" ").w
    n, used = 1, 0.0
    for w in words:
        if used and used + space + w > TEXT_FILL * _pt(room):
            n, used = n + 1, w
        else:
            used += (space if used else 0.0) + w
    return tuple(layout.Line(8.5, 2.5) for _ in range(n))


#: A table at the tables' 10.5 pt (``\fontsize{10.5}{12.6}``): its rows' struts, its
#: booktabs rules and their separations (pt), its lines' baseline skip, the scale of
#: its maths.
TABLE_STRUT_H, TABLE_STRUT_D, TABLE_RULES, TABLE_BASELINE = 8.82, 3.78, 11.7, 12.6
#: What pdflatex sets beyond that (measured on the shipped decks): per row (the header
#: too), and per table.
TABLE_ROW_EXTRA, TABLE_EXTRA = 1.9, 2.0
#: A scripted cell's extra height and depth (its scripts are 10.5 pt as its text is).
TABLE_SCRIPTS = 0.0
TABLE_MATH = 10.5 / 12.0


def tabular_height(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> float:
    """The height plus depth (pt) of a table's ``tabular``: its header's and rows'
    cells (maths), each row at least a strut, and the booktabs rules."""
    from symformer.slides import layout

    total = TABLE_RULES + TABLE_EXTRA
    for cells in (header, *rows):
        total += TABLE_ROW_EXTRA
        boxes = [layout.box(c, display=False) for c in cells if c]
        h = max([TABLE_STRUT_H] + [_table_scale(c, b.h) for c, b in zip(cells, boxes)])
        d = max([TABLE_STRUT_D] + [_table_scale(c, b.d) for c, b in zip(cells, boxes)])
        total += h + d
    return total


def _table_scale(latex: str, size: float) -> float:
    # a table's scripts are as large as its text (10.5 pt both): scripted cells are
    # a little taller than the text's scale gives
    return size * TABLE_MATH + (TABLE_SCRIPTS if ("^" in latex or "_" in latex) else 0.0)
