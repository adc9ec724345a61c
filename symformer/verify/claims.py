"""An author's claimed numbers: read from a claims TOML file or from a document.

Claims TOML (rows are 0-based token positions, as ``symformer derive`` numbers them)::

    [[claim]]
    name = "weights"                 # the author's label
    stage = "layer1.head1.weights"   # a stage name (`symformer derive --list`)
    decimals = 3                     # the claim is right when |exact - claimed| <= 0.5e-3
    values = [[0.212, 0.265, 0.158, 0.365], ...]
    rows = [1, 3]                    # optional: the rows of the stage that values gives
    causal = true                    # optional: the causally masked derivation (default:
                                     # the example's causal setting)
    inputs = { "layer1.add_norm1" = "mha" }  # optional: a local check of the step
    check = true                     # optional: false = only used as another claim's input

A document is Markdown or Python written the way the post is: a line
``print(np.round(NAME, k))`` followed by the printed array as ``#`` comment lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from symformer.engine import Derivation
from symformer.errors import InputError
from symformer.example.loader import read_text_file, read_toml
from symformer.example.numbers import exact_number
from symformer.verify.chain import ancestors

#: Claims may state 0 to MAX_DECIMALS decimals.
MAX_DECIMALS = 30
_CLAIM_KEYS = {"name", "stage", "decimals", "values", "rows", "causal", "inputs", "check"}
_PRINT = re.compile(r"print\(\s*np\.round\(\s*([A-Za-z_]\w*)\s*,\s*(?:decimals\s*=\s*)?([0-9]{1,4})"
                    r"\s*\)\s*\)", re.ASCII)
_COMMENT = re.compile(r"^\s*#\s?(.*)$")
_ROW = re.compile(r"\[([^\[\]]*)\]")


@dataclass
class Claim:
    """One claimed matrix (or some of its rows) of one stage."""

    name: str
    stage: str
    decimals: int
    values: list[list[str]]            # the literal text of every claimed number
    rows: list[int] | None = None      # stage rows the values give (None: all, in order)
    causal: bool | None = None         # None: the example's own setting
    inputs: dict[str, str] = field(default_factory=dict)  # replaced stage -> claim name
    check: bool = True
    where: str = ""                    # for messages: file and claim number

    @property
    def row_indices(self) -> list[int]:
        """The stage rows of ``values``, in order."""
        return self.rows if self.rows is not None else list(range(len(self.values)))

    @property
    def half(self) -> Fraction:
        """Half a unit in the last claimed decimal: the claim's tolerance."""
        return Fraction(1, 2 * 10 ** self.decimals)

    def number(self, i: int, j: int) -> Fraction | None:
        """The claimed number at values[i][j], exactly (None for "-inf")."""
        text = self.values[i][j]
        if text.strip().lower() in {"-inf", "-infinity"}:
            return None
        r = exact_number(text, f"{self.where}, values[{i}][{j}]")
        return Fraction(int(r.p), int(r.q))


def load_claims(path: str | Path, g: Derivation, names: list[str] | None = None
                ) -> list[Claim]:
    """Read and validate the claims of a TOML file or a Markdown/Python document.

    ``names`` (``["NAME=STAGE", ...]``) maps a document's printed variables to stages.
    """
    path = Path(path)
    text = read_text_file(path, "a claims file")
    if path.suffix == ".toml":
        claims = claims_from_toml(text, str(path))
    else:
        claims = claims_from_document(text, str(path), names or [])
    validate(claims, g)
    return claims


def claims_from_toml(text: str, source: str) -> list[Claim]:
    """Parse the ``[[claim]]`` tables of a claims file (shapes are checked by validate)."""
    data = read_toml(text, source)
    unknown = sorted(set(data) - {"claim", "title", "description"})
    if unknown:
        raise InputError(f"{source}: unknown key {unknown[0]!r} (expected [[claim]] tables)")
    tables = data.get("claim")
    if not isinstance(tables, list) or not tables:
        raise InputError(f"{source}: no [[claim]] tables found")
    return [_claim(t, f"{source}, claim {n}") for n, t in enumerate(tables, start=1)]


