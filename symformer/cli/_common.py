"""Arguments and helpers shared by the sub-commands."""

from __future__ import annotations

import argparse

from symformer.blocks import derive
from symformer.engine import Derivation
from symformer.example import Example, load_example


def add_example_argument(parser: argparse.ArgumentParser) -> None:
    """The optional EXAMPLE.toml positional argument and the size limit."""
    parser.add_argument("example", nargs="?", metavar="EXAMPLE.toml",
                        help="example file (default: the built-in example)")
    parser.add_argument("--max-work", type=int, metavar="N", default=None,
                        help="refuse examples needing more than N operations per "
                             "evaluation (default 5,000,000)")


def load(args: argparse.Namespace) -> Example:
    """The example named on the command line, or the built-in one."""
    return load_example(args.example)


def derivation(args: argparse.Namespace, causal: bool | None = None) -> Derivation:
    """Load and derive the example named on the command line."""
    return derive(load(args), causal=causal, max_work=getattr(args, "max_work", None))


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, found {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, found {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value
