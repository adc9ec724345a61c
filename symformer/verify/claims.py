"""An author's claimed numbers: read from a claims TOML file or from a document.

Claims TOML (rows are 0-based token positions, as ``symformer derive`` numbers them)::

    [[claim]]
    name = "weights"                 # the author's label
    stage = "layer1.head1.weights"   # a stage name (`symformer derive --list`)
    decimals = 3                     # optional: right when |exact - claimed| <= 0.5e-3;
                                     # or significant = 4 (digits of each number); neither:
                                     # each number's own printed digits (0.43: 2 decimals,
                                     # 6.3379e-02: 5 significant digits)
    values = [[0.212, 0.265, 0.158, 0.365], ...]
    rows = [1, 3]                    # optional: the rows of the stage that values gives
    cols = [0, 2]                    # optional: the columns of the stage that values gives
    entry = [1, 2]                   # optional, instead of rows/cols: one entry;
                                     # values = 0.262 or [[0.262]] (a bare number
                                     # without entry: a 1x1 stage, loss = 1.383)
                                     # a value may be an exact expression, "log(2)" or
                                     # "sqrt(2)/2" (the example files' grammar): right
                                     # only when it equals the exact value (proved)
    causal = true                    # optional: the causally masked derivation (default:
                                     # the example's causal setting)
    inputs = { "layer1.add_norm1" = "mha" }  # optional: a local check of the step
    check = true                     # optional: false = only used as another claim's input

A document is Markdown or Python written the way the post is: a line
``print(np.round(NAME, k))`` followed by the printed array as ``#`` comment lines.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symformer.blocks.backward import is_backward_stage, stage_of
from symformer.blocks.side_stages import add_side_stage
from symformer.blocks.train import Run, is_training_stage, train_table
from symformer.engine import Derivation
from symformer.engine.arbmath import precision
from symformer.engine.graph import Stage
from symformer.engine.rounding import leading_exponent
from symformer.errors import InputError
from symformer.example.decoding import Decoding, parse_decoding
from symformer.example.expression import Constant
from symformer.example.fields import Where
from symformer.example.given_inputs import INPUT_KEYS
from symformer.example.literals import exact_value
from symformer.example.loader import read_text_file, read_toml
from symformer.ops.side_parts import MINUS_INF_OPS
from symformer.verify import recompose
from symformer.verify.equation_claims import has_equation_tags
from symformer.verify.prose import prose_numbers

#: Claims may state 0 to MAX_DECIMALS decimals.
MAX_DECIMALS = 30
#: Decimals reports show the exact value to for an exact irrational claim ("log(2)")
#: when the claim gives neither decimals nor significant.
EXACT_CLAIM_DECIMALS = 6
_CLAIM_KEYS = {"name", "stage", "decimals", "significant", "values", "rows", "cols", "entry",
               "causal", "inputs", "check"}
#: A number as printed: sign, digits with an optional point, optional exponent.
_PRINTED = re.compile(r"[+-]?(?P<int>[0-9_]*)(?:\.(?P<frac>[0-9_]*))?"
                      r"(?:[eE](?P<exp>[+-]?[0-9_]+))?", re.ASCII)
_INFINITE = {"-inf", "-infinity"}
_PRINT = re.compile(r"print\(\s*np\.round\(\s*([A-Za-z_]\w*)\s*((?:\[[-0-9:,\s]*\]\s*){0,2})"
                    r",\s*(?:decimals\s*=\s*)?([0-9]{1,4})\s*\)\s*\)", re.ASCII)
#: One index of a printed slice: a row or column number (negative: from the end) or ":".
_INDEX = re.compile(r"\s*(-?[0-9]{1,6}|:)\s*", re.ASCII)
_COMMENT = re.compile(r"^\s*#\s?(.*)$")
_ROW = re.compile(r"\[([^\[\]]*)\]")


@dataclass
class Claim:
    """One claimed matrix (or some of its rows, columns, or one entry) of one stage.

    The precision is ``decimals``, or ``significant`` digits, or (neither given) each
    number's own printed digits; :meth:`decimals_at` gives every entry's decimals.
    """

    name: str
    stage: str
    decimals: int | None
    values: list[list[str]]            # the literal text of every claimed number
    rows: list[int] | None = None      # stage rows the values give (None: all, in order)
    causal: bool | None = None         # None: the example's own setting
    inputs: dict[str, str] = field(default_factory=dict)  # replaced stage -> claim name
    check: bool = True
    where: str = ""                    # for messages: file and claim number
    cols: list[int] | None = None      # stage columns the values give (None: all, in order)
    significant: int | None = None     # significant digits of every number
    entry_given: bool = False          # addressed by ``entry = [row, col]``
    row_lines: list[int] | None = None  # a document's line of each row of values

    @property
    def row_indices(self) -> list[int]:
        """The stage rows of ``values``, in order."""
        return self.rows if self.rows is not None else list(range(len(self.values)))

    @property
    def col_indices(self) -> list[int]:
        """The stage columns of ``values``, in order."""
        return self.cols if self.cols is not None else list(range(len(self.values[0])))

    @property
    def whole(self) -> bool:
        """Does the claim give the whole stage (no ``rows``, ``cols`` or ``entry``)?"""
        return self.rows is None and self.cols is None

    @property
    def precision(self) -> str:
        """The claim's precision in words, for reports."""
        if self.decimals is not None:
            return f"{self.decimals} decimals"
        if self.significant is not None:
            return f"{self.significant} significant digits"
        return "each number's printed digits"

    def decimals_at(self, i: int, j: int) -> int:
        """The decimals of values[i][j]: of the claim, or of its significant digits or text.

        May be negative (``6e3`` is claimed to the thousands); a claimed 0 with
        ``significant`` digits is claimed exactly (see :meth:`half_at`).
        """
        if self.decimals is not None:
            return self.decimals
        value = self.number(i, j)
        if isinstance(value, Constant):  # an exact claim: the digits are only for reports
            if self.significant is None:
                return EXACT_CLAIM_DECIMALS
            return self.significant - 1 - leading_exponent(abs(approximation(value)))
        if self.significant is not None:
            if not value:  # -inf or 0: the significant digits say nothing of a place
                return printed_decimals(self.values[i][j], self.where)
            return self.significant - 1 - leading_exponent(abs(value))
        return printed_decimals(self.values[i][j], self.where)

    def half_at(self, i: int, j: int) -> Fraction:
        """Half a unit in the last claimed place of values[i][j]: its tolerance.

        N significant digits of a nonzero value never round to 0, so a claimed 0
        with ``significant`` is right only when the value is exactly 0.
        """
        value = self.number(i, j)
        if isinstance(value, Constant) or (self.significant is not None and value == 0):
            return Fraction(0)
        return Fraction(1, 2) * Fraction(10) ** -self.decimals_at(i, j)

    def number(self, i: int, j: int) -> Fraction | Constant | None:
        """The claimed number at values[i][j], exactly: a rational, an irrational
        :class:`~symformer.example.expression.Constant` (``"log(2)"``, claimed exactly:
        :meth:`half_at` is 0), or None for "-inf"."""
        text = self.values[i][j]
        if text.strip().lower() in _INFINITE:
            return None
        r = exact_value(text, f"{self.where}, values[{i}][{j}]")
        return r if isinstance(r, Constant) else Fraction(int(r.p), int(r.q))


