"""A mutation fuzzer for the command line: shipped examples and claims, mutated.

The shipped examples (``symformer/example/builtin.toml``, ``symformer/examples/*.toml``)
and claims (``symformer/examples/post_claims.toml``) are parsed with :mod:`tomllib`,
mutated structurally (numbers to extreme, tiny, negative, zero and odd literal forms;
shapes by dropping, adding and transposing rows and columns; keys deleted, duplicated,
renamed; strings replaced by odd ones; values wrapped in (deep) nesting; types swapped)
and written back as TOML.  Each case runs one command on the mutated file through
:func:`symformer.cli.main`, in this interpreter (in a forked child by default, so that a
case cannot leak state into the next one, and a hang in C code can still be killed).

A case **passes** when ``main`` returns 0, 1 or 2 (or argparse exits with one of
them), nothing but ``SystemExit`` escaped, no "Traceback" was printed, a status 2
came with a message on stderr, and the run ended within the per-case bound (a
``SIGALRM`` timer interrupts it; a hang is a failure reported with the case).

The randomness comes from one :class:`random.Random`-like object, so the same engine
is driven by hypothesis in ``tests/test_fuzz.py`` (``st.randoms()``) and by a seeded
generator in the longer run, ``python benchmarks/fuzz.py --cases N --seed S``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import select
import shutil
import signal
import tempfile
import time
import tomllib
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The shipped files the fuzzer starts from.
EXAMPLES = {
    "builtin": ROOT / "symformer" / "example" / "builtin.toml",
    "encoder_decoder": ROOT / "symformer" / "examples" / "encoder_decoder.toml",
    "course_module": ROOT / "symformer" / "examples" / "course_module.toml",
}
CLAIMS = ROOT / "symformer" / "examples" / "post_claims.toml"

#: Per-case bound in seconds (SIGALRM); a forked child gets GRACE more before SIGKILL.
DEFAULT_BOUND = 20.0
GRACE = 10.0

OK_STATUSES = (0, 1, 2)


# --------------------------------------------------------------------------- TOML out


@dataclass(frozen=True)
class Raw:
    """A TOML value written verbatim (odd literal forms, deep nesting, broken text)."""

    text: str


def _string(text: str) -> str:
    """A TOML basic string; control characters escaped, everything else literal."""
    out = json.dumps(text, ensure_ascii=False)
    return out.replace("\x7f", "\\u007f")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def dump_value(value: Any) -> str:
    """One TOML value, inline (arrays and tables on one line)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(dump_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {dump_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps(doc: dict[str, Any]) -> str:
    """A TOML document: one ``key = value`` line per top-level key."""
    return "".join(f"{_key(k)} = {dump_value(v)}\n" for k, v in doc.items())


# --------------------------------------------------------------------------- mutations

#: Replacements for a number: extreme, huge, tiny, negative, zero and odd literal forms.
NUMBERS: list[Any] = [
    0, 0.0, -0.0, "0", "-0", "0/1", "0e99999999", "0.0e-99999999",
    1, -1, 2, 0.5, "1/3", "-7/3", "22/7", 10**18, -(10**18),
    "1e99", "-1e99", "1e100", "-1e100", "1e101", "1e-99", "1e-100", "1e-101",
    "1e30", "-1e30", "1e50", "-1e50", 1e30, -1e99, 1e-30, 1e99, 1e-100,
    "1e99999999", "-1e99999999", "1e-99999999", "1e+2147483648",
    Raw("9" * 5000), "9" * 5000, "0." + "1" * 5000, "1/" + "9" * 5000,
    "1" + "0" * 400, "1e-6", "0.1", "-1.3", "1.0000000000000000000000000001",
    Raw("0x10"), Raw("0o17"), Raw("0b101"), Raw("1_000"), Raw("+1.5"), Raw("-0.0"),
    Raw("inf"), Raw("-inf"), Raw("nan"), Raw("+nan"), Raw("1e400"), Raw("5e-324"),
    Raw("1.7976931348623157e308"), Raw("9223372036854775807"), Raw("-9223372036854775808"),
    "1/0", "0/0", "-1/0", "1//2", "1/2/3", "1/-2", "-1/-2", "1.5/2", "1e2/3",
    "inf", "-inf", "+inf", "nan", "NaN", "Infinity", "-Infinity",
    "", " ", " 1", "1 ", "+1", "--1", "+-1", ".5", "5.", "1e", "e5", "1e+", "1.2.3",
    "0x10", "1_000", "1e1_0", "٣", "１", "𝟙", "½", "1\u00a0000", "sin(1)", "pi", "sqrt(2)",
    "1e-6e2", "1.5e-3", "-.5", "00012", "1E3", "1d3",
]

#: Replacements for a name or a title.
STRINGS: list[Any] = [
    "", " ", "x", "I", "think", "understand", "<s>", "</s>", "unknown-word",
    "a--b", "?`x!`", "``q''", ",,low", "a\nb", "a\rb", "a\tb", "\x00", "nul\x00byte",
    "\x1b[31mRED\x1b[0m", "\x1b]0;TITLE\x07", "\x7f", "\u200b", "\u202eRTL", "\ufeffBOM",
    "é", "ü", "日本", "🙂", "Ω", "$x$", "\\", "\\input{/etc/passwd}", "%", "&", "#", "_", "{", "}",
    "~", "^", "|", "<script>alert(1)</script>", "\"quoted\"", "'", "`", "*", "[0]",
    "layer1.head1.Q", "x" * 300, "y" * 3000, "1", "0", "-1e9", "-inf",
]

#: Odd values of any type (type swaps).
TYPE_SWAPS: list[Any] = [
    True, False, 0, 1.5, "text", "", [], [[]], [[[]]], {}, {"a": 1}, [1, "a"], [True],
    Raw("1979-05-27T07:32:00Z"), Raw("07:32:00"), Raw("1979-05-27"),
]

#: Known keys of the example and claims schemas (renames and additions pick from these).
KNOWN_KEYS = [
    "title", "tokens", "vocab", "embeddings", "positional_encoding", "causal", "mask", "eps",
    "layer_norm", "norm", "activation", "layer", "head", "W_O", "W_1", "b_1", "W_2", "b_2",
    "W_Q", "W_K", "W_V", "gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_3", "beta_3",
    "decoder", "W_vocab", "self_head", "cross_head", "W_O_self", "W_O_cross", "claim",
    "name", "stage", "decimals", "values", "inputs", "rows", "check", "description",
]

#: Settings that reach the other code paths: (key, candidate values), set on the
#: document or a layer of an example, or on a claim.
EXAMPLE_OPTIONS: list[tuple[str, list[Any]]] = [
    ("causal", [True, False, "yes", 1]),
    ("mask", ["-inf", "-1e9", "-1e50", "-1e99", "-1e100", "0", "1e9", "-1", 0, "inf", "x"]),
    ("eps", [0, "0", "1e-6", "1e-100", "-1e-6", "1e100", 1, "1/3"]),
    ("layer_norm", ["biased", "unbiased", "unbiased", "whole_matrix", "none", ""]),
    ("norm", ["pre", "pre", "post", "middle"]),
    ("activation", ["relu", "gelu", "gelu", "tanh", ""]),
    ("positional_encoding", ["sinusoidal", "none", "none", "learned", ""]),
]
CLAIM_OPTIONS: list[tuple[str, list[Any]]] = [
    ("causal", [True, False, "yes"]),
    ("decimals", [0, 1, 3, 8, 15, 40, -1, 5000, "2", 2.5]),
    ("rows", [[0], [1, 2], [3], [], [-1], [99], "0"]),
    ("check", [False, True, "no"]),
    ("stage", ["input", "output", "layer1.head1.weights", "layer1.add_norm1.variance",
               "layer1.ffn.hidden", "probabilities", "next_token", "layer9.head1.Q", "*",
               "layer1.head*", ""]),
]

Path_ = tuple[Any, ...]


def _nodes(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, (*path, index))


def _get(doc: Any, path: Path_) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _set(doc: Any, path: Path_, value: Any) -> None:
    _get(doc, path[:-1])[path[-1]] = value


def _show(path: Path_) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "<document>"


def _short(value: Any) -> str:
    text = dump_value(value)
    return text if len(text) <= 60 else text[:40] + f"...({len(text)} chars)"


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and bool(re.fullmatch(r"[-+]?[\d./e+-]+", value))


def _is_matrix(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(row, list) for row in value))


class Mutator:
    """Structural mutations of a parsed TOML document, driven by ``rnd``."""

    def __init__(self, rnd: Any) -> None:
        self.rnd = rnd

    def choice(self, options: list[Any]) -> Any:
        """One of ``options`` (through ``randrange``, which every driver provides)."""
        return options[self.rnd.randrange(len(options))]

    def mutate(self, doc: dict[str, Any]) -> str:
        """Apply one mutation in place; returns its description."""
        nodes = [(p, v) for p, v in _nodes(doc) if p]
        kinds = {
            "number": [n for n in nodes if _is_number(n[1])],
            "string": [n for n in nodes if isinstance(n[1], str) and not _is_number(n[1])],
            "list": [n for n in nodes if isinstance(n[1], list)],
            "table": [((), doc)] + [n for n in nodes if isinstance(n[1], dict)],
            "any": nodes,
        }
        weights = {"number": 8, "list": 3, "table": 2, "string": 2, "any": 1, "option": 3}
        families = [k for k in weights if k == "option" or kinds[k]]
        family = self.rnd.choices(families, [weights[k] for k in families])[0]
        if family == "option":
            return self._option(doc)
        path, value = self.choice(kinds[family])
        return getattr(self, f"_{family}")(doc, path, value)

    # -- families -----------------------------------------------------------------

    def _number(self, doc: dict, path: Path_, value: Any) -> str:
        op = self.rnd.randrange(6)
        if op == 0 and not isinstance(value, str):
            new: Any = -value if value else self.choice([1, -1])
        elif op in (2, 3):  # an ordinary value: the file stays valid, deeper code runs
            new = self.choice([
                self.rnd.randint(-4, 4),
                f"{self.rnd.randint(-9, 9)}/{self.rnd.randint(1, 9)}",
                str(Decimal(self.rnd.randint(-999, 999)).scaleb(-2)),
                f"{self.rnd.randint(1, 9)}e{self.rnd.randint(-8, 8)}",
                value,
            ])
        elif op == 1:
            exponent = self.choice([-120, -101, -100, -99, -50, -30, -7, 7, 30, 50, 99, 100, 101,
                                    400, 5000])
            new = f"{value}e{exponent}" if isinstance(value, int) else f"1e{exponent}"
        else:
            new = self.choice(NUMBERS)
        _set(doc, path, new)
        return f"{_show(path)}: {_short(value)} -> {_short(new)}"

    def _string(self, doc: dict, path: Path_, value: Any) -> str:
        new = self.choice(STRINGS) if self.rnd.random() < 0.8 else self.choice(NUMBERS)
        if self.rnd.random() < 0.2:
            new = value + self.choice(STRINGS)
        _set(doc, path, new)
        return f"{_show(path)}: {_short(value)} -> {_short(new)}"

    def _any(self, doc: dict, path: Path_, value: Any) -> str:
        new = self.choice(TYPE_SWAPS)
        _set(doc, path, copy.deepcopy(new))
        return f"{_show(path)}: {type(value).__name__} -> {_short(new)}"

    def _list(self, doc: dict, path: Path_, value: list) -> str:
        ops: list[tuple[str, Callable[[list], Any]]] = [
            ("drop an element", self._drop),
            ("duplicate an element", self._duplicate),
            ("append an element", self._append),
            ("empty", lambda v: []),
            ("reverse", lambda v: v[::-1]),
            ("wrap in a list", lambda v: [v]),
            ("replace by its first element", lambda v: v[0] if v else 0),
            ("deep nesting", self._deep),
            ("repeat", lambda v: v * self.choice([2, 3, 8])),
        ]
        if _is_matrix(value):
            ops += [
                ("transpose", lambda v: [list(c) for c in zip(*v)] if all(v) else v),
                ("drop a column", lambda v: [r[:-1] for r in v]),
                ("add a column", lambda v: [r + [self.choice([0, 1, "1/2"])] for r in v]),
                ("add a column to one row", self._widen_one),
                ("add a zero row", lambda v: v + [[0] * len(v[0])]),
                ("flatten", lambda v: [x for r in v for x in (r if isinstance(r, list) else [r])]),
            ]
        name, op = self.choice(ops)
        new = op(copy.deepcopy(value))
        _set(doc, path, new)
        return f"{_show(path)}: {name} ({len(value)} -> " + (
            f"{len(new)})" if isinstance(new, list) else f"{_short(new)})")

    def _drop(self, v: list) -> list:
        if v:
            del v[self.rnd.randrange(len(v))]
        return v

    def _duplicate(self, v: list) -> list:
        if v:
            i = self.rnd.randrange(len(v))
            v.insert(i, copy.deepcopy(v[i]))
        return v

    def _append(self, v: list) -> list:
        v.append(copy.deepcopy(self.choice(v)) if v and self.rnd.random() < 0.6
                 else self.choice([0, "x", [], [0], {}, 1.5]))
        return v

    def _widen_one(self, v: list) -> list:
        i = self.rnd.randrange(len(v))
        v[i] = v[i] + [0]
        return v

    def _deep(self, v: list) -> Raw:
        depth = self.choice([30, 100, 400, 1000, 5000])
        return Raw("[" * depth + dump_value(v) + "]" * depth)

    def _table(self, doc: dict, path: Path_, value: dict) -> str:
        keys = list(value)
        op = self.rnd.randrange(5) if keys else 4
        where = _show(path)
        if op == 0:
            key = self.choice(keys)
            del value[key]
            return f"{where}: delete key {key!r}"
        if op == 1:
            key = self.choice(keys)
            new = self.choice([key + "_", key.upper(), key.lower().replace("_", ""), " " + key,
                               self.choice(KNOWN_KEYS), key + "\x00", ""])
            value[new] = value.pop(key)
            return f"{where}: rename key {key!r} -> {new!r}"
        if op == 2:
            key = self.choice(keys)
            new = self.choice(KNOWN_KEYS + [key + "2", "extra"])
            value[new] = copy.deepcopy(value[key])
            return f"{where}: copy key {key!r} to {new!r}"
        if op == 3 and len(keys) > 1:
            a, b = self.rnd.sample(keys, 2)
            value[a], value[b] = value[b], value[a]
            return f"{where}: swap the values of {a!r} and {b!r}"
        key = self.choice(KNOWN_KEYS + ["unknown_key"])
        new = copy.deepcopy(self.choice(TYPE_SWAPS + NUMBERS[:20]))
        value[key] = new
        return f"{where}: set key {key!r} = {_short(new)}"

    def _option(self, doc: dict) -> str:
        if "claim" in doc and isinstance(doc["claim"], list) and doc["claim"]:
            index = self.rnd.randrange(len(doc["claim"]))
            path: Path_ = ("claim", index)
            options = CLAIM_OPTIONS
        else:
            layers = doc.get("layer") if isinstance(doc.get("layer"), list) else []
            index = self.rnd.randrange(len(layers) + 1)
            path = ("layer", index - 1) if index else ()
            options = EXAMPLE_OPTIONS
        table = _get(doc, path)
        if not isinstance(table, dict):
            return "no option set"
        key, values = self.choice(options)
        new = copy.deepcopy(self.choice(values))
        table[key] = new
        return f"{_show(path)}: set {key} = {_short(new)}"


def mutate_text(text: str, rnd: Any) -> tuple[str, str]:
    """A textual mutation of the TOML source (parse errors, truncation)."""
    op = rnd.randrange(4)
    at = rnd.randrange(len(text) + 1)
    if op == 0:
        return text[:at], f"truncate the text at {at}"
    if op == 1:
        char = ["\x00", "\x1b", "\ufffd", "[", "]", "=", '"', "\\", "\n[[layer]]\n", "\udc80"][
            rnd.randrange(10)]
        return text[:at] + char + text[at:], f"insert {char!r} at {at}"
    if op == 2:
        lines = text.splitlines(keepends=True)
        i = rnd.randrange(len(lines))
        return "".join(lines[:i] + lines[i + 1:]), f"delete line {i + 1}"
    lines = text.splitlines(keepends=True)
    i = rnd.randrange(len(lines))
    return "".join(lines[: i + 1] + lines[i:]), f"duplicate line {i + 1}"


# --------------------------------------------------------------------------- commands

#: Commands run on an example: {file} the mutated example, {out} a fresh folder path.
EXAMPLE_COMMANDS: list[list[str]] = [
    ["derive", "{file}"],
    ["derive", "{file}", "--json"],
    ["derive", "{file}", "--exact"],
    ["derive", "{file}", "--exact", "--json", "--stage", "layer1.*"],
    ["derive", "{file}", "--causal", "--decimals", "5"],
    ["derive", "{file}", "--reader-rounding", "--decimals", "2"],
    ["derive", "{file}", "--list"],
    ["export", "{file}", "--out", "{out}"],
    ["export", "{file}", "--out", "{out}", "--format", "markdown"],
    ["export", "{file}", "--out", "{out}", "--exact", "--causal"],
    ["trace", "{file}", "--token", "0"],
    ["trace", "{file}", "--token", "0", "--format", "json"],
    ["trace", "{file}", "--token", "0", "--format", "markdown"],
    ["trace", "{file}", "--token", "0", "--format", "latex"],
    ["trace", "{file}", "--token", "0", "--format", "html", "--out", "{out}.html"],
    ["trace", "{file}", "--token", "1", "--layer-norm", "whole_matrix"],
    ["check", "{claims}", "--example", "{file}"],
    ["prove", "{file}"],
    ["prove", "{file}", "--json"],
    ["crosscheck", "{file}"],
    ["crosscheck", "{file}", "--dtype", "float32", "--causal", "--mask=-1e9", "--json"],
    ["generate", "{file}", "--steps", "2"],
    ["backward", "{file}"],
    ["backward", "{file}", "--json", "--stage", "grad.layer1.*"],
    ["train", "{file}", "--lr", "1/10", "--steps", "2"],
    ["train", "{file}", "--lr", "0.01", "--optimizer", "adam", "--write", "{out}.toml"],
]

#: Commands run on a claims file: {claims} the mutated claims, {example} an example.
CLAIMS_COMMANDS: list[list[str]] = [
    ["check", "{claims}"],
    ["check", "{claims}", "--json"],
    ["check", "{claims}", "--example", "{example}"],
]

#: Odd values for the numeric options of the command line.
FLAG_VALUES = ["0", "-1", "1", "40", "5000", "100000", "abc", "1e3", "", "nan", "-inf",
               "99999999999999999999"]
FLAGS = {
    "derive": ["--decimals", "--digits", "--max-work", "--exact"],
    "export": ["--decimals", "--token", "--steps", "--max-work"],
    "trace": ["--decimals", "--token", "--max-work"],
    "check": ["--max-work"],
    "prove": ["--max-work"],
    "crosscheck": ["--tol", "--max-work", "--mask"],
    "generate": ["--steps", "--decimals", "--max-work"],
    "backward": ["--decimals", "--digits", "--max-work"],
    "train": ["--lr", "--steps", "--max-work", "--decimals"],
}
ENV_VALUES = ["abc", "", "0", "-1", "1e9", "100", "99999999999999999999"]


@dataclass
class Case:
    """One fuzz case: a mutated file and the command to run on it."""

    base: str
    mutations: list[str]
    text: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"base: {self.base}", f"argv: symformer {' '.join(self.argv)}"]
        lines += [f"env: {k}={v!r}" for k, v in self.env.items()]
        lines += [f"mutation: {m}" for m in self.mutations]
        return "\n".join(lines)


