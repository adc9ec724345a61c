"""Fill an author's LaTeX or Markdown with certified values.

Placeholders (the delimiters differ by format, see :data:`DELIMITERS`)::

    LaTeX:     \\VAR{ layer1.head1.weights[1,3] | percent(1) }
    Markdown:  {{ layer1.head1.weights[1,3] | percent(1) }}   (or LaTeX's \\VAR{ ... })

The template language is our own small subset of Jinja2's syntax
(:mod:`symformer.fill.syntax`): values, ``for`` loops over literal lists and
``range``, comments.  It has no attribute access, calls, operators or globals, and
its values are plain records (:mod:`symformer.fill.values`), so a template from a
stranger runs no code.  Its work is bounded: :data:`~symformer.fill.syntax.MAX_STEPS`
steps, :data:`~symformer.fill.syntax.MAX_OUTPUT` characters written, and the limits
of the syntax (:data:`~symformer.fill.syntax.MAX_TAGS`, :data:`~symformer.fill.syntax.MAX_INTEGER`,
:data:`~symformer.fill.syntax.MAX_DEPTH`, ...).
An error names the line, and then nothing is written.
"""

from __future__ import annotations

from pathlib import Path as FilePath

from symformer.engine import Derivation
from symformer.engine.rounding import Rounded, Undecided
from symformer.errors import ClosedFormTooLarge, InputError
from symformer.fill.syntax import (
    DELIMITERS,
    MAX_OUTPUT,
    MAX_STEPS,
    FillError,
    Literal,
    Loop,
    Misspelled,
    Node,
    Path,
    Range,
    Text,
    Value,
    parse,
)
from symformer.fill.values import Entry, Names, Row, Whole
from symformer.rendering import DEFAULT_DECIMALS

#: The places a format may ask for.
MAX_PLACES = 100

_SUFFIXES = {".tex": "latex", ".ltx": "latex", ".md": "markdown", ".markdown": "markdown"}

__all__ = ["DELIMITERS", "MAX_STEPS", "MAX_OUTPUT", "Template", "fill", "guess_format"]


def guess_format(path: str) -> str:
    """``latex`` or ``markdown`` from the file's suffix."""
    fmt = _SUFFIXES.get(FilePath(path).suffix.lower())
    if fmt is None:
        raise InputError(f"{path}: cannot tell LaTeX from Markdown by the suffix; "
                         "give --format latex or --format markdown")
    return fmt