def approximation(value: Constant) -> Fraction:
    """An irrational claim's value to about 30 digits (its magnitude, for the digits a
    report shows; never a verdict)."""
    with precision(128):
        return Fraction(value.ball().mid().str(40, radius=False))


def printed_decimals(text: str, where: str = "") -> int:
    """The decimals a number's text shows: ``0.43`` 2, ``6.3379e-02`` 6 (5 significant).

    Read from the text, never from a float; ``-inf`` has 0.

    >>> printed_decimals("0.430"), printed_decimals("6.3379e-02"), printed_decimals("12")
    (3, 6, 0)
    """
    stripped = text.strip()
    if stripped.lower() in _INFINITE:
        return 0
    match = _PRINTED.fullmatch(stripped)
    if not match or not (match.group("int") or match.group("frac")):
        raise InputError(f"{where}: {text!r} is not a printed decimal number, so its "
                         f"precision cannot be read from it; give decimals or significant")
    frac = (match.group("frac") or "").replace("_", "")
    exponent = int((match.group("exp") or "0").replace("_", ""))
    return len(frac) - exponent


def load_claims(path: str | Path, g: Derivation, names: list[str] | None = None,
                resolve: Callable[[str], Stage] | None = None) -> list[Claim]:
    """Read and validate the claims of a TOML file or a Markdown/Python document.

    ``names`` (``["NAME=STAGE", ...]``) maps a document's printed variables to stages;
    ``resolve`` finds a stage by name (default: in ``g``, its backward pass appended
    when needed; a checker's also finds a training run's stages).
    """
    path = Path(path)
    text = read_text_file(path, "a claims file")
    if path.suffix == ".toml":
        claims = claims_from_toml(text, str(path))
    else:
        claims = claims_from_document(text, str(path), names or [],
                                      StageLabels(g, resolve))
    validate(claims, g, resolve)
    return claims


