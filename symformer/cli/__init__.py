"""The ``symformer`` command line.

Each sub-command lives in its own module of this package and registers itself
with ``register(subparsers)``; the modules are discovered, so adding a command
means adding a module.  Every :class:`~symformer.errors.InputError` becomes a
one-line message on stderr and exit status 2, never a traceback.  Exit statuses:
0 success, 1 a check found something wrong, 2 anything else.  An unexpected
exception (a bug) is reported on one line as an internal error, also with status 2;
``SYMFORMER_DEBUG=1`` lets it through with its traceback (the tests set it, so a bug
cannot hide behind the message).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import warnings
from collections.abc import Sequence

from symformer.errors import InputError, NotSupportedError, UndecidedError, UndecidedWarning

DESCRIPTION = """\
Derive a small Transformer example exactly, stage by stage (forward and backward),
and turn the derivation into LaTeX, Markdown, figures, slides, worked lines, checks,
training steps and exercise sheets. Every command works on the built-in example (the
blog post's "I think I understand") when no example file is given; more ship by name
(attention_only, gpt2_style, llama_style, encoder_decoder, course_module; heads
without a vocabulary: sentiment_classifier, a sigmoid with binary cross-entropy, and
topic_classifier, a softmax over classes; optimizer_lesson, Adam on an objective; and
two published worked examples with their printed numbers: illustrated_self_attention,
scaled_identity_attention; decoders as people teach them: decoding_lesson (sampling
rules), cross_attention_decoder, decoder_only_block; moe_dropout, a mixture of
experts with a proved routing tie and dropout with a given mask). `symformer COMMAND
--help` shows examples.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 2 with a usage line, as argparse does
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every discovered sub-command.

    Given the ``command`` about to run, only its module is imported when it registers
    that command (a faster start: ``derive`` does not import the exporters, the
    tracer or the checkers); every module otherwise (``--help``, a mistyped name).
    """
    names = [info.name for info in pkgutil.iter_modules(__path__)
             if not info.name.startswith("_")]
    # a keyword's module has a trailing underscore (``import_`` registers ``import``)
    module = command if command in names else f"{command}_"
    if module in names:
        parser, sub = _parser([module])
        if command in sub.choices:
            return parser
    return _parser(names)[0]


def _parser(names: list[str]) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The parser with the sub-commands of the modules ``names`` of this package."""
    parser = _Parser(prog="symformer", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from symformer import __version__

    parser.add_argument("--version", action="version", version=f"symformer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    for module in sorted(modules, key=lambda m: (getattr(m, "ORDER", 100), m.__name__)):
        module.register(sub)
    return parser, sub


def _warning_printer(command: str):
    """``warnings.showwarning`` as one line on stderr: ``symformer CMD: warning: ...``."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"symformer {command}: warning: {message}", file=sys.stderr)
    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from symformer.cli._common import prepare_argv

    argv = prepare_argv(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    name = f"symformer {args.command}"
    try:
        from symformer.blocks.work import command_line  # refusals name --max-work

        with warnings.catch_warnings(), command_line():
            warnings.simplefilter("default", UndecidedWarning)
            warnings.showwarning = _warning_printer(args.command)
            return int(args.func(args) or 0)
    except InputError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except (NotSupportedError, UndecidedError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except (RecursionError, MemoryError) as exc:
        if os.environ.get("SYMFORMER_DEBUG"):
            raise
        what = "nested too deeply" if isinstance(exc, RecursionError) else "too large"
        print(f"{name}: error: the input is {what} for this machine ({type(exc).__name__}); "
              f"make it smaller, or report it if it is not unusually large", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: one line, not a traceback (SYMFORMER_DEBUG=1 shows it)
        if os.environ.get("SYMFORMER_DEBUG"):
            raise
        message = " ".join(str(exc).split())[:300]
        print(f"{name}: internal error: {type(exc).__name__}: {message} (please report it "
              f"with the command line; SYMFORMER_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2
