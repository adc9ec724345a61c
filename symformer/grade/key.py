"""The key folder written by ``symformer exercise``: ``manifest.toml`` and the variants.

``grade`` needs nothing else (docs/grading.md): each variant's example file is loaded
with the normal loader and derived on first use, and the asked stages are rounded to
the manifest's ``decimals`` with certified digits.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symformer.blocks import derive
from symformer.engine import Derivation
from symformer.engine.graph import unknown_stage_message
from symformer.engine.rounding import round_fraction
from symformer.errors import InputError
from symformer.example.loader import load_example, read_text_file, read_toml
from symformer.grade.lines import at_line, line_of
from symformer.words import plural

#: The manifest format this version reads.
FORMAT = 1
#: Asked precision: at most this many decimals.
MAX_DECIMALS = 30


@dataclass
class Variant:
    """One variant of the exercise: its id, example file, and (once derived) its key."""

    id: str
    example: Path
    where: str                       # manifest file and line, for messages
    asked: tuple[str, ...]
    decimals: int
    max_work: int | None = None
    asked_where: str = ""            # the manifest's asked line
    #: the token whose path is asked (``path = "token"``); None: every entry is asked
    token: int | None = None
    _cells: dict | None = field(default=None, repr=False)
    _chain: dict | None = field(default=None, repr=False)
    _g: Derivation | None = field(default=None, repr=False)
    _correct: dict[str, list[list[Fraction | None]]] = field(default_factory=dict, repr=False)
    _text: dict[str, list[list[str]]] = field(default_factory=dict, repr=False)

    @property
    def derivation(self) -> Derivation:
        """The variant's derivation (loaded and derived on first use)."""
        if self._g is None:
            if not self.example.exists():
                raise InputError(f"{self.where}: variant {self.id}'s example {self.example}: "
                                 f"no such file")
            if not self.example.is_file():  # a folder, FIFO or device: say what it is
                raise InputError(f"{self.where}: variant {self.id}'s example {self.example}: "
                                 f"{_kind(self.example).replace(', not a folder', '')}, "
                                 f"expected an example file")
            g = derive(load_example(self.example), max_work=self.max_work)
            known = [s.name for s in g]
            for name in self.asked:
                if name not in g:
                    raise InputError(f"{self.asked_where or self.where}: "
                                     f"{unknown_stage_message(name, known)} (variant "
                                     f"{self.id}, {self.example})")
            self._g = g
        return self._g

    def correct(self, stage: str) -> list[list[Fraction | None]]:
        """The stage's certified roundings at the asked decimals (None: a masked -inf)."""
        if stage not in self._correct:
            table = []
            for i, row in enumerate(self.derivation[stage].values(decimals=self.decimals)):
                out: list[Fraction | None] = []
                for j, text in enumerate(row):
                    if text == "-inf":
                        out.append(None)
                    elif ".." in text:
                        raise InputError(f"{self.where}: variant {self.id}: {stage}[{i},{j}] "
                                         f"lies on a rounding boundary at "
                                         f"{plural(self.decimals, 'decimal')} ({text}); the "
                                         f"key cannot grade it")
                    else:
                        out.append(Fraction(text))  # certified decimal text
                table.append(out)
            self._correct[stage] = table
        return self._correct[stage]

    def cells(self, stage: str) -> frozenset[tuple[int, int]]:
        """The asked entries of ``stage``: the token's path, or every entry."""
        from symformer.exercise.cells import entries_of, token_path

        g = self.derivation
        if self._cells is None:
            self._cells = {} if self.token is None else \
                token_path(g, list(self.asked), self.token).cells
        return entries_of(_Cells(self._cells), stage, g[stage].shape)

    def chain(self) -> dict[str, list[list[Fraction | None]]] | None:
        """Every asked stage as the key's worked lines give it (the student's path from
        the given numbers and the earlier answers as written); None without a path."""
        from symformer.exercise.cells import Asked
        from symformer.exercise.margin import asked_balls
        from symformer.exercise.path import student_chain

        if self.token is None:
            return None
        if self._chain is None:
            g = self.derivation
            self.cells(self.asked[0])
            asked = Asked(self.asked, self._cells)
            self._chain = student_chain(g, asked, self.decimals, asked_balls(g, asked))[0]
        return self._chain

    def correct_text(self, stage: str, row: int, col: int) -> str:
        """The correct rounding of one entry as printed in the key."""
        if stage not in self._text:
            self._text[stage] = [["-inf" if v is None else fixed(v, self.decimals)
                                  for v in r] for r in self.correct(stage)]
        return self._text[stage][row][col]