def training_run(path: str | Path) -> Run | None:
    """The ``[train]`` table of a claims or example TOML file (the run that claims on a
    step's stages, ``step1.layer1.W_1``, are about), or None (another kind of file, the
    built-in example, no table)."""
    path = Path(path)
    if path.suffix != ".toml" or not path.is_file():
        return None
    data = read_toml(read_text_file(path, "a TOML file"), str(path))
    return train_table(data["train"], f"{path}, train") if "train" in data else None


def decoding_rule(path: str | Path) -> Decoding | None:
    """The ``[decoding]`` table of a claims file (the generation run claims on
    ``step2.kept`` are about, overriding the example's), or None."""
    path = Path(path)
    if path.suffix != ".toml" or not path.is_file():
        return None
    data = read_toml(read_text_file(path, "a TOML file"), str(path))
    return parse_decoding(data["decoding"], Where(str(path), "decoding")) \
        if "decoding" in data else None


class StageLabels(Mapping):
    """Each stage's (row labels, column labels), read from a derivation; a name it does
    not have yet (``loss``, ``grad.*``) appends the backward pass first
    (:func:`~symformer.blocks.backward.stage_of`), so annotations may tie gradients."""

    def __init__(self, g: Derivation, resolve: Callable[[str], Stage] | None = None) -> None:
        self.g = g
        self.resolve = resolve

    def __getitem__(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if self.resolve is not None and is_training_stage(name):
            stage = self.resolve(name)  # a training run's stage: its message if unknown
            return tuple(stage.rows), tuple(stage.cols)
        if name not in self.g and is_backward_stage(name):
            stage_of(self.g, name)  # an unknown gradient's message names every stage
        if name not in self.g and add_side_stage(self.g, name):  # a term, a weight
            return tuple(self.g[name].rows), tuple(self.g[name].cols)
        if name not in self.g:
            raise KeyError(name)
        stage = self.g[name]
        return tuple(stage.rows), tuple(stage.cols)

    def __iter__(self) -> Iterator[str]:
        """Every stage name, the backward pass's included (for the unknown-stage hint)."""
        if "grad.loss" not in self.g and self.g.example.loss is not None:
            try:
                stage_of(self.g, "grad.loss")
            except InputError:
                pass
        return iter([s.name for s in self.g])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def claims_from_toml(text: str, source: str) -> list[Claim]:
    """Parse the ``[[claim]]`` tables of a claims file (shapes are checked by validate)."""
    data = read_toml(text, source)
    unknown = sorted(set(data) - {"claim", "equation", "title", "description", "train",
                                  "decoding"})
    if unknown and not holds_example(data):
        raise InputError(f"{source}: unknown key {unknown[0]!r} (expected [[claim]] tables)")
    tables = data.get("claim")
    if tables is None and "equation" in data:  # only [[equation]] tables: equation_claims
        return []
    if not isinstance(tables, list) or not tables:
        raise InputError(f"{source}: no [[claim]] tables found")
    return [_claim(t, f"{source}, claim {n}") for n, t in enumerate(tables, start=1)]


def holds_example(data: dict) -> bool:
    """True when a claims file is also an example file (claims about its own model).

    Such a file has ``embeddings`` or an ``[objective]`` (or a lesson's given rows,
    positions or Q, K, V: :data:`~symformer.example.given_inputs.INPUT_KEYS`); its
    example keys are validated by
    the example loader, its ``[[claim]]`` tables here.
    """
    return any(key in data for key in ("embeddings", "objective", *INPUT_KEYS))


def claims_file_is_example(path: str | Path) -> bool:
    """True when ``path`` is a TOML file that holds an example and its claims."""
    path = Path(path)
    if path.suffix != ".toml":
        return False
    return holds_example(read_toml(read_text_file(path, "a claims file"), str(path)))


def _claim(t: object, where: str) -> Claim:
    if not isinstance(t, dict):
        raise InputError(f"{where}: must be a table")
    unknown = sorted(set(t) - _CLAIM_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} "
                         f"(known keys: {', '.join(sorted(_CLAIM_KEYS))})")
    for key in ("stage", "values"):
        if key not in t:
            raise InputError(f"{where}: missing key {key!r}")
    stage = t["stage"]
    name = t.get("name", stage)
    if not isinstance(stage, str) or not isinstance(name, str):
        raise InputError(f"{where}: name and stage must be strings")
    where = f"{where} ({name})"
    decimals, significant = _precision(t, where)
    values, rows, cols = _addressed_values(t, where)
    inputs = t.get("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise InputError(f"{where}: inputs must map stage names to claim names, "
                         f"e.g. {{ \"layer1.add_norm1\" = \"mha\" }}")
    for key in ("causal", "check"):
        if not isinstance(t.get(key, False), bool):
            raise InputError(f"{where}: {key} must be true or false")
    text = [[str(v) for v in row] for row in values]
    claim = Claim(name, stage, decimals, text, rows, t.get("causal"), dict(inputs),
                  t.get("check", True), where, cols, significant, "entry" in t)
    if decimals is None:  # every number's precision must be readable (and bounded)
        for i, row in enumerate(text):
            for j in range(len(row)):
                if claim.decimals_at(i, j) > MAX_DECIMALS:
                    raise InputError(f"{where}: values[{i}][{j}] = {row[j]!r} claims more "
                                     f"than {MAX_DECIMALS} decimals")
    return claim