def _claim(t: object, where: str) -> Claim:
    if not isinstance(t, dict):
        raise InputError(f"{where}: must be a table")
    unknown = sorted(set(t) - _CLAIM_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} "
                         f"(known keys: {', '.join(sorted(_CLAIM_KEYS))})")
    for key in ("stage", "decimals", "values"):
        if key not in t:
            raise InputError(f"{where}: missing key {key!r}")
    stage, decimals = t["stage"], t["decimals"]
    name = t.get("name", stage)
    if not isinstance(stage, str) or not isinstance(name, str):
        raise InputError(f"{where}: name and stage must be strings")
    where = f"{where} ({name})"
    if isinstance(decimals, bool) or not isinstance(decimals, int) \
            or not 0 <= decimals <= MAX_DECIMALS:
        raise InputError(f"{where}: decimals must be a whole number from 0 to {MAX_DECIMALS}, "
                         f"found {decimals!r}")
    values = t["values"]
    if not isinstance(values, list) or not values:
        raise InputError(f"{where}: values must be a non-empty list of rows")
    if not isinstance(values[0], list):
        values = [values]  # a single row
    if not all(isinstance(r, list) for r in values):
        raise InputError(f"{where}: values must be a list of rows")
    rows = t.get("rows")
    if rows is not None and (not isinstance(rows, list)
                             or not all(isinstance(r, int) and not isinstance(r, bool)
                                        for r in rows)):
        raise InputError(f"{where}: rows must be a list of 0-based row numbers")
    inputs = t.get("inputs", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise InputError(f"{where}: inputs must map stage names to claim names, "
                         f"e.g. {{ \"layer1.add_norm1\" = \"mha\" }}")
    for key in ("causal", "check"):
        if not isinstance(t.get(key, False), bool):
            raise InputError(f"{where}: {key} must be true or false")
    text = [[str(v) for v in row] for row in values]
    return Claim(name, stage, decimals, text, rows, t.get("causal"), dict(inputs),
                 t.get("check", True), where)


def claims_from_document(text: str, source: str, names: list[str]) -> list[Claim]:
    """Claims from ``print(np.round(NAME, k))`` lines and the ``#`` lines after them."""
    printed = list(_printed_arrays(text, source))
    if not printed:
        raise InputError(f"{source}: no recognisable arrays: expected a line "
                         f"print(np.round(NAME, k)) followed by the printed array as "
                         f"'# [[...]]' comment lines")
    mapping = _name_mapping(names)
    claims = []
    skipped = []
    for name, decimals, values, line in printed:
        targets = mapping.get(name)
        if not targets:
            skipped.append(name)
            continue
        target = targets.pop(0) if len(targets) > 1 else targets[0]
        if target == "-":
            continue
        causal = True if target.startswith("causal:") else None
        stage = target.removeprefix("causal:")
        claims.append(Claim(name, stage, decimals, values, None, causal, {}, True,
                            f"{source}, line {line} ({name})"))
    if not claims:
        found = ", ".join(dict.fromkeys(n for n, *_ in printed))
        raise InputError(f"{source}: none of the printed arrays ({found}) is mapped to a "
                         f"stage; map each with --name NAME=STAGE (or NAME=- to skip)")
    return claims


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
    """(name, decimals, rows of number text, line number) for every printed array."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        match = _PRINT.search(line)
        if not match or line.lstrip().startswith("#"):
            continue
        block = []
        for follow in lines[n + 1:]:
            comment = _COMMENT.match(follow)
            if not comment:
                break
            block.append(comment.group(1))
        body = " ".join(block).strip()
        if not body.startswith("["):
            continue
        rows = _ROW.findall(body) if body.startswith("[[") else [body.strip("[] ")]
        values = [r.split() for r in rows]
        if not values or not all(values) or len({len(r) for r in values}) != 1:
            raise InputError(f"{source}, line {n + 2}: the array printed for "
                             f"{match.group(1)} is not a rectangular matrix")
        yield match.group(1), int(match.group(2)), values, n + 1


def validate(claims: list[Claim], g: Derivation) -> None:
    """Check stages, shapes, rows and inputs of every claim; raise InputError on the first bad."""
    by_name: dict[str, Claim] = {}
    for c in claims:
        if c.name in by_name and any(c.name in o.inputs.values() for o in claims):
            raise InputError(f"{c.where}: two claims are named {c.name!r} and another "
                             f"claim uses it as an input; give them distinct names")
        by_name.setdefault(c.name, c)
        if c.decimals > MAX_DECIMALS:
            raise InputError(f"{c.where}: decimals must be at most {MAX_DECIMALS}")
        stage = g[c.stage]  # unknown stages raise with the close names
        n, m = stage.shape
        rows = c.row_indices
        if c.rows is not None:
            bad = [r for r in rows if not 0 <= r < n]
            if bad or len(set(rows)) != len(rows):
                raise InputError(f"{c.where}: rows {rows} must be distinct 0-based rows "
                                 f"of {c.stage} (0 to {n - 1})")
        if len(c.values) != len(rows) or any(len(r) != m for r in c.values):
            got = f"{len(c.values)}x{len(c.values[0])}"
            raise InputError(f"{c.where}: values are {got} but {c.stage} is {n}x{m}"
                             + (f" and rows names {len(rows)}" if c.rows is not None else ""))
        for i in range(len(c.values)):
            for j in range(m):
                if c.number(i, j) is None and stage.kind != "scores":  # every number parses
                    raise InputError(f"{c.where}: values[{i}][{j}] is {c.values[i][j]!r}, but "
                                     f"{c.stage} has finite entries (only masked attention "
                                     f"scores are -inf)")
    for c in claims:
        upstream = ancestors(g, c.stage)
        for stage_name, source in c.inputs.items():
            if stage_name not in g:
                g[stage_name]  # raises with the close names
            if source not in by_name:
                raise InputError(f"{c.where}: inputs names the claim {source!r}, which this "
                                 f"file does not have (claims: {', '.join(by_name)})")
            if stage_name not in upstream:
                raise InputError(f"{c.where}: inputs replaces {stage_name}, which does not "
                                 f"feed {c.stage}")
            given = by_name[source]
            if given.rows is not None or g[stage_name].shape != (len(given.values),
                                                                 len(given.values[0])):
                raise InputError(f"{c.where}: claim {source!r} gives "
                                 f"{len(given.values)}x{len(given.values[0])} values; as an "
                                 f"input to {stage_name} it must give all of its "
                                 f"{g[stage_name].shape[0]}x{g[stage_name].shape[1]}")
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
