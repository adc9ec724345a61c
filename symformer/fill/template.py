"""Fill an author's LaTeX or Markdown with certified values, using Jinja2.

Placeholders (the delimiters differ by format, see :data:`DELIMITERS`)::

    LaTeX:     \\VAR{ layer1.head1.weights[1,3] | percent(1) }
    Markdown:  {{ layer1.head1.weights[1,3] | percent(1) }}

Jinja2's own ``{{ }}``, ``{% %}`` and ``{# #}`` collide with LaTeX (``{#1}`` in
every macro definition, ``{%`` at the end of macro lines, ``{{\\em x}}``), so LaTeX
files use ``\\VAR{...}`` for values, ``\\BLOCK{...}`` for statements (loops) and
``\\COMMENT{...}`` for comments: control sequences no LaTeX package defines.
Markdown keeps Jinja2's usual delimiters.

The template runs in Jinja2's sandbox with :class:`jinja2.StrictUndefined`: an
unknown name, stage, entry or format is an error naming the line, and then nothing
is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from symformer.engine import Derivation, Stage
from symformer.engine.rounding import Rounded, Undecided
from symformer.errors import ClosedFormTooLarge, InputError
from symformer.fill.values import Entry, FillError, Node, Row, namespace

DELIMITERS: dict[str, dict[str, str]] = {
    "latex": {"variable_start_string": r"\VAR{", "variable_end_string": "}",
              "block_start_string": r"\BLOCK{", "block_end_string": "}",
              "comment_start_string": r"\COMMENT{", "comment_end_string": "}"},
    "markdown": {},
}
_SUFFIXES = {".tex": "latex", ".ltx": "latex", ".md": "markdown", ".markdown": "markdown"}
#: The template's name in tracebacks (how an error's line is found).
_NAME = "<notes>"


def guess_format(path: str) -> str:
    """``latex`` or ``markdown`` from the file's suffix."""
    fmt = _SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"{path}: cannot tell LaTeX from Markdown by the suffix; "
                         "give --format latex or --format markdown")
    return fmt


class Formatter:
    """Certified values as text for one output format."""

    def __init__(self, fmt: str, decimals: int) -> None:
        self.fmt, self.decimals = fmt, decimals
        self._cache: dict[tuple[str, int], list[list[Rounded | None]]] = {}

    def rounded(self, stage: Stage, decimals: int) -> list[list[Rounded | None]]:
        key = (stage.name, decimals)
        if key not in self._cache:
            self._cache[key] = stage.rounded(decimals=decimals)
        return self._cache[key]

    def number(self, text: str) -> str:
        """A decimal string in the format (LaTeX: a real minus sign anywhere)."""
        if text == "-inf":
            return r"\ensuremath{-\infty}" if self.fmt == "latex" else "-∞"
        if self.fmt == "latex" and text.startswith("-"):
            return f"\\ensuremath{{{text}}}"
        return text

    def decimal(self, entry: Entry, decimals: int) -> str:
        r = self.rounded(entry.stage, decimals)[entry.i][entry.j]
        return self.number("-inf" if r is None else r.fixed())

    def percent(self, entry: Entry, decimals: int) -> str:
        r = self.rounded(entry.stage, decimals + 2)[entry.i][entry.j]
        if r is None:
            raise FillError(f"{entry.where} is a masked score (-inf), not a share")

        def shift(x: Rounded) -> str:
            return Rounded(x.digits, x.exponent + 2).fixed()

        text = (f"{shift(r.low)}..{shift(r.high)}?" if isinstance(r, Undecided)
                else shift(r))
        return self.number(text) + ("\\%" if self.fmt == "latex" else "%")

    def exact(self, entry: Entry) -> str:
        from symformer.latex.numbers import exact

        try:
            return exact(entry.stage.closed_form(entry.i, entry.j))
        except ClosedFormTooLarge:
            raise FillError(f"{entry.where}: the closed form is too long to print; "
                            "use | decimals(n)") from None

    def matrix(self, stage: Stage, rows: list[int], decimals: int) -> list[list[str]]:
        table = self.rounded(stage, decimals)
        return [["-inf" if r is None else r.fixed() for r in table[i]] for i in rows]

    def table(self, stage: Stage, rows: list[int], decimals: int) -> str:
        from symformer.latex.escape import latex_text, markdown_text

        values = self.matrix(stage, rows, decimals)
        if self.fmt == "markdown":
            head = "| | " + " | ".join(markdown_text(c) for c in stage.cols) + " |"
            rule = "|---|" + "---:|" * len(stage.cols)
            body = [f"| {i} {markdown_text(stage.rows[i])} | "
                    + " | ".join(v.replace("-inf", "−∞") for v in row) + " |"
                    for i, row in zip(rows, values)]
            return "\n".join([head, rule, *body])
        cells = [[f"${v}$" if v != "-inf" else r"$-\infty$" for v in row] for row in values]
        lines = [f"\\begin{{tabular}}{{l{'r' * len(stage.cols)}}}", r"\toprule",
                 " & " + " & ".join(latex_text(c) for c in stage.cols) + r" \\", r"\midrule"]
        lines += [f"{i}\\ {latex_text(stage.rows[i])} & " + " & ".join(row) + r" \\"
                  for i, row in zip(rows, cells)]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines)

    def bmatrix(self, stage: Stage, rows: list[int], decimals: int) -> str:
        values = self.matrix(stage, rows, decimals)
        body = r" \\ ".join(" & ".join(r"-\infty" if v == "-inf" else v for v in row)
                            for row in values)
        return f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}"


