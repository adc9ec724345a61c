"""``symformer fill``: an author's notes with their placeholders filled in."""

from __future__ import annotations

import argparse

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    load,
    request,
)
from symformer.example.loader import MAX_FILE_BYTES
from symformer.files import output_file, write_file
from symformer.fill.syntax import MAX_DEPTH, MAX_INTEGER, MAX_OUTPUT, MAX_STEPS, MAX_TAGS
from symformer.pipeline import prepare

ORDER = 45

EPILOG = """\
examples:
  symformer fill notes.tex --out notes.filled.tex
  symformer fill post.md --example my_example.toml --out post.filled.md --decimals 3

Placeholders (LaTeX: \\VAR{...}; Markdown: {{ ... }} or \\VAR{...}):
  \\VAR{ layer1.head1.weights[1,3] }                 the entry, --decimals places
  \\VAR{ layer1.head1.weights["think","understand"] | percent(1) }
  \\VAR{ input[1,0] | exact }                        4 + \\sin 1
  \\VAR{ layer1.head1.weights | table }              booktabs table (Markdown: a pipe table)
  \\VAR{ layer1.head1.weights | bmatrix(3) }         a matrix, 3 decimals
  \\VAR{ layer1.add_norm1[1] }                       a token's row
  \\BLOCK{ for h in [0, 1] } ... \\VAR{ layer1.head1.weights[h, 0] } ... \\BLOCK{ endfor }
  \\COMMENT{ a comment }                             (Markdown also: {% %} and {# #})
Names are the stage names of `symformer derive --list`; positions count from 0.
The template language is a small subset of Jinja2's syntax and runs no code: no
attributes, calls, operators or other statements. An unknown stage, entry or format,
a syntax error or a limit is an error naming the line; nothing is written. In
LaTeX, {{ ... }} naming a stage (Markdown's spelling) is such an error too.
""" + (f"Limits: NOTES a regular UTF-8 file of at most {MAX_FILE_BYTES // 2**20} MiB; "
       f"{MAX_TAGS:,} tags;\nintegers within +-{MAX_INTEGER:,}; loops {MAX_DEPTH} deep; "
       f"{MAX_STEPS:,} steps; {MAX_OUTPUT // 2**20} MiB of output.\n"
       "See docs/fill.md.\n")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``fill`` sub-command."""
    p = sub.add_parser("fill", help="fill an author's LaTeX/Markdown placeholders with "
                                    "certified values",
                       description="Read LaTeX or Markdown with placeholders and write it "
                                   "with the certified values filled in.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("notes", metavar="NOTES", help="the author's .tex or .md file")
    add_example_argument(p, positional=False)
    p.add_argument("--out", required=True, metavar="FILE", help="output file")
    p.add_argument("--format", choices=("latex", "markdown"), default=None,
                   help="placeholder syntax (default: from the suffix of NOTES)")
    add_decimals_argument(p, "a placeholder without a format")
    add_convention_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer fill``."""
    from pathlib import Path

    from symformer.example.loader import read_text_file
    from symformer.fill import Template, guess_format

    fmt = args.format or guess_format(args.notes)
    text = read_text_file(Path(args.notes), "notes (a .tex or .md file)")
    # the syntax is checked before any work (nothing is derived for a bad template)
    template = Template(text, fmt, source=args.notes)
    output_file(args.out)  # a directory or device node is refused before any work
    g = prepare(load(args), request(args, "fill")).derivation
    filled = template.render(g, args.decimals)
    write_file(args.out, filled)
    print(f"wrote {args.out}")
    return 0