class Formatter:
    """Certified values as text for one output format (each text made once)."""

    def __init__(self, g: Derivation, fmt: str, decimals: int) -> None:
        self.g, self.fmt, self.decimals = g, fmt, decimals
        self._rounded: dict[tuple[str, int], list[list[Rounded | None]]] = {}
        self._texts: dict[tuple, str] = {}

    def format(self, value: Entry | Row | Whole, name: str | None,
               args: tuple[int | str, ...]) -> str:
        """``value | name(args)``; the default format is ``decimals``."""
        key = (value, name, args)
        if key not in self._texts:
            self._texts[key] = self._format(value, name or "decimals", args)
        return self._texts[key]

    def _format(self, value: Entry | Row | Whole, name: str,
                args: tuple[int | str, ...]) -> str:
        if name == "exact":
            if args:
                raise FillError("| exact takes no number")
            return self.exact(_entry(value, name))
        if len(args) > 1:
            raise FillError(f"| {name}(n) takes one number, found {len(args)}")
        default = 1 if name == "percent" else self.decimals
        n = _places(args[0] if args else default, name)
        if name == "decimals":
            if isinstance(value, Row):
                row = self.matrix(value.stage, [value.i], n)[0]
                return "(" + ", ".join(self.number(v) for v in row) + ")"
            if isinstance(value, Whole):
                raise FillError(f"{value.stage} is a whole stage: add | table or "
                                f"| bmatrix, or name an entry {value.stage}[i, j] or a "
                                f"row {value.stage}[i]")
            return self.decimal(_entry(value, name), n)
        if name == "percent":
            return self.percent(_entry(value, name), n)
        stage, rows = self._whole(value, name)
        return (self.table if name == "table" else self.bmatrix)(stage, rows, n)

    def rounded(self, stage: str, decimals: int) -> list[list[Rounded | None]]:
        key = (stage, decimals)
        if key not in self._rounded:
            self._rounded[key] = self.g[stage].rounded(decimals=decimals)
        return self._rounded[key]

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
            return exact(self.g.closed_form(entry.stage, entry.i, entry.j))
        except ClosedFormTooLarge:
            raise FillError(f"{entry.where}: the closed form is too long to print; "
                            "use | decimals(n)") from None

    def matrix(self, stage: str, rows: list[int], decimals: int) -> list[list[str]]:
        table = self.rounded(stage, decimals)
        return [["-inf" if r is None else r.fixed() for r in table[i]] for i in rows]

    def table(self, name: str, rows: list[int], decimals: int) -> str:
        from symformer.latex.escape import latex_text, markdown_text

        stage = self.g[name]
        values = self.matrix(name, rows, decimals)
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

    def bmatrix(self, stage: str, rows: list[int], decimals: int) -> str:
        values = self.matrix(stage, rows, decimals)
        body = r" \\ ".join(" & ".join(r"-\infty" if v == "-inf" else v for v in row)
                            for row in values)
        return f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}"

    def _whole(self, value: Entry | Row | Whole, what: str) -> tuple[str, list[int]]:
        if isinstance(value, Row):
            return value.stage, [value.i]
        if isinstance(value, Whole):
            return value.stage, list(range(self.g[value.stage].shape[0]))
        raise FillError(f"| {what} needs a stage or a token's row, found "
                        f"{_describe(value)}")


def _entry(value: Entry | Row | Whole, what: str) -> Entry:
    if isinstance(value, Entry):
        return value
    raise FillError(f"| {what} needs one entry (stage[i, j]), found {_describe(value)}")


def _describe(value: object) -> str:
    if isinstance(value, Entry):
        return f"the entry {value.where}"
    if isinstance(value, Row):
        return f"the row {value.stage}[{value.i}]"
    if isinstance(value, Whole):
        return f"the stage {value.stage}"
    return repr(value)


def _places(n: int | str, what: str) -> int:
    if not isinstance(n, int) or not 0 <= n <= MAX_PLACES:
        raise FillError(f"| {what}(n): n is a whole number of decimals 0..{MAX_PLACES}, "
                        f"found {n!r}")
    return n


