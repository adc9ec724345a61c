"""``symformer prove``: the identities lecture notes state, proved for the example."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from symformer.cli._common import (
    add_convention_arguments,
    add_example_argument,
    load,
    request,
)
from symformer.cli._progress import Progress
from symformer.pipeline import prepare
from symformer.verify.prove import prove_all

ORDER = 45

EPILOG = """\
examples:
  symformer prove                       # the built-in example
  symformer prove my_example.toml --json

Statuses: proved (symbolically, on the stage-local formulas), certified (ball
arithmetic, with the enclosure), false (with a counterexample), vacuous. Note that
LayerNorm rows have variance sigma^2/(sigma^2+eps), so "variance exactly 1" is
reported false whenever eps > 0. Exit status 0 (no surprise) -- a false "variance 1"
is expected and does not count -- 1 if any other fact is false, 2 on bad input.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``prove`` sub-command."""
    p = sub.add_parser("prove", help="prove softmax, mask, LayerNorm and PE identities",
                       description="Prove, for the example, the facts lecture notes state.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    add_convention_arguments(p, causal_help=None)  # prove derives with and without it
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown only on a terminal anyway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer prove``."""
    example = prepare(load(args), request(args, "prove", derive=False)).example
    with Progress("symformer prove", quiet=args.quiet) as bar:
        facts = prove_all(example, args.max_work, bar.update)
    if args.json:
        print(json.dumps({"facts": [asdict(f) for f in facts]}, indent=1, ensure_ascii=False))
    else:
        width = max(len(f.status) for f in facts)
        for f in facts:
            print(f"{f.status:<{width}}  {f.statement}\n{'':<{width}}  ({f.detail})")
    unexpected = [f for f in facts if not f.holds and not f.name.endswith(".unit_variance")]
    return 1 if unexpected else 0
