"""``symformer backward``: the loss and its gradient at every stage and weight."""

from __future__ import annotations

import argparse
import json

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    add_json_arguments,
    json_rounding,
    load,
    request,
)
from symformer.cli._progress import Progress
from symformer.pipeline import prepare

ORDER = 15

EPILOG = """\
examples:
  symformer backward                                # the loss and every gradient
  symformer backward --list                         # gradient stage names and shapes
  symformer backward --stage 'grad.layer1.W_*' --decimals 6
  symformer backward --stage grad.embedding_table
  symformer backward my_example.toml --json --digits 30
  symformer backward --causal --mask -1e9 --json --decimals 6   # JSON at 6 decimals

The example's [loss] table says what is differentiated (kind = "mse" with a target
matrix shaped like the output, or kind = "cross_entropy" with one target token per
row of the probabilities; reduction = "mean" or "sum" and positions = [...] or the
"" no-target marker as in PyTorch; or kind = "upstream" with a gradient given at a
stage). grad.S is d loss / d S for every stage S the loss depends on;
grad.<block>.<weight> (grad.layer1.head1.W_Q, grad.layer1.W_1,
grad.layer1.add_norm1.gamma, grad.embedding_table, ...) the gradient of each weight;
a tied head's table has the total of both uses (grad.embedding_table) and each use
(grad.embedding_table.lookup, grad.embedding_table.head). Every digit is certified;
ReLU at exactly 0 and masked scores get the gradient 0. docs/backward.md.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``backward`` sub-command."""
    p = sub.add_parser("backward", help="print the loss and its gradient at every stage",
                       description="Differentiate the example's loss exactly (reverse "
                                   "mode) and print the gradient stages.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--stage", action="append", metavar="NAME",
                   help="stage name or glob pattern (repeatable; default: the loss and "
                        "every gradient, 'grad.*')")
    p.add_argument("--list", action="store_true", help="list stage names with shapes")
    add_convention_arguments(p)
    add_decimals_argument(p, "the tables", json=True)
    add_json_arguments(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown on a terminal when the run takes "
                        "more than a second)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer backward``: parse, prepare (the backward pass), build and print."""
    from symformer.documents import as_json, backward_lines, listing

    rounding = json_rounding(args)
    with Progress("symformer backward", quiet=args.quiet, delay=1.0) as bar:
        bar.update("deriving and differentiating")
        p = prepare(load(args), request(args, "backward", backward=True,
                                        stages=tuple(args.stage or ["loss", "grad.*"])))
        bar.update("certifying the digits")
        if args.list:
            text = listing(p.shown)
        elif args.json:
            text = json.dumps(as_json(p.derivation, p.shown, rounding), ensure_ascii=False)
        else:
            text = "\n".join(backward_lines(p))
    print(text)  # after the bar is cleared: stdout and stderr never interleave
    return 0
