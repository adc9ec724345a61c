"""``symformer derive``: every stage as a labelled table, or as JSON."""

from __future__ import annotations

import argparse
import json

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    add_json_arguments,
    bounded_int,
    json_rounding,
    load,
    request,
)
from symformer.cli._progress import Progress
from symformer.cli._slice import add_slice_arguments, slice_of
from symformer.engine.graph import DEFAULT_MAX_OPS
from symformer.pipeline import prepare

ORDER = 10
#: Closed forms up to this many operations are short enough to print (`--exact`).
EXACT_MAX_OPS = 12

EPILOG = """\
examples:
  symformer derive                                  # every stage, 3 decimals
  symformer derive --list                           # stage names and shapes
  symformer derive --list --all                     # and every side stage's address
  symformer derive --stage layer1.head1.weights.exp # each e^s_j (a side stage)
  symformer derive --stage 'layer1.head1.*' --decimals 5
  symformer derive --causal --stage layer1.head1.weights
  symformer derive my_example.toml --json --digits 30
  symformer derive --reader-rounding --decimals 2  # what a reader with a pencil gets
  symformer derive --exact --stage input --stage 'layer1.head1.Q'   # 4 + sin(1), ...
  symformer derive --exact --exact-max-ops 40 --stage 'layer1.head1.*'
  symformer derive --causal --mask -1e9 --stage layer1.head1.weights
  symformer derive gpt2.toml --positions 0:4 --heads 1 --dims 0:8   # a slice

Every printed digit is certified: values are computed in ball arithmetic and the
precision is raised until the rounding is decided.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``derive`` sub-command."""
    p = sub.add_parser("derive", help="print every stage of the derivation",
                       description="Push the example through its encoder blocks exactly "
                                   "and print the stages.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--stage", action="append", metavar="NAME",
                   help="stage name or glob pattern (repeatable), e.g. 'layer1.head1.*'")
    p.add_argument("--list", action="store_true", help="list stage names with shapes")
    p.add_argument("--all", action="store_true",
                   help="also the side stages added on demand (each e^s_j and Σ, the "
                        "products, squares, RoPE's θ and angles, the weights, each "
                        "gradient's paths; docs/verify.md): what claims can name")
    add_convention_arguments(p)
    add_decimals_argument(p, "the tables", json=True)
    p.add_argument("--exact", action="store_true",
                   help="show an entry's exact closed form instead of its decimal when it "
                        "has at most --exact-max-ops operations; in JSON, adds an \"exact\" "
                        "matrix (null where the form is longer)")
    p.add_argument("--exact-max-ops", type=bounded_int(1, DEFAULT_MAX_OPS),
                   default=EXACT_MAX_OPS, metavar="OPS",
                   help=f"longest closed form --exact shows, in operations (default "
                        f"{EXACT_MAX_OPS}, at most {DEFAULT_MAX_OPS}; --exact=OPS is short "
                        f"for --exact --exact-max-ops OPS)")
    p.add_argument("--reader-rounding", action="store_true",
                   help="recompute every stage from the previous stages rounded to "
                        "--decimals, as a reader working from printed tables does")
    add_json_arguments(p)
    add_slice_arguments(p)
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown on a terminal when a derive takes "
                        "more than a second)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer derive``: parse, prepare, build and print."""
    from symformer.documents import derive_json, derive_lines, listing

    rounding = json_rounding(args)
    example = load(args)
    chosen = slice_of(args, example)
    gradients = wants_gradients(args.stage, args.list) and example.loss is not None
    with Progress("symformer derive", quiet=args.quiet, delay=1.0) as bar:
        bar.update("deriving")
        p = prepare(example, request(
            args, "derive", slice=chosen, reads="slice",
            stages=tuple(args.stage) if args.stage else None, side_stages=True,
            every_side_stage=args.all, backward=gradients,
            reader_rounding=args.reader_rounding,
            work={"reader_rounding": args.reader_rounding, "gradients": gradients}))
        exact = args.exact_max_ops if args.exact else None
        bar.update("certifying the digits")
        if args.list:
            text = listing(p.shown)
        elif args.json:
            text = json.dumps(derive_json(p, rounding, exact), ensure_ascii=False)
        else:
            text = "\n".join(derive_lines(p, exact))
    print(text)  # after the bar is cleared: stdout and stderr never interleave
    return 0


def wants_gradients(patterns: list[str] | None, listing: bool) -> bool:
    """Whether ``--list`` or a ``--stage`` pattern asks for the loss or its gradients
    (the example's ``[loss]``: the backward pass, ``symformer backward``)."""
    return listing or any(p == "loss" or p.startswith("grad") for p in patterns or [])