class _Renderer:
    """Walks the parsed template within the limits, collecting the output."""

    def __init__(self, names: Names, formatter: Formatter) -> None:
        self.names, self.formatter = names, formatter
        self.out: list[str] = []
        self.size = 0
        self.steps = 0

    def emit(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise FillError(f"the filled text would be longer than the limit of "
                            f"{MAX_OUTPUT:,} characters")
        self.out.append(text)

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise FillError(f"the template takes more than the limit of {MAX_STEPS:,} "
                            "steps (a text or value written, a loop entered, a loop "
                            "body run: each is a step)")

    def run(self, nodes: tuple[Node, ...], scope: dict[str, int | str]) -> None:
        for node in nodes:
            self.step()
            if isinstance(node, Text):
                self.emit(node.text)
                continue
            if isinstance(node, Misspelled):
                self.misspelled(node)
                continue
            try:
                if isinstance(node, Value):
                    self.emit(self.value(node, scope))
                else:
                    self.loop(node, scope)
            except FillError as exc:
                if exc.line is None:
                    exc.line = node.line
                raise

    def misspelled(self, node: Misspelled) -> None:
        """A Markdown tag in LaTeX: an error when it names a stage or is a loop, else
        the TeX it is (``{{x}}``, a group in a group)."""
        value, inner = node.value, node.text[2:-2]
        if value is None:
            raise FillError(f"{node.text} is the Markdown spelling of a loop tag; in "
                            f"LaTeX write \\BLOCK{{{inner}}}", node.line)
        expr = value.expr
        if isinstance(expr, Path) and expr.parts[0] in self.names.tops and (
                node.spaced or len(expr.parts) > 1 or expr.index is not None
                or value.format is not None):
            raise FillError(f"{node.text} is the Markdown spelling of a placeholder; in "
                            f"LaTeX write \\VAR{{{inner}}}", node.line)
        self.emit(node.text)

    def loop(self, node: Loop, scope: dict[str, int | str]) -> None:
        if node.var in self.names.tops:
            raise FillError(f"the loop variable {node.var!r} hides the stages named "
                            f"{node.var}...; pick another name")
        if isinstance(node.items, Range):
            bounds = [self.integer(a, scope, "range") for a in node.items.args]
            items: range | tuple[int | str, ...] = range(*bounds)
        else:
            items = tuple(item.value for item in node.items)
        inner = dict(scope)
        for item in items:
            self.step()
            inner[node.var] = item
            self.run(node.body, inner)

    def integer(self, arg: Literal | str, scope: dict[str, int | str], what: str) -> int:
        value = self.argument(arg, scope)
        if not isinstance(value, int):
            raise FillError(f"{what}(...) needs whole numbers, found {value!r}")
        return value

    def argument(self, arg: Literal | str, scope: dict[str, int | str]) -> int | str:
        if isinstance(arg, Literal):
            return arg.value
        if arg not in scope:
            raise FillError(f"unknown loop variable {arg!r} (an index or a number is "
                            "a number, a name in quotes or a loop variable)")
        return scope[arg]

    def value(self, node: Value, scope: dict[str, int | str]) -> str:
        args = tuple(self.argument(a, scope) for a in node.args)
        expr = node.expr
        if isinstance(expr, Literal) or (isinstance(expr, Path) and len(expr.parts) == 1
                                          and expr.parts[0] in scope):
            plain = expr.value if isinstance(expr, Literal) else scope[expr.parts[0]]
            if isinstance(expr, Path) and expr.index is not None:
                raise FillError(f"{expr.parts[0]} is a loop variable ({plain!r}): it "
                                "has no index")
            if node.format is not None:
                raise FillError(f"| {node.format} needs a stage, a row or an entry, "
                                f"found {plain!r}")
            return str(plain)
        if expr.parts[0] in scope:
            raise FillError(f"{expr.parts[0]} is a loop variable: it has no "
                            f"{expr.parts[1]!r}")
        whole = self.names.stage(expr.parts)
        value: Entry | Row | Whole = whole
        if expr.index is not None:
            value = self.names.index(whole.stage, tuple(self.argument(k, scope)
                                                        for k in expr.index))
        return self.formatter.format(value, node.format, args)


class Template:
    """A parsed template; parsing needs no derivation, so bad syntax costs no work.

    Raises :class:`~symformer.errors.InputError` naming ``source`` and the line.
    """

    def __init__(self, text: str, fmt: str, source: str = "NOTES") -> None:
        self.source = source
        self.fmt = fmt
        try:
            self.nodes = parse(text, fmt)
        except FillError as exc:
            raise self._error(exc) from None

    def render(self, g: Derivation, decimals: int = DEFAULT_DECIMALS) -> str:
        """The text with every placeholder replaced by certified values of ``g``."""
        renderer = _Renderer(Names(g), Formatter(g, self.fmt, decimals))
        try:
            renderer.run(self.nodes, {})
        except FillError as exc:
            raise self._error(exc) from None
        return "".join(renderer.out)

    def _error(self, exc: FillError) -> InputError:
        where = f"{self.source}:{exc.line}" if exc.line else self.source
        return InputError(f"{where}: {exc}")


def fill(text: str, g: Derivation, fmt: str, decimals: int = DEFAULT_DECIMALS,
         source: str = "NOTES") -> str:
    """``text`` with every placeholder replaced by certified values.

    Raises :class:`~symformer.errors.InputError` naming ``source`` and the line of
    the first bad placeholder or the limit exceeded.
    """
    return Template(text, fmt, source).render(g, decimals)