def _precision(t: dict, where: str) -> tuple[int | None, int | None]:
    """(decimals, significant) of a claim table: at most one of them given."""
    decimals, significant = t.get("decimals"), t.get("significant")
    if decimals is not None and significant is not None:
        raise InputError(f"{where}: give decimals or significant, not both")
    if decimals is not None and (isinstance(decimals, bool) or not isinstance(decimals, int)
                                 or not 0 <= decimals <= MAX_DECIMALS):
        raise InputError(f"{where}: decimals must be a whole number from 0 to {MAX_DECIMALS}, "
                         f"found {decimals!r}")
    if significant is not None and (isinstance(significant, bool)
                                    or not isinstance(significant, int)
                                    or not 1 <= significant <= MAX_DECIMALS):
        raise InputError(f"{where}: significant must be a whole number from 1 to "
                         f"{MAX_DECIMALS}, found {significant!r}")
    return decimals, significant


def _indices(t: dict, key: str, where: str) -> list[int] | None:
    found = t.get(key)
    if found is not None and (not isinstance(found, list) or not found
                              or not all(isinstance(r, int) and not isinstance(r, bool)
                                         for r in found)):
        word = "row" if key == "rows" else "column"
        raise InputError(f"{where}: {key} must be a non-empty list of 0-based {word} numbers")
    return found


def _addressed_values(t: dict, where: str
                      ) -> tuple[list[list], list[int] | None, list[int] | None]:
    """(values as rows, rows, cols) from ``values`` and ``rows``/``cols`` or ``entry``."""
    values = t["values"]
    if "entry" in t:
        both = [k for k in ("rows", "cols") if k in t]
        if both:
            raise InputError(f"{where}: entry names one entry; it cannot be combined with "
                             f"{both[0]}")
        entry = t["entry"]
        if not isinstance(entry, list) or len(entry) != 2 or not all(
                isinstance(k, int) and not isinstance(k, bool) for k in entry):
            raise InputError(f"{where}: entry must be [row, col] (0-based), found {entry!r}")
        while isinstance(values, list) and len(values) == 1:
            values = values[0]  # [[x]] (or [x]) is the bare x
        if isinstance(values, (list, dict)):
            raise InputError(f"{where}: with entry, values must be one number (x or [[x]])")
        return [[values]], [entry[0]], [entry[1]]
    if isinstance(values, (str, int, float)) and not isinstance(values, bool) \
            and not any(k in t for k in ("rows", "cols")):
        return [[values]], None, None  # a bare number: a 1x1 stage (validate checks)
    if not isinstance(values, list) or not values:
        raise InputError(f"{where}: values must be a non-empty list of rows")
    if not isinstance(values[0], list):
        values = [values]  # a single row
    if not all(isinstance(r, list) for r in values):
        raise InputError(f"{where}: values must be a list of rows")
    return values, _indices(t, "rows", where), _indices(t, "cols", where)


