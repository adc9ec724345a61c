"""``symformer trace``: one token through every step of the block."""

from __future__ import annotations

import argparse
import sys

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    load,
    request,
    token_text,
)
from symformer.cli._slice import add_slice_arguments, slice_of
from symformer.files import output_file, write_file
from symformer.pipeline import prepare
from symformer.trace import RENDERERS, render, resolve_token

ORDER = 30

EPILOG = """\
examples:
  symformer trace --token 1                       # the built-in example's "think"
  symformer trace --token understand --decimals 4
  symformer trace --token 1 --causal              # with the causal mask
  symformer trace symformer/examples/course_module.toml --token export
  symformer trace symformer/examples/course_module.toml --token export \\
      --layer-norm whole_matrix                   # the course code's LayerNorm
  symformer trace --token 1 --format html --out think.html   # step-through page
  symformer trace --token 1 --format latex --out think.tex   # pdflatex document
  symformer trace --token 1 --format json | jq '.steps[3]'
  symformer trace --token think --backward        # the loss, then the token's gradients
  symformer trace gpt2.toml --token 3 --heads 1    # head 1's steps; tokens 0 to 3 derived

With --backward (the example needs a [loss] table) the steps are the loss and the
token's gradients dL/dx, from the loss back to the embeddings: each with the
backward rules it sums and its chain-rule lines with the numbers substituted.

Each step shows where it is in the block, its formula, the token's numbers and,
for every number, its formula with the rounded inputs substituted.  Every printed
digit is certified (ball arithmetic); the substituted inputs are the rounded values
of the step before, and a line redone by hand gives its printed result: where the
inputs rounded to --decimals would not, the line shows them with more digits.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace`` sub-command."""
    p = sub.add_parser("trace", help="follow one token through the block, step by step",
                       description="Follow one token of the sentence through every step "
                                   "of every block: its vector, the formula and the "
                                   "numbers substituted.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--token", required=True, type=token_text, metavar="N|WORD",
                   help="0-based position in the sentence, or a word (its first occurrence)")
    add_decimals_argument(p, "every number")
    p.add_argument("--format", choices=list(RENDERERS), default="text",
                   help="output format (default text; html: a step-through page)")
    p.add_argument("--out", metavar="FILE",
                   help="write to FILE (atomically) instead of standard output")
    add_convention_arguments(p)
    p.add_argument("--backward", action="store_true",
                   help="step through the token's gradients, from the loss back to the "
                        "embeddings (needs a [loss] table)")
    p.add_argument("--side", choices=("encoder", "decoder"), default="encoder",
                   help="which stack to trace when the example has a [decoder] "
                        "(default encoder)")
    add_slice_arguments(p, positions=False, dims=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer trace``: parse, prepare, build the trace, render, write."""
    from symformer.documents import trace_document

    if args.out is not None:
        output_file(args.out)  # a directory or device node is refused before any work
    example = load(args)
    chosen = slice_of(args, example)
    # under a causal -inf mask the token's steps read the tokens up to it alone
    cut = args.side == "encoder" and not args.backward
    p = prepare(example, request(
        args, "trace", slice=chosen, reads="token" if cut else "all",
        token=resolve_token(example.tokens, args.token) if cut else None,
        work={"backward": args.backward}))
    text = render(trace_document(p, args.token, side=args.side, backward=args.backward),
                  args.format)
    if args.out is not None:
        path = write_file(args.out, text)
        print(f"wrote {path}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