@dataclass
class Key:
    """The manifest: asked stages, precision and variants."""

    path: Path
    decimals: int
    asked: tuple[str, ...]
    variants: dict[str, Variant]

    @property
    def half(self) -> Fraction:
        """Half a unit in the last asked decimal: an answer's tolerance."""
        return Fraction(1, 2) * Fraction(10) ** -self.decimals


class _Cells(list):
    """An empty asked list carrying the cells (for :func:`entries_of`)."""

    def __init__(self, cells: dict) -> None:
        super().__init__()
        self.cells = cells


def fixed(value: Fraction, decimals: int) -> str:
    """``value`` rounded to ``decimals`` places, as fixed-point text."""
    return round_fraction(value, decimals=decimals).fixed()


def load_key(directory: str | Path, max_work: int | None = None) -> Key:
    """Read ``DIR/manifest.toml``; bad content is an :class:`InputError` naming its line."""
    folder = Path(directory)
    if not folder.is_dir():
        raise InputError(f"{directory}: {_kind(folder)}; --key must be the folder "
                         f"`symformer exercise` wrote (with manifest.toml)")
    path = folder / "manifest.toml"
    if not path.exists() and not path.is_symlink():
        raise InputError(f"{directory}: a folder without manifest.toml; --key must be the "
                         f"folder `symformer exercise` wrote")
    source = str(path)
    text = read_text_file(path, "the exercise manifest",
                          " (--key must be the folder `symformer exercise` wrote)")
    data = read_toml(text, source)
    exercise = data.get("exercise")
    if not isinstance(exercise, dict):
        raise InputError(f"{source}: no [exercise] table")
    here = at_line(source, line_of(text, "format"))
    if exercise.get("format") != FORMAT:
        raise InputError(f"{here}: format must be {FORMAT}, found "
                         f"{exercise.get('format')!r} (a newer symformer wrote it?)")
    decimals = exercise.get("decimals")
    if isinstance(decimals, bool) or not isinstance(decimals, int) \
            or not 0 <= decimals <= MAX_DECIMALS:
        raise InputError(f"{at_line(source, line_of(text, 'decimals'))}: decimals must be a "
                         f"whole number from 0 to {MAX_DECIMALS}, found {decimals!r}")
    asked = exercise.get("asked")
    asked_at = at_line(source, line_of(text, "asked"))
    if not isinstance(asked, list) or not asked or not all(isinstance(a, str) for a in asked):
        raise InputError(f"{asked_at}: asked must be a non-empty list of stage names")
    if len(set(asked)) != len(asked):
        raise InputError(f"{asked_at}: asked names a stage twice")
    token = None
    if "path" in exercise:
        token = exercise.get("token")
        where = at_line(source, line_of(text, "path"))
        if exercise["path"] != "token":
            raise InputError(f"{where}: path must be \"token\", found {exercise['path']!r}")
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InputError(f"{at_line(source, line_of(text, 'token'))}: token must be a "
                             f"position (a whole number from 0), found {token!r}")
    tables = data.get("variant")
    if not isinstance(tables, list) or not tables:
        raise InputError(f"{source}: no [[variant]] tables")
    variants: dict[str, Variant] = {}
    after = 0
    for number, t in enumerate(tables, start=1):
        line = line_of(text, "id", f'{t.get("id")}', after) if isinstance(t, dict) else None
        after = line or after
        where = at_line(source, line) if line else f"{source}, variant {number}"
        if not isinstance(t, dict) or not isinstance(t.get("id"), str) or not t["id"].strip():
            raise InputError(f"{where}: every [[variant]] needs an id (a string)")
        if not isinstance(t.get("example"), str):
            raise InputError(f"{where}: variant {t['id']} needs example = \"PATH\" "
                             f"(relative to the key folder)")
        if t["id"] in variants:
            raise InputError(f"{where}: variant id {t['id']!r} given twice")
        variants[t["id"]] = Variant(t["id"], _inside(folder, t["example"], where), where,
                                    tuple(asked), decimals, max_work, asked_at, token)
    return Key(path, decimals, tuple(asked), variants)


def _kind(path: Path) -> str:
    """What ``path`` is, for a message: "no such folder", "a FIFO (named pipe)", ..."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "no such folder"
    kinds = ((stat.S_ISREG, "a file, not a folder"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "not a folder")


def _inside(folder: Path, example: str, where: str) -> Path:
    """The variant's example file, refused unless it lies inside the key folder (a
    relative path whose target, symbolic links followed, is under the folder)."""
    path = folder / example
    inside = not Path(example).is_absolute() and ".." not in Path(example).parts
    try:
        inside = inside and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if not inside:
        raise InputError(f"{where}: example {example!r} lies outside the key folder "
                         f"{folder}; a variant's example must be a path inside it")
    return path
