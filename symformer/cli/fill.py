"""``symformer fill``: an author's notes with their placeholders filled in."""

from __future__ import annotations

import argparse

from symformer.cli._common import derivation, nonnegative_int
from symformer.files import output_file, write_file

ORDER = 45

EPILOG = """\
examples:
  symformer fill notes.tex --out notes.filled.tex
  symformer fill post.md --example my_example.toml --out post.filled.md --decimals 3

Placeholders (LaTeX: \\VAR{...}; Markdown: {{ ... }}):
  \\VAR{ layer1.head1.weights[1,3] }                 the entry, --decimals places
  \\VAR{ layer1.head1.weights["think","understand"] | percent(1) }
  \\VAR{ input[1,0] | exact }                        4 + \\sin 1
  \\VAR{ layer1.head1.weights | table }              booktabs table (Markdown: a pipe table)
  \\VAR{ layer1.head1.weights | bmatrix(3) }         a matrix, 3 decimals
  \\VAR{ layer1.add_norm1[1] }                       a token's row
Names are the stage names of `symformer derive --list`; positions count from 0.
An unknown stage, entry or format is an error naming the line; nothing is written.
See docs/figures.md.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``fill`` sub-command."""
    p = sub.add_parser("fill", help="fill an author's LaTeX/Markdown placeholders with "
                                    "certified values",
                       description="Read LaTeX or Markdown with placeholders and write it "
                                   "with the certified values filled in.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notes", metavar="NOTES", help="the author's .tex or .md file")
    p.add_argument("--example", metavar="FILE", default=None,
                   help="example file (default: the built-in example)")
    p.add_argument("--out", required=True, metavar="FILE", help="output file")
    p.add_argument("--format", choices=("latex", "markdown"), default=None,
                   help="placeholder syntax (default: from the suffix of NOTES)")
    p.add_argument("--decimals", type=nonnegative_int, default=2, metavar="N",
                   help="decimals of a placeholder without a format (default 2)")
    p.add_argument("--causal", action="store_true",
                   help="derive with the causal mask in every layer")
    p.add_argument("--max-work", type=int, metavar="N", default=None,
                   help="refuse examples needing more than N operations per evaluation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer fill``."""
    from symformer.errors import InputError
    from symformer.fill import fill, guess_format

    fmt = args.format or guess_format(args.notes)
    try:
        with open(args.notes, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise InputError(f"{args.notes}: cannot read ({reason})") from None
    output_file(args.out)  # a directory or device node is refused before any work
    g = derivation(argparse.Namespace(example=args.example, max_work=args.max_work),
                   causal=True if args.causal else None)
    filled = fill(text, g, fmt, args.decimals, source=args.notes)
    write_file(args.out, filled)
    print(f"wrote {args.out}")
    return 0