def claims_from_document(text: str, source: str, names: list[str],
                         stages: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
                         | None = None) -> list[Claim]:
    """Claims from ``print(np.round(NAME, k))`` lines and the ``#`` lines after them,
    and the prose numbers tied to entries by ``symformer:`` annotations
    (:mod:`symformer.verify.prose`; ``stages`` gives each stage's row and column labels)."""
    prose = [Claim(name=f"line {p.line}", stage=p.stage, decimals=None, values=[[p.text]],
                   rows=[p.row], cols=[p.col], causal=True if p.causal else None,
                   where=f"{source}, line {p.line}", entry_given=True)
             for p in prose_numbers(text, source, stages or {})]
    printed = list(_printed_arrays(text, source))
    if not printed and not prose and has_equation_tags(text):
        return []  # only tagged equations (symformer.verify.equation_claims)
    if not printed and not prose:
        raise InputError(f"{source}: no recognisable numbers: expected a line "
                         f"print(np.round(NAME, k)) followed by the printed array as "
                         f"'# [[...]]' comment lines, or a number annotated with "
                         f"'% symformer: STAGE[ROW, COL]' (LaTeX) or "
                         f"'<!-- symformer: STAGE[ROW, COL] -->' (docs/verify.md)")
    mapping = _name_mapping(names)
    claims = []
    skipped = []
    for name, index, decimals, values, line, row_lines in printed:
        targets = mapping.get(name)
        if not targets:
            skipped.append(name)
            continue
        target = targets.pop(0) if len(targets) > 1 else targets[0]
        if target == "-":
            continue
        causal = True if target.startswith("causal:") else None
        stage = target.removeprefix("causal:")
        where = f"{source}, line {line} ({name}{index_text(index)})"
        rows, cols, values = _sliced(index, values, stage, stages, where)
        claims.append(Claim(name + index_text(index), stage, decimals, values, rows, causal,
                            {}, True, where, cols,
                            entry_given=None not in index and len(index) == 2,
                            row_lines=row_lines * len(values) if cols else row_lines))
    if not claims and not prose:
        found = ", ".join(dict.fromkeys(n for n, *_ in printed))
        raise InputError(f"{source}: none of the printed arrays ({found}) is mapped to a "
                         f"stage; map each with --name NAME=STAGE (or NAME=- to skip)")
    return claims + prose


def unmapped_arrays(path: str | Path, names: list[str]) -> list[str]:
    """The arrays a document prints that no ``--name`` maps (so no number of them is
    compared), each as ``NAME (line N)``; [] for a TOML file."""
    path = Path(path)
    if path.suffix == ".toml":
        return []
    mapping = _name_mapping(names)
    return [f"{name}{index_text(index)} (line {line})"
            for name, index, _, _, line, _ in _printed_arrays(
                read_text_file(path, "a claims file"), str(path)) if name not in mapping]


def index_text(index: tuple[int | None, ...]) -> str:
    """A printed slice as written: ``[1]``, ``[0, 2]``, ``[:, 1]`` ("" for none)."""
    return f"[{', '.join(':' if k is None else str(k) for k in index)}]" if index else ""


