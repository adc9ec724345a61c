"""The template language of ``symformer fill``: a small subset of Jinja2's syntax.

Parsed by hand, evaluated by :mod:`symformer.fill.template`; nothing in a template
is ever handed to Python, Jinja2 or SymPy.  The whole grammar (``{{ }}``, ``{% %}``
and ``{# #}`` are Markdown's delimiters; LaTeX writes ``\\VAR{ }``, ``\\BLOCK{ }``
and ``\\COMMENT{ }``, which Markdown accepts too: :data:`ACCEPTED`)::

    value      {{ EXPR }}  or  {{ EXPR | FORMAT }}  or  {{ EXPR | FORMAT(ARG) }}
    loop       {% for NAME in LIST %} ... {% endfor %}
    comment    {# anything but the closing delimiter #}
    EXPR       NAME(.NAME)*                     a stage, or a loop variable
             | NAME(.NAME)*[INDEX]               a token's row
             | NAME(.NAME)*[INDEX, INDEX]        an entry
             | STRING | INT                      printed as it is
    INDEX      INT | STRING | NAME               a position, a token or column name,
                                                 or a loop variable
    FORMAT     decimals | percent | exact | table | bmatrix
    ARG        INT | NAME                        decimals (a loop variable too)
    LIST       [ITEM, ...]  (ITEM: INT or STRING)  |  range(ARG)  |  range(ARG, ARG)

Both spellings are unambiguous in Markdown, which has no ``\\VAR{``.  In LaTeX ``{{`` and
``{%`` are ordinary TeX (a group in a group, a group and a comment), so they stay text;
but text that reads as a Markdown tag naming a stage (``{{ layer1.head1.Q[0,0] }}``)
or a loop (``{% for i in range(2) %}``) is refused with its line
(:class:`Misspelled`), since it would otherwise be printed as it is.

A ``-`` just inside a delimiter (``{{- x -}}``, ``\\VAR{- x}``) removes the
whitespace before (after) the tag, as in Jinja2.  Limits: integers within
±:data:`MAX_INTEGER`, loops nested at most :data:`MAX_DEPTH` deep, :data:`MAX_TAGS`
tags of at most :data:`MAX_TAG_TOKENS` tokens each.  Every error is a
:class:`FillError` carrying the line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

#: The largest integer a template may write (in a literal, an index or a range).
MAX_INTEGER = 1_000_000
#: The most Markdown-looking tags (``{{ x }}``) read in a LaTeX template's text to
#: find a misspelled placeholder; TeX's own ``{{`` after that many stays unread text.
MAX_LOOKED = 10_000
#: The deepest nesting of loops.
MAX_DEPTH = 16
#: The most tags (values, statements, comments) in a template.
MAX_TAGS = 100_000
#: The most tokens in one tag (a loop's list of 5,000 items has about 10,000).
MAX_TAG_TOKENS = 10_000
#: Steps a template may take when it is filled: each text copied, value written, loop
#: entered and loop body run is one (a body's texts and values count on every run).
MAX_STEPS = 1_000_000
#: Characters a filled template may have (16 MiB of ASCII).
MAX_OUTPUT = 16 * 2**20

#: (value start, statement start, comment start, end of each) per format.
DELIMITERS: dict[str, dict[str, str]] = {
    "latex": {"value": r"\VAR{", "statement": r"\BLOCK{", "comment": r"\COMMENT{",
              "value_end": "}", "statement_end": "}", "comment_end": "}"},
    "markdown": {"value": "{{", "statement": "{%", "comment": "{#",
                 "value_end": "}}", "statement_end": "%}", "comment_end": "#}"},
}
#: The delimiter spellings each format reads (Markdown reads LaTeX's too).
ACCEPTED: dict[str, tuple[str, ...]] = {"latex": ("latex",), "markdown": ("markdown", "latex")}
#: In LaTeX text, what may be a Markdown tag written by mistake: on one line, with no
#: ``{`` inside (so that a search from each ``{{`` stops at the next one: linear time).
_MARKDOWN_TAG = re.compile(r"\{\{(?P<value>[^\n{]*?)\}\}|\{%(?P<statement>[^\n{]*?)%\}")
#: The formats (filters) a value can ask for.
FORMATS = ("decimals", "percent", "exact", "table", "bmatrix")
FORMAT_LIST = "decimals(n), percent(n), exact, table(n), bmatrix(n)"
_GRAMMAR_HINT = ("a template has only values STAGE, STAGE[i], STAGE[i, j] with an "
                 "optional | FORMAT, and loops for NAME in [..] / range(..)")

_ARITHMETIC = {"*", "+", "-", "/", "%", "~", "<", ">", "=", "!", "&", "^"}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}


class FillError(Exception):
    """A template that is not valid or names nothing (``line`` where, if known)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class Token(NamedTuple):
    """``kind`` is ``name``, ``int``, ``string``, ``punct``, ``operator`` or ``end``."""

    kind: str
    value: int | str
    line: int