def make_case(rnd: Any, *, command: str | None = None, flag_rate: float = 0.1,
              text_rate: float = 0.05) -> Case:
    """A random case: a shipped file, one to three mutations, one command (any, or the
    sub-command ``command``)."""
    is_claims = command in (None, "check") and rnd.random() < (0.2 if command is None else 0.5)
    bases = ["builtin", "encoder_decoder", "course_module"]
    base = ("post_claims" if is_claims else "encoder_decoder" if command == "generate"
            else bases[rnd.randrange(3)])
    path = CLAIMS if is_claims else EXAMPLES[base]
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    if base == "course_module" and rnd.random() < 0.5:  # a loss, for backward and train
        n, d = len(doc["tokens"]), len(doc["embeddings"][0])
        doc["loss"] = {"kind": "mse",
                       "target": [[(i + j) % 3 - 1 for j in range(d)] for i in range(n)]}
    mutator = Mutator(rnd)
    count = rnd.choices([1, 2, 3], [6, 3, 1])[0]
    mutations = [mutator.mutate(doc) for _ in range(count)]
    text = dumps(doc)
    if rnd.random() < text_rate:
        text, what = mutate_text(text, rnd)
        mutations.append(what)
    commands = [c for c in (CLAIMS_COMMANDS if is_claims else EXAMPLE_COMMANDS)
                if (base == "encoder_decoder" or c[0] != "generate")
                and command in (None, c[0])]
    argv = list(commands[rnd.randrange(len(commands))])
    env: dict[str, str] = {}
    if rnd.random() < flag_rate:
        flag = FLAGS[argv[0]][rnd.randrange(len(FLAGS[argv[0]]))]
        value = FLAG_VALUES[rnd.randrange(len(FLAG_VALUES))]
        argv += [f"{flag}={value}"]
        mutations.append(f"flag {flag}={value}")
    if rnd.random() < flag_rate / 2:
        env["SYMFORMER_MAX_WORK"] = ENV_VALUES[rnd.randrange(len(ENV_VALUES))]
        mutations.append(f"env SYMFORMER_MAX_WORK={env['SYMFORMER_MAX_WORK']!r}")
    return Case(base, mutations, text, argv, env)


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    """How a case ended."""

    kind: str  # ok, traceback, hang, bad-status, silent-2, crash
    status: int | None
    seconds: float
    error: str = ""
    where: str = ""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    def signature(self, case: Case) -> str:
        """What distinguishes one failure class from another."""
        if self.kind == "hang":
            return f"hang in {case.argv[0]} at {self.where}"
        if self.kind == "traceback":
            return f"{self.error.split(':')[0]} at {self.where}"
        return f"{self.kind} ({self.status}) in {case.argv[0]}"

    def report(self, case: Case) -> str:
        text = [f"{self.kind}: status {self.status} after {self.seconds:.1f} s",
                case.describe()]
        if self.error:
            text.append(f"error: {self.error}")
        if self.traceback:
            text.append(self.traceback.rstrip())
        if self.stderr and not self.traceback:
            text.append("stderr: " + self.stderr[-800:].rstrip())
        return "\n".join(text)


