"""``symformer backward``: the loss and its gradient at every stage and weight."""

from __future__ import annotations

import argparse
import json

from symformer.blocks.backward import backward
from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    add_json_arguments,
    check_work,
    conventions_note,
    derivation,
    json_rounding,
    load,
)
from symformer.cli.derive import as_json, format_table
from symformer.verify.inactive import summary_lines

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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer backward``."""
    rounding = json_rounding(args)
    example = load(args)
    check_work(args, example, "backward")
    g = backward(derivation(args, example))
    stages = g.select(args.stage or ["loss", "grad.*"])
    if args.list:
        width = max(len(s.name) for s in stages)
        for s in stages:
            print(f"{s.name:<{width}}  {s.shape[0]}x{s.shape[1]}  {s.kind}")
        return 0
    if args.json:
        print(json.dumps(as_json(g, stages, rounding), ensure_ascii=False))
        return 0
    note = (" (causal mask)" if g.causal else "") + conventions_note(args, example)
    print(f"{g.example.title}{note}: backward pass ({g.example.loss.kind} loss)")
    inactive = summary_lines(g, [s.name for s in stages])
    if inactive:  # what the example leaves inactive (zero gradients and why), said once
        print("\n".join(inactive))
    for s in stages:
        print()
        print(format_table(s, args.decimals))
    return 0