@dataclass(frozen=True, slots=True)
class Literal:
    """An integer or a string written in the template."""

    value: int | str


@dataclass(frozen=True, slots=True)
class Path:
    """``layer1.head1.weights`` with an optional ``[i]`` or ``[i, j]``."""

    parts: tuple[str, ...]
    index: tuple[Literal | str, ...] | None  # a str is a loop variable's name


@dataclass(frozen=True, slots=True)
class Value:
    """A placeholder: what to print and its format, on ``line``."""

    expr: Path | Literal
    format: str | None
    args: tuple[Literal | str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Text:
    """Text copied as it is."""

    text: str


@dataclass(frozen=True, slots=True)
class Range:
    """``range(a)`` or ``range(a, b)``; a bound is a literal or a loop variable."""

    args: tuple[Literal | str, ...]


@dataclass(frozen=True, slots=True)
class Loop:
    """``for var in items``: ``body`` once per item."""

    var: str
    items: tuple[Literal, ...] | Range
    body: tuple[Text | Value | Loop, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Misspelled:
    """LaTeX text that parses as a Markdown tag: ``value`` (a :class:`Value`) or a loop
    statement (``value`` None).  It is copied as the text it is, unless it names a
    stage (a dotted name, an index, a format or a spaced tag) or is a statement: then
    filling stops with an error naming ``line`` (the renderer decides, knowing the
    stage names)."""

    text: str
    value: Value | None
    spaced: bool
    line: int


Node = Text | Value | Loop | Misspelled


def parse(text: str, fmt: str) -> tuple[Node, ...]:
    """The template ``text`` (LaTeX or Markdown delimiters) as a tree."""
    openers = {DELIMITERS[spelling][k]: (k, DELIMITERS[spelling][k + "_end"])
               for spelling in ACCEPTED[fmt] for k in ("value", "statement", "comment")}
    pattern = re.compile("|".join(re.escape(s) for s in sorted(openers, key=len,
                                                                reverse=True)))

    looked = [0]  # Markdown-looking tags read in LaTeX text: at most MAX_LOOKED

    def add(body: list[Node], chunk: str, at: int) -> None:
        """Text from line ``at``; in LaTeX, Markdown-looking tags as :class:`Misspelled`."""
        if fmt == "latex" and looked[0] < MAX_LOOKED:
            looked[0] += _add_latex_text(body, chunk, at, MAX_LOOKED - looked[0])
        else:
            _add_text(body, chunk)

    # stack of (loop being built or None for the top, its body)
    stack: list[tuple[tuple[str, tuple[Literal, ...] | Range, int] | None, list[Node]]]
    stack = [(None, [])]
    pos, line, trim_next, tags = 0, 1, False, 0
    while True:
        m = pattern.search(text, pos)
        chunk = text[pos:m.start() if m else len(text)]
        chunk_line = line
        line += chunk.count("\n")
        if m is None:
            kept = chunk.lstrip() if trim_next else chunk
            add(stack[-1][1], kept, chunk_line + chunk[:len(chunk) - len(kept)].count("\n"))
            break
        kind, end = openers[m.group()]
        tags += 1
        if tags > MAX_TAGS:
            raise FillError(f"the template has more than the limit of {MAX_TAGS:,} tags "
                            "(values, statements and comments)", line)
        pos = m.end()
        trim_before = text.startswith("-", pos)
        if trim_before:
            pos += 1
            chunk = chunk.rstrip()
        kept = chunk.lstrip() if trim_next else chunk
        add(stack[-1][1], kept, chunk_line + chunk[:len(chunk) - len(kept)].count("\n"))
        tag_line = line
        if kind == "comment":
            close = text.find(end, pos)
            if close < 0:
                raise FillError(f"a comment {m.group()}... is never closed with {end}",
                                tag_line)
            trim_next = close > pos and text[close - 1] == "-"
            line += text.count("\n", pos, close)
            pos = close + len(end)
            continue
        tokens, pos, line, trim_next = _tokens(text, pos, line, end, m.group())
        if kind == "value":
            stack[-1][1].append(_value(tokens, tag_line))
            continue
        statement = _statement(tokens, tag_line)
        if statement is None:  # endfor
            head, body = stack.pop()
            if head is None:
                raise FillError("endfor without a for", tag_line)
            var, items, loop_line = head
            stack[-1][1].append(Loop(var, items, tuple(body), loop_line))
        else:
            if len(stack) > MAX_DEPTH:
                raise FillError(f"loops are nested more than {MAX_DEPTH} deep (the limit)",
                                tag_line)
            stack.append(((*statement, tag_line), []))
    if len(stack) > 1:
        head = stack[-1][0]
        assert head is not None
        raise FillError(f"for {head[0]} in ... is never closed with endfor", head[2])
    return tuple(stack[0][1])


def _add_text(body: list[Node], text: str) -> None:
    if text:
        body.append(Text(text))


def _add_latex_text(body: list[Node], text: str, line: int, most: int) -> int:
    """LaTeX text, each piece that parses as a Markdown value or loop tag kept apart
    as a :class:`Misspelled` (anything else that looks like one is plain TeX); at most
    ``most`` pieces are read (a bound on the work: the rest stays text).  Returns how
    many were read."""
    at = counted = read = 0
    for m in _MARKDOWN_TAG.finditer(text):
        if read >= most:
            break
        read += 1
        line += text.count("\n", counted, m.start())
        counted = m.start()
        here = line
        inner = m["value"] if m["value"] is not None else m["statement"]
        end = "}}" if m["value"] is not None else "%}"
        inner = inner.removeprefix("-")
        try:
            tokens, _, _, _ = _tokens(inner + end, 0, here, end, m.group()[:2])
            if m["value"] is not None:
                value: Value | None = _value(tokens, here)
            else:
                _statement(tokens, here)
                value = None
        except FillError:
            continue  # not a tag of the language: TeX
        _add_text(body, text[at:m.start()])
        body.append(Misspelled(m.group(), value, inner[:1].isspace(), here))
        at = m.end()
    _add_text(body, text[at:])
    return read


def _tokens(text: str, pos: int, line: int, end: str, opener: str
            ) -> tuple[list[Token], int, int, bool]:
    """The tokens of one tag up to ``end``; returns them, the position after ``end``,
    the line there and whether the tag asked to trim the whitespace after it."""
    pattern = _token_pattern(end)
    tokens: list[Token] = []
    first = line
    while True:
        m = pattern.match(text, pos)
        assert m is not None  # every group after the space is optional
        space = m.group("space")
        if "\n" in space:
            line += space.count("\n")
        pos = m.end()
        kind = m.lastgroup
        if len(tokens) >= MAX_TAG_TOKENS:
            raise FillError(f"a tag of more than the limit of {MAX_TAG_TOKENS:,} tokens",
                            first)
        if kind == "end":
            tokens.append(Token("end", end, line))
            return tokens, pos, line, m.group("end").startswith("-")
        if kind == "name":
            tokens.append(Token("name", m.group("name"), line))
        elif kind == "int":
            tokens.append(Token("int", _integer(m.group("int"), line), line))
        elif kind == "string":
            tokens.append(Token("string", m.group("string")[1:-1], line))
        elif kind == "punct":
            tokens.append(Token("punct", m.group("punct"), line))
        elif pos >= len(text):
            raise FillError(f"{opener}... is never closed with {end}", first)
        elif text[pos] in "'\"":  # a string with escapes
            value, pos, line = _string(text, pos, line)
            tokens.append(Token("string", value, line))
        elif text[pos] in _ARITHMETIC:
            tokens.append(Token("operator", text[pos], line))
            pos += 1
        else:
            raise FillError(f"unexpected {text[pos]!r}; {_GRAMMAR_HINT}", line)


@functools.cache
def _token_pattern(end: str) -> re.Pattern[str]:
    """Space, then the end of the tag or one simple token (all optional)."""
    return re.compile(
        r"(?P<space>\s*)(?:(?P<end>-?" + re.escape(end) + r")"
        r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<int>-?[0-9]+)"
        r"|(?P<string>\"[^\"\\\n]*\"|'[^'\\\n]*')|(?P<punct>[.,\[\]()|]))?")


def _integer(digits: str, line: int) -> int:
    """A whole number within the limit (its length checked before it is converted)."""
    size = len(digits.lstrip("-"))
    if size > len(str(MAX_INTEGER)) or abs(int(digits)) > MAX_INTEGER:
        shown = digits if size <= 12 else digits[:13] + "..."
        raise FillError(f"the integer {shown} is larger than the limit of {MAX_INTEGER:,}",
                        line)
    return int(digits)


def _string(text: str, pos: int, line: int) -> tuple[str, int, int]:
    quote, out, k = text[pos], [], pos + 1
    while k < len(text):
        c = text[k]
        if c == quote:
            return "".join(out), k + 1, line
        if c == "\n":
            raise FillError("a string is not closed on its line", line)
        if c == "\\":
            nxt = text[k + 1:k + 2]
            if nxt not in _ESCAPES:
                raise FillError(f"unknown escape \\{nxt} in a string (\\\\, \\', \\\", "
                                "\\n, \\t)", line)
            out.append(_ESCAPES[nxt])
            k += 2
            continue
        out.append(c)
        k += 1
    raise FillError("a string is not closed", line)


class _Reader:
    """The tokens of one tag, read left to right."""

    def __init__(self, tokens: list[Token], line: int) -> None:
        self.tokens, self.k, self.line = tokens, 0, line

    def peek(self) -> Token:
        return self.tokens[self.k]

    def next(self) -> Token:
        token = self.tokens[self.k]
        if token.kind != "end":
            self.k += 1
        return token

    def is_punct(self, c: str) -> bool:
        t = self.peek()
        return t.kind == "punct" and t.value == c

    def expect(self, c: str, what: str) -> None:
        if not self.is_punct(c):
            self.fail(what)
        self.next()

    def fail(self, what: str) -> NoReturn:
        t = self.peek()
        if t.kind == "operator":
            raise FillError(f"unexpected {t.value!r}: a template has no operators (no "
                            "arithmetic, comparison or string concatenation)", t.line)
        found = "end of the tag" if t.kind == "end" else repr(t.value)
        raise FillError(f"unexpected {found}; expected {what}", t.line)

    def done(self, what: str) -> None:
        if self.peek().kind != "end":
            self.fail(what)


def _value(tokens: list[Token], line: int) -> Value:
    r = _Reader(tokens, line)
    t = r.peek()
    expr: Path | Literal
    if t.kind in ("int", "string"):
        expr = Literal(r.next().value)
    elif t.kind == "name":
        expr = _path(r)
    else:
        r.fail("a stage name")
    fmt, args = None, ()
    if r.is_punct("|"):
        r.next()
        fmt, args = _format(r)
    if r.is_punct("|"):
        raise FillError("one format per value: a second | found", r.peek().line)
    if r.is_punct("."):
        raise FillError("unexpected '.': a value has no attributes; "
                        + _GRAMMAR_HINT, r.peek().line)
    r.done("| FORMAT or the end of the value")
    return Value(expr, fmt, args, line)


def _path(r: _Reader) -> Path:
    parts = [_name(r)]
    while r.is_punct("."):
        r.next()
        if r.peek().kind != "name":
            r.fail("a name after '.'")
        parts.append(_name(r))
    if r.is_punct("("):
        name = ".".join(parts)
        if name == "range":
            raise FillError("range(...) is only for loops: {% for i in range(n) %}",
                            r.peek().line)
        raise FillError(f"{name}(...): a template calls nothing; {_GRAMMAR_HINT}",
                        r.peek().line)
    index = None
    if r.is_punct("["):
        r.next()
        items = [_index(r)]
        if r.is_punct(","):
            r.next()
            items.append(_index(r))
        r.expect("]", "']' (an index is [row] or [row, column])")
        index = tuple(items)
    return Path(tuple(parts), index)


def _name(r: _Reader) -> str:
    t = r.next()
    name = str(t.value)
    if name.startswith("_"):
        raise FillError(f"{name}: no name starts with '_' (stage names and loop "
                        "variables do not)", t.line)
    return name


def _index(r: _Reader) -> Literal | str:
    t = r.peek()
    if t.kind in ("int", "string"):
        return Literal(r.next().value)
    if t.kind == "name":
        name = _name(r)
        if r.is_punct(".") or r.is_punct("[") or r.is_punct("("):
            r.fail("',' or ']' (an index is a number, a name in quotes or a loop "
                   "variable)")
        return name
    r.fail("a position, a name in quotes or a loop variable")


def _format(r: _Reader) -> tuple[str, tuple[Literal | str, ...]]:
    t = r.peek()
    if t.kind != "name":
        r.fail("a format after '|' (" + FORMAT_LIST + ")")
    name = str(r.next().value)
    if name not in FORMATS:
        raise FillError(f"No filter named {name!r}; the formats are {FORMAT_LIST}", t.line)
    args: list[Literal | str] = []
    if r.is_punct("("):
        r.next()
        if not r.is_punct(")"):
            args.append(_argument(r))
            while r.is_punct(","):
                r.next()
                args.append(_argument(r))
        r.expect(")", "')' after the format's number")
    return name, tuple(args)


def _argument(r: _Reader) -> Literal | str:
    t = r.peek()
    if t.kind == "int":
        return Literal(r.next().value)
    if t.kind == "name":
        return _name(r)
    r.fail("a whole number (or a loop variable)")


def _statement(tokens: list[Token], line: int) -> tuple[str, tuple[Literal, ...] | Range] | None:
    """``(var, items)`` for a ``for``, ``None`` for ``endfor``."""
    r = _Reader(tokens, line)
    t = r.peek()
    if t.kind != "name":
        r.fail("for or endfor")
    word = str(r.next().value)
    if word == "endfor":
        r.done("the end of the tag after endfor")
        return None
    if word != "for":
        raise FillError(f"unknown statement {word!r}; the only statements are "
                        "for NAME in LIST and endfor", t.line)
    if r.peek().kind != "name":
        r.fail("a loop variable's name after for")
    var = _name(r)
    if r.is_punct(","):
        r.fail("'in' (one loop variable)")
    t = r.peek()
    if t.kind != "name" or t.value != "in":
        r.fail("'in'")
    r.next()
    items: tuple[Literal, ...] | Range
    if r.is_punct("["):
        r.next()
        found: list[Literal] = []
        while not r.is_punct("]"):
            t = r.peek()
            if t.kind not in ("int", "string"):
                r.fail("a number or a string in the list, or ']'")
            found.append(Literal(r.next().value))
            if not r.is_punct("]"):
                r.expect(",", "',' or ']'")
        r.next()
        items = tuple(found)
    elif r.peek().kind == "name" and r.peek().value == "range":
        r.next()
        r.expect("(", "'(' after range")
        args = [_argument(r)]
        if r.is_punct(","):
            r.next()
            args.append(_argument(r))
        r.expect(")", "')' (range(n) or range(a, b))")
        items = Range(tuple(args))
    else:
        r.fail("a list [..] or range(..) after in")
    r.done("the end of the tag after the loop's list")
    return var, items