class CaseTimeout(BaseException):  # BaseException: never swallowed by `except Exception`
    """Raised by SIGALRM when a case runs past its bound."""


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout()


def _innermost(tb: Any) -> str:
    """The innermost frame inside the symformer package: 'module.py:line in func'."""
    where = ""
    for frame in traceback.extract_tb(tb):
        parts = Path(frame.filename).parts
        if "symformer" in parts and "tests" not in parts:
            rel = "/".join(parts[len(parts) - 1 - parts[::-1].index("symformer"):])
            where = f"{rel}:{frame.lineno} in {frame.name}"
    return where


def _hang_site(tb: Any) -> str:
    """Where a hang was interrupted, as the chain of symformer functions (no line numbers)."""
    names = []
    for frame in traceback.extract_tb(tb):
        parts = Path(frame.filename).parts
        if "symformer" in parts and "cli" not in parts:
            names.append(f"{Path(frame.filename).stem}.{frame.name}")
    if len(names) > 3:
        names = [names[0], "...", *names[-2:]]
    return " > ".join(names) or "?"


def run_here(argv: list[str], env: dict[str, str], bound: float) -> Outcome:
    """Run ``main(argv)`` in this process under a SIGALRM bound."""
    from symformer.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    previous = signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    kind, status, error, where, tb_text = "ok", None, "", "", ""
    try:
        signal.setitimer(signal.ITIMER_REAL, bound)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except CaseTimeout as exc:
        kind, where = "hang", _hang_site(exc.__traceback__)
        tb_text = "".join(traceback.format_exception(exc))[-4000:]
    except BaseException as exc:  # everything else is a traceback the user would see
        kind, error, where = "traceback", f"{type(exc).__name__}: {exc}"[:500], _innermost(
            exc.__traceback__)
        tb_text = "".join(traceback.format_exception(exc))[-6000:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - start
    stdout, stderr = out.getvalue(), err.getvalue()
    if kind == "ok":
        if "Traceback (most recent call last)" in stdout + stderr:
            kind = "traceback"
            error = "printed a traceback"
        elif status not in OK_STATUSES:
            kind = "bad-status"
        elif status == 2 and not stderr.strip():
            kind = "silent-2"
    return Outcome(kind, status, seconds, error, where, tb_text, stdout[-2000:], stderr[-2000:])


def _run_forked(argv: list[str], env: dict[str, str], bound: float,
                memory_mb: int | None) -> Outcome:
    """Run the case in a forked child (hard kill after bound + GRACE, optional memory cap)."""
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        pid = os.fork()
    if pid == 0:  # the child: run, report, leave without cleanup
        code = 0
        try:
            os.close(read_fd)
            if memory_mb:
                import resource

                limit = memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            outcome = run_here(argv, env, bound)
            data = json.dumps(asdict(outcome)).encode()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    start = time.perf_counter()
    chunks: list[bytes] = []
    deadline = start + bound + GRACE
    killed = False
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            ready, _, _ = select.select([pipe], [], [], left)
            if ready:
                chunk = os.read(pipe.fileno(), 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    _, wait_status = os.waitpid(pid, 0)
    seconds = time.perf_counter() - start
    if killed:
        return Outcome("hang", None, seconds, "killed: SIGALRM did not end it", "uninterruptible")
    if chunks:
        return Outcome(**json.loads(b"".join(chunks)))
    reason = (f"killed by signal {os.WTERMSIG(wait_status)}" if os.WIFSIGNALED(wait_status)
              else f"child exit {os.WEXITSTATUS(wait_status)}")
    return Outcome("crash", None, seconds, reason)


_warm = False


def warm_up() -> None:
    """Import every module of symformer and run every command once in this process, so
    that forked children inherit the imports and first-call caches (otherwise each
    child pays for them: 0.8 s instead of 0.04 s).  Cheaply: the exports stop at the
    input stage and prove runs on attention_only (the full runs cost 11 s of CPU, for
    about 0.03 s less in each child)."""
    global _warm
    if _warm:
        return
    _warm = True
    import importlib
    import pkgutil

    import symformer

    for module in pkgutil.walk_packages(symformer.__path__, "symformer."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    runs = [("builtin", [*argv, "--stage", "input"] if argv[0] == "export" else argv)
            for argv in EXAMPLE_COMMANDS if argv[0] not in ("generate", "prove")]
    runs += [("encoder_decoder", ["derive", "{file}", "--json"]),
             ("encoder_decoder", ["generate", "{file}", "--steps", "2"])]
    for base, argv in runs:
        run_case(Case(base, [], EXAMPLES[base].read_text(encoding="utf-8"), argv), isolate=False)
    run_here(["prove", "attention_only"], {}, DEFAULT_BOUND)


def run_argv(argv: list[str], env: dict[str, str] | None = None, *,
             bound: float = DEFAULT_BOUND, isolate: bool = True,
             memory_mb: int | None = 4096) -> Outcome:
    """Run ``symformer.cli.main(argv)`` under the bound, in a forked child by default."""
    if isolate and hasattr(os, "fork"):
        warm_up()
        return _run_forked(argv, env or {}, bound, memory_mb)
    return run_here(argv, env or {}, bound)


def run_case(case: Case, *, bound: float = DEFAULT_BOUND, isolate: bool = True,
             memory_mb: int | None = 4096) -> Outcome:
    """Write the case's file to a fresh folder and run its command there (by default in
    a forked child of this process, after a warm-up run of every command)."""
    folder = Path(tempfile.mkdtemp(prefix="symformer-fuzz-"))
    try:
        target = folder / "case.toml"
        target.write_text(case.text, encoding="utf-8", errors="surrogateescape")
        values = {
            "file": str(target), "claims": str(CLAIMS), "example": str(EXAMPLES["builtin"]),
            "out": str(folder / "out"),
        }
        if case.base == "post_claims":
            values["claims"] = str(target)
        argv = [a.format(**values) for a in case.argv]
        return run_argv(argv, case.env, bound=bound, isolate=isolate, memory_mb=memory_mb)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