def _sliced(index: tuple[int | None, ...], values: list[list[str]], stage: str,
            stages: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None,
            where: str) -> tuple[list[int] | None, list[int] | None, list[list[str]]]:
    """(rows, cols, values) of a printed slice of ``stage``: ``Q[1]`` and ``Q[1, :]`` a
    row, ``A[0, 2]`` (or ``A[0][2]``) one entry, ``Q[:, 1]`` a column (printed as one
    row of numbers); a negative index counts from the end."""
    if all(k is None for k in index):
        return None, None, values
    try:
        labels = stages[stage] if stages is not None else None
    except KeyError:
        labels = None  # an unknown stage: validation names it
    sizes = (len(labels[0]), len(labels[1])) if labels is not None else None

    def place(k: int, axis: int) -> int:
        if k >= 0:
            return k
        if sizes is None or k < -sizes[axis]:
            raise InputError(f"{where}: index {k} is outside {stage}")
        return sizes[axis] + k

    row = place(index[0], 0) if index[0] is not None else None
    col = place(index[1], 1) if len(index) == 2 and index[1] is not None else None
    if len(values) != 1:
        raise InputError(f"{where}: a slice {index_text(index)} prints one row or one "
                         f"number, not {len(values)} rows")
    if row is None:  # a column, printed as a row of numbers
        return None, [col], [[v] for v in values[0]]
    if col is not None and len(values[0]) != 1:
        raise InputError(f"{where}: the entry {index_text(index)} prints one number, not "
                         f"{len(values[0])}")
    return [row], None if col is None else [col], values


def _index(text: str) -> tuple[int | None, ...] | None:
    """The slice ``[1]``, ``[1, :]``, ``[0][2]``, ``[:, 1]`` as (row, col) indices (None
    for ``:``); () for none; None when it is not such a slice (the print is skipped)."""
    parts = [p for group in re.findall(r"\[([^\]]*)\]", text) for p in group.split(",")]
    if not parts:
        return ()
    found = [_INDEX.fullmatch(p) for p in parts]
    if len(parts) > 2 or not all(found):
        return None
    return tuple(None if m.group(1) == ":" else int(m.group(1)) for m in found)


def _name_mapping(names: list[str]) -> dict[str, list[str]]:
    mapping: dict[str, list[str]] = {}
    for item in names:
        name, sep, stage = item.partition("=")
        if not sep or not name.strip() or not stage.strip():
            raise InputError(f"--name {item!r}: expected NAME=STAGE, NAME=causal:STAGE "
                             f"or NAME=-")
        mapping.setdefault(name.strip(), []).append(stage.strip())
    return mapping