def _whole(value, what: str) -> tuple[Stage, list[int]]:
    if isinstance(value, Row):
        return value.stage, [value.i]
    if isinstance(value, Node):
        stage = value._stage()
        return stage, list(range(stage.shape[0]))
    raise FillError(f"| {what} needs a stage or a token's row, found {_describe(value)}")


def _entry(value, what: str) -> Entry:
    if isinstance(value, Entry):
        return value
    raise FillError(f"| {what} needs one entry (stage[i, j]), found {_describe(value)}")


def _describe(value) -> str:
    if isinstance(value, Entry):
        return f"the entry {value.where}"
    if isinstance(value, Row):
        return f"the row {value.stage.name}[{value.i}]"
    if isinstance(value, Node):
        return f"the stage {value._prefix}"
    return repr(value)


def _places(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100:
        raise FillError(f"| {what}(n): n is a whole number of decimals 0..100, found {n!r}")
    return n


def filters(f: Formatter) -> dict[str, Callable]:
    """The formats a placeholder can ask for."""
    def decimals(value, n=f.decimals):
        n = _places(n, "decimals")
        if isinstance(value, Row):
            row = f.matrix(value.stage, [value.i], n)[0]
            return "(" + ", ".join(f.number(v) for v in row) + ")"
        return f.decimal(_entry(value, "decimals"), n)

    def percent(value, n=1):
        return f.percent(_entry(value, "percent"), _places(n, "percent"))

    def exact(value):
        return f.exact(_entry(value, "exact"))

    def table(value, n=f.decimals):
        return f.table(*_whole(value, "table"), _places(n, "table"))

    def bmatrix(value, n=f.decimals):
        return f.bmatrix(*_whole(value, "bmatrix"), _places(n, "bmatrix"))

    return {"decimals": decimals, "percent": percent, "exact": exact, "table": table,
            "bmatrix": bmatrix}


def environment(fmt: str, formatter: Formatter) -> SandboxedEnvironment:
    """The sandboxed Jinja2 environment for ``fmt``."""
    def finalize(value):
        if isinstance(value, Entry | Row):
            return formatter_filters["decimals"](value)
        if isinstance(value, Node):
            str(value)  # raises: a whole stage needs a format
        return value

    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                               autoescape=False, finalize=finalize, **DELIMITERS[fmt])
    env.filters.clear()
    formatter_filters = filters(formatter)
    env.filters.update(formatter_filters)
    return env


def fill(text: str, g: Derivation, fmt: str, decimals: int = 2, source: str = "NOTES") -> str:
    """``text`` with every placeholder replaced by certified values.

    Raises :class:`~symformer.errors.InputError` naming ``source`` and the line of
    the first bad placeholder.
    """
    formatter = Formatter(fmt, decimals)
    env = environment(fmt, formatter)
    try:
        template = env.from_string(text)
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(f"{source}:{exc.lineno}: {_syntax_message(exc, fmt)}") from None
    try:
        return template.render(namespace(g))
    except (FillError, jinja2.TemplateError, TypeError, ValueError, ArithmeticError) as exc:
        line = _template_line(exc)
        where = f"{source}:{line}" if line else source
        message = str(exc) if not isinstance(exc, jinja2.UndefinedError) else (
            f"{exc} (names are stage names: `symformer derive --list`)")
        raise InputError(f"{where}: {message}") from None


def _syntax_message(exc: jinja2.TemplateSyntaxError, fmt: str) -> str:
    message = (exc.message or "template syntax error").rstrip(".")
    if message.startswith("No filter named"):
        message += "; the formats are decimals(n), percent(n), exact, table, bmatrix"
    return message


def _template_line(exc: BaseException) -> int | None:
    """The line of the template where ``exc`` was raised (Jinja2 rewrites the frames)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
