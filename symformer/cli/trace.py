"""``symformer trace``: one token through every step of the block."""

from __future__ import annotations

import argparse
import sys

from symformer.cli._common import add_example_argument, derivation, load, nonnegative_int
from symformer.files import output_file, write_file
from symformer.trace import RENDERERS, render, trace_token
from symformer.verify.conventions import LAYER_NORMS, Convention, derive_variant

ORDER = 30

EPILOG = """\
examples:
  symformer trace --token 1                       # the built-in example's "think"
  symformer trace --token understand --decimals 4
  symformer trace --token 1 --causal              # with the causal mask
  symformer trace symformer/examples/course_module.toml --token export
  symformer trace symformer/examples/course_module.toml --token export \
      --layer-norm whole_matrix                   # the course code's LayerNorm
  symformer trace --token 1 --format html --out think.html   # step-through page
  symformer trace --token 1 --format latex --out think.tex   # pdflatex document
  symformer trace --token 1 --format json | jq '.steps[3]'

Each step shows where it is in the block, its formula, the token's numbers and,
for every number, its formula with the rounded inputs substituted.  Every printed
digit is certified (ball arithmetic); the substituted inputs are the rounded values
of the step before, so recomputing a line by hand may differ in the last digit.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace`` sub-command."""
    p = sub.add_parser("trace", help="follow one token through the block, step by step",
                       description="Follow one token of the sentence through every step "
                                   "of every block: its vector, the formula and the "
                                   "numbers substituted.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--token", required=True, metavar="N|WORD",
                   help="0-based position in the sentence, or a word (its first occurrence)")
    p.add_argument("--decimals", type=nonnegative_int, default=3, metavar="N",
                   help="decimals of every number (default 3)")
    p.add_argument("--format", choices=list(RENDERERS), default="text",
                   help="output format (default text; html: a step-through page)")
    p.add_argument("--out", metavar="FILE",
                   help="write to FILE (atomically) instead of standard output")
    p.add_argument("--causal", action="store_true", help="force the causal mask on")
    p.add_argument("--layer-norm", choices=LAYER_NORMS, metavar="KIND",
                   help="trace under another LayerNorm convention: biased, unbiased or "
                        "whole_matrix (mean and variance over the whole matrix, as the "
                        "course module's code computes them)")
    p.add_argument("--side", default="encoder", metavar="SIDE",
                   help="which stack to trace when the example has several (default encoder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer trace``."""
    causal = True if args.causal else None
    if args.out:
        output_file(args.out)  # a directory or device node is refused before any work
    if args.layer_norm:
        g = derive_variant(load(args), Convention(layer_norm=args.layer_norm), causal,
                           args.max_work)
    else:
        g = derivation(args, causal=causal)
    text = render(trace_token(g, args.token, args.decimals, side=args.side), args.format)
    if args.out:
        path = write_file(args.out, text)
        print(f"wrote {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
