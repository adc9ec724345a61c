"""Arguments and helpers shared by the sub-commands.

Every option that several commands have is defined here once, with its limits,
so that the commands agree: the example file (positional, or ``--example``), the
work limit, the conventions (``--causal``, ``--mask``, ``--layer-norm``,
``--norm``) and ``--decimals``.  :func:`request` turns them into the
:class:`~symformer.pipeline.Request` every command prepares its example with
(:func:`symformer.pipeline.prepare`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path

from symformer import pipeline
from symformer.blocks.work import parse_work_limit
from symformer.conventions import Convention
from symformer.engine.graph import DEFAULT_MAX_OPS
from symformer.errors import InputError
from symformer.example import Example, load_example
from symformer.example.schema import LAYER_NORMS, NORM_PLACEMENTS
from symformer.pipeline import Request
from symformer.rendering import DEFAULT_DECIMALS, Rendering
from symformer.words import plural  # noqa: F401  (the commands count their nouns with it)

#: The most decimals (--decimals) or significant digits (--digits) a command prints.
MAX_DECIMALS = 100
#: The most greedy steps one run generates (generate --steps, export --steps).
MAX_STEPS = 1000
#: Options whose value may start with "-" (``--mask -1e9``): joined to the option
#: before parsing, since argparse would read ``-1e9`` as an option.
_DASH_VALUE_OPTIONS = ("--mask",)



def add_example_argument(parser: argparse.ArgumentParser, *, positional: bool = True,
                         default: str = "the built-in example") -> None:
    """The optional EXAMPLE.toml argument (positional or ``--example``) and --max-work."""
    if positional:
        parser.add_argument("example", nargs="?", metavar="EXAMPLE.toml",
                            help=f"example file or packaged example name (default: {default})")
    parser.add_argument("--example", dest="example_option", metavar="EXAMPLE.toml",
                        default=None, help="the example file, given as an option"
                        + ("" if positional else f" (default: {default})"))
    parser.add_argument("--max-work", type=work_limit, metavar="N", default=None,
                        help="refuse runs estimated to need more than N operations, each "
                             "about 2 microseconds of CPU (default 5,000,000, about 10 s, or "
                             "SYMFORMER_MAX_WORK; 0: no limit)")


def add_convention_arguments(parser: argparse.ArgumentParser, *,
                             causal_help: str | None = "force the causal mask on") -> None:
    """--causal, --mask, --layer-norm and --norm: the example under other conventions.

    Every command offers the same choices: those an example file accepts for
    ``layer_norm`` and ``norm`` (:data:`~symformer.example.schema.LAYER_NORMS`,
    :data:`~symformer.example.schema.NORM_PLACEMENTS`).  ``causal_help=None`` leaves
    --causal out (``prove`` derives both ways anyway).
    """
    if causal_help is not None:
        parser.add_argument("--causal", action="store_true", help=causal_help)
    parser.add_argument("--mask", metavar="VALUE", default=None,
                        help="what masked scores get: -inf (weights exactly 0) or a negative "
                             "number such as -1e9 (default: the example's)")
    parser.add_argument("--layer-norm", choices=LAYER_NORMS, default=None,
                        help="normalisation of every block and of the final norm (default: "
                             "the example's): biased or unbiased LayerNorm, whole_matrix "
                             "(mean and variance over the whole matrix, as the course "
                             "module's code computes them) or rms (RMSNorm, no beta)")
    parser.add_argument("--norm", choices=NORM_PLACEMENTS, default=None,
                        help="where the normalisation sits (default: the example's): post "
                             "(after each residual sum), pre (before each sub-layer) or "
                             "none")


def add_decimals_argument(parser: argparse.ArgumentParser,
                          what: str = "every printed value", *, json: bool = False) -> None:
    """--decimals N, from 0 to MAX_DECIMALS, default DEFAULT_DECIMALS.

    ``json``: the command also has --json (:func:`add_json_arguments`); the default is
    then filled in by :func:`json_rounding`, which must be called.
    """
    parser.add_argument("--decimals", type=decimals, default=None if json else DEFAULT_DECIMALS,
                        metavar="N",
                        help=f"decimals of {what} (default {DEFAULT_DECIMALS}, at most "
                             f"{MAX_DECIMALS})" + ("; with --json, of the JSON values too"
                                                   if json else ""))


#: Significant digits of --json values unless --digits or --decimals says otherwise.
DEFAULT_JSON_DIGITS = 15


def add_json_arguments(parser: argparse.ArgumentParser) -> None:
    """--json, and --digits N: how the JSON values are rounded (see :func:`json_rounding`).

    The command's --decimals (:func:`add_decimals_argument`, added before) must be added
    with ``json=True``, so that a --decimals given on the command line can be told from
    the default.
    """
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object with every selected stage (rounded to "
                             "--decimals when given, else to --digits significant digits)")
    parser.add_argument("--digits", type=digits, default=None, metavar="N",
                        help=f"significant digits of the JSON values (default "
                             f"{DEFAULT_JSON_DIGITS}, at most {MAX_DECIMALS}; not with "
                             f"--decimals)")


def json_rounding(args: argparse.Namespace) -> dict[str, int]:
    """How --json rounds: ``{"decimals": N}`` when --decimals was given, else
    ``{"significant": N}`` (--digits, default 15); both given with --json is an error.
    Sets ``args.decimals`` to the tables' default when it was not given."""
    given = args.decimals
    if args.decimals is None:
        args.decimals = DEFAULT_DECIMALS
    if given is not None and args.digits is not None and args.json:
        raise InputError("--decimals and --digits both say how to round the JSON values; "
                         "give one")
    if given is not None:
        return {"decimals": given}
    return {"significant": args.digits if args.digits is not None else DEFAULT_JSON_DIGITS}