def _printed_arrays(text: str, source: str):
    """(name, slice, decimals, rows of number text, line number, each row's line number)
    for every printed array (line numbers 1-based; a row wrapped over several lines has
    the line it starts on); the slice as :func:`_index` reads it (() for none)."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        match = _PRINT.search(line)
        if not match or line.lstrip().startswith("#"):
            continue
        block, starts = [], []  # the comment lines, and where each starts in the body
        for follow in lines[n + 1:]:
            comment = _COMMENT.match(follow)
            if not comment:
                break
            starts.append(sum(len(b) + 1 for b in block))
            block.append(comment.group(1))
        body = " ".join(block)
        index = _index(match.group(2))
        if index is None:
            continue
        if not body.strip().startswith("["):
            if len(index) == 2 and None not in index and block:  # one entry: a bare number
                yield match.group(1), index, int(match.group(3)), [body.split()[:1]], \
                    n + 1, [n + 2]
            continue

        if body.strip().startswith("[["):
            found = list(_ROW.finditer(body))
            rows = [m.group(1) for m in found]
            row_lines = [n + 2 + bisect_right(starts, m.start()) - 1 for m in found]
        else:
            rows, row_lines = [body.strip().strip("[] ")], [n + 2]
        values = [r.split() for r in rows]
        if not values or not all(values) or len({len(r) for r in values}) != 1:
            raise InputError(f"{source}, line {n + 2}: the array printed for "
                             f"{match.group(1)} is not a rectangular matrix")
        yield match.group(1), index, int(match.group(3)), values, n + 1, row_lines


def validate(claims: list[Claim], g: Derivation,
             resolve: Callable[[str], Stage] | None = None) -> None:
    """Check stages, shapes, rows and inputs of every claim; raise InputError on the first bad.

    ``resolve`` finds a stage by name (default: :func:`stage_of` on ``g``)."""
    resolve = resolve or (lambda name: stage_of(g, name))
    by_name: dict[str, Claim] = {}
    for c in claims:
        if c.name in by_name and any(c.name in o.inputs.values() for o in claims):
            raise InputError(f"{c.where}: two claims are named {c.name!r} and another "
                             f"claim uses it as an input; give them distinct names")
        by_name.setdefault(c.name, c)
        if c.decimals is not None and c.decimals > MAX_DECIMALS:
            raise InputError(f"{c.where}: decimals must be at most {MAX_DECIMALS}")
        stage = resolve(c.stage)  # unknown stages raise with the close names
        n, m = stage.shape
        rows = c.row_indices
        cols = c.cols if c.cols is not None else list(range(m))
        for given, indices, size, word in ((c.rows, rows, n, "rows"), (c.cols, cols, m, "cols")):
            if given is None:
                continue
            if c.entry_given and not 0 <= indices[0] < size:
                raise InputError(f"{c.where}: entry [{rows[0]}, {cols[0]}] is outside "
                                 f"{c.stage}, which is {n}x{m} (0-based)")
            if any(not 0 <= k < size for k in indices) or len(set(indices)) != len(indices):
                raise InputError(f"{c.where}: {word} {indices} must be distinct 0-based "
                                 f"{word} of {c.stage} (0 to {size - 1})")
        if c.whole and (len(c.values), len(c.values[0])) == (1, 1) != (n, m):
            raise InputError(f"{c.where}: values is one number, but {c.stage} is {n}x{m}: "
                             f"a bare number claims a 1x1 stage; give entry = [row, col] "
                             f"for one entry of a larger one")
        if len(c.values) != len(rows) or any(len(r) != len(cols) for r in c.values):
            got = f"{len(c.values)}x{len(c.values[0])}"
            named = [f"{word} names {len(k)}" for word, k in (("rows", c.rows), ("cols", c.cols))
                     if k is not None]
            raise InputError(f"{c.where}: values are {got} but {c.stage} is {n}x{m}"
                             + "".join(f" and {x}" for x in named))
        for i in range(len(c.values)):
            for j in range(len(cols)):
                if c.number(i, j) is None and not stage.op.keeps_mask \
                        and stage.op.name not in MINUS_INF_OPS:  # every number parses
                    raise InputError(f"{c.where}: values[{i}][{j}] is {c.values[i][j]!r}, but "
                                     f"{c.stage} has finite entries (only masked attention "
                                     f"scores are -inf)")
    for c in claims:
        owner = resolve(c.stage).derivation  # the forward/backward pass or a training run
        upstream = owner.ancestors(c.stage)
        for stage_name, source in c.inputs.items():
            if stage_name not in owner:
                owner[stage_name]  # raises with the close names
            if source not in by_name:
                raise InputError(f"{c.where}: inputs names the claim {source!r}, which this "
                                 f"file does not have (claims: {', '.join(by_name)})")
            if stage_name not in upstream and recompose.reading(owner, c.stage,
                                                                set(c.inputs)) is None:
                raise InputError(f"{c.where}: inputs replaces {stage_name}, which does not "
                                 f"feed {c.stage}" + (
                                     " (parts of it, such as its terms or e^(s - max s), "
                                     "are inputs only with no stage upstream)"
                                     if recompose.reading(owner, c.stage, {stage_name})
                                     else ""))
            given = by_name[source]
            n, m = owner[stage_name].shape
            if given.whole and (n, m) != (len(given.values), len(given.values[0])):
                raise InputError(f"{c.where}: claim {source!r} gives "
                                 f"{len(given.values)}x{len(given.values[0])} values; as an "
                                 f"input to {stage_name} it must give all of its {n}x{m}, "
                                 f"or say which rows, columns or entry (rows, cols, entry)")
            if not given.whole and (given.stage != stage_name and (
                    max(given.row_indices) >= n or max(given.col_indices) >= m)):
                raise InputError(f"{c.where}: claim {source!r} gives entries outside "
                                 f"{stage_name}, which is {n}x{m}")
    _no_cycle(claims, by_name)


def _no_cycle(claims: list[Claim], by_name: dict[str, Claim]) -> None:
    def visit(c: Claim, path: list[str]) -> None:
        if c.name in path:
            loop = " -> ".join(path[path.index(c.name):] + [c.name])
            raise InputError(f"{c.where}: inputs cycle: {loop}")
        for source in c.inputs.values():
            visit(by_name[source], path + [c.name])

    for c in claims:
        visit(c, [])