def prepare_argv(argv: Sequence[str]) -> list[str]:
    """``--mask -1e9`` as ``--mask=-1e9``, and ``--exact=N`` as ``--exact --exact-max-ops N``."""
    out: list[str] = []
    items = list(argv)
    k = 0
    while k < len(items):
        item = items[k]
        if item == "--":
            out.extend(items[k:])
            break
        if item in _DASH_VALUE_OPTIONS and k + 1 < len(items) \
                and items[k + 1].startswith("-") and items[k + 1] != "--":
            out.append(f"{item}={items[k + 1]}")
            k += 2
            continue
        if item.startswith("--exact="):
            out.extend(["--exact", "--exact-max-ops", item.removeprefix("--exact=")])
        else:
            out.append(item)
        k += 1
    return out


def example_path(args: argparse.Namespace) -> str | None:
    """The example named by the positional argument or --example (not both)."""
    positional = getattr(args, "example", None)
    option = getattr(args, "example_option", None)
    if positional is not None and option is not None and positional != option:
        raise InputError(f"two examples given: {positional} and --example {option}; "
                         f"give one")
    return positional if positional is not None else option


def load(args: argparse.Namespace) -> Example:
    """The example named on the command line (the built-in one by default)."""
    path = example_path(args)
    if (getattr(args, "exact", False) and path is not None and path.isdigit()
            and not Path(path).exists()):
        # `--exact 100000` once took a size limit: say where it went
        raise InputError(f"--exact takes no number ({path} is not an example file); give "
                         f"the closed forms' size limit with --exact-max-ops N (at most "
                         f"{DEFAULT_MAX_OPS})")
    return load_example(path)


def convention(args: argparse.Namespace) -> Convention:
    """The conventions chosen on the command line (None: the example's own)."""
    return Convention(getattr(args, "mask", None), getattr(args, "layer_norm", None),
                      getattr(args, "norm", None))


def causal(args: argparse.Namespace) -> bool | None:
    """True when --causal was given, else None: the example's own setting."""
    return True if getattr(args, "causal", False) else None


def rendering(args: argparse.Namespace) -> Rendering:
    """How the command prints (:class:`~symformer.rendering.Rendering`): the command
    line's --decimals, --exact and --full where the command has them, the one default
    otherwise."""
    given = {key: getattr(args, key) for key in ("decimals", "exact", "full")
             if getattr(args, key, None) is not None}
    return Rendering(**given)


def request(args: argparse.Namespace, command: str, **fields: object) -> Request:
    """The request of ``symformer COMMAND`` (:func:`symformer.pipeline.prepare`): the
    command line's conventions, --causal, --max-work and rendering options, and
    ``fields``."""
    return Request(command=command, conventions=convention(args), causal=causal(args),
                   max_work=getattr(args, "max_work", None), rendering=rendering(args),
                   **fields)


def check_work(args: argparse.Namespace, example: Example, command: str,
               **options: object) -> None:
    """Refuse, before any work, a command estimated to exceed the work limit (a check
    after :func:`~symformer.pipeline.prepare`'s, once the options it depends on are
    known: ``check``'s claims): :func:`symformer.pipeline.check_work`."""
    pipeline.check_work(example, command, args.max_work, **options)


# -- argparse types -----------------------------------------------------------------
def nonnegative_int(text: str) -> int:
    """argparse type: a whole number >= 0 (ASCII digits, at most 30 of them)."""
    value = parse_work_limit(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a whole number, found {text[:40]!r}")
    return value


def bounded_int(low: int, high: int):
    """argparse type: a whole number from ``low`` to ``high``."""
    def parse(text: str) -> int:
        value = parse_work_limit(text)
        if value is None:  # "-1" or 40 digits: name the range, not only the kind
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to "
                                             f"{high}, found {text[:40]!r}")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, found {value}")
        return value

    parse.__name__ = f"whole number from {low} to {high}"
    return parse


#: argparse type of --decimals: 0 to MAX_DECIMALS.
decimals = bounded_int(0, MAX_DECIMALS)
#: argparse type of --digits: 1 to MAX_DECIMALS.
digits = bounded_int(1, MAX_DECIMALS)


def token_text(text: str) -> str:
    """argparse type of --token: a position or a word; refuses absurdly long positions."""
    if text.strip().lstrip("-").isdigit() and len(text.strip()) > 30:
        raise argparse.ArgumentTypeError(f"position {text[:20]}... is out of range")
    return text


def work_limit(text: str) -> int:
    """argparse type of --max-work: a whole number of operations, 0 meaning no limit."""
    value = parse_work_limit(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a whole number of operations such as "
                                         f"20000000 (0: no limit), found {text[:40]!r}")
    return value


def tolerance(text: str) -> float:
    """argparse type of --tol: a finite number >= 0 (a float: it bounds float errors)."""
    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1e-12, "
                                         f"found {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, found {text[:40]!r}")
    return value
