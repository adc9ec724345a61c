"""``symformer check``: which of an author's claimed numbers are right, and why not."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from symformer.cli._common import (
    add_convention_arguments,
    add_example_argument,
    example_path,
    load,
    request,
)
from symformer.cli._progress import Progress
from symformer.documents import check_json, check_text
from symformer.errors import InputError
from symformer.example.loader import CLAIMS_ONLY, packaged_files
from symformer.pipeline import prepare
from symformer.verify.claims import claims_file_is_example
from symformer.verify.judging import judge

ORDER = 40

EPILOG = """\
examples:
  symformer check post_claims                  # the blog post's arrays (shipped)
  symformer check claims.toml my_example.toml --json      # or --example my_example.toml
  symformer check illustrated_self_attention   # an example file with [[claim]] tables
                                                # about itself (a published worked example)
  symformer check post.md --name pe=positional_encoding --name Q=layer1.head1.Q \\
      --name output=layer1.head1.output --name output=- \\
      --name masked_weights=causal:layer1.head1.weights

Any stage can be claimed: the forward ones, the loss and every gradient (grad.*,
with a [loss]), and a training run's (step2.layer1.W_1, step1.loss, with a [train]
table in the claims or example file). A claimed number with d decimals is right when
|exact - claimed| <= 0.5e-d, decided with certified digits. A claim with `inputs` is
checked as a step: recomputed from the named claims' printed numbers, and consistent
when some inputs within their rounding intervals produce it. An [[equation]] table
(or a '% symformer: equation STAGE' tag before an equation/align block in notes)
checks an author's LaTeX equation at every entry of the stage, on the example and on
random examples of the same shape. Claims file format:
docs/verify.md. Exit status: 0 every number right, 1 some wrong, 2 bad input.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check`` sub-command."""
    p = sub.add_parser("check", help="check an author's claimed numbers against the exact values",
                       description="Decide which claimed numbers are correct roundings of the "
                                   "exact values, and explain the wrong ones.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("claims", metavar="CLAIMS",
                   help="claims .toml file (or a shipped one by name, from any folder: "
                        "post_claims, illustrated_self_attention, "
                        "scaled_identity_attention), or a Markdown/Python document with "
                        "print(np.round(NAME, k)) lines followed by '# [[...]]' lines")
    add_example_argument(p)
    add_convention_arguments(p, causal_help="check against the causally masked derivation "
                                            "(default: the example's causal setting; a "
                                            "claim's causal = true forces it too)")
    p.add_argument("--name", action="append", default=[], metavar="NAME=STAGE",
                   help="map a document's printed NAME to a stage (repeat for a name printed "
                        "again; NAME=- skips it; NAME=causal:STAGE for the masked derivation)")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown only on a terminal anyway)")
    p.set_defaults(func=run)


def shipped_claims(packaged: dict[str, Path]) -> dict[str, Path]:
    """The shipped files that hold claims, by name: the claims-only files and the
    packaged examples with ``[[claim]]`` tables about themselves."""
    return {name: path for name, path in sorted(packaged.items())
            if name in CLAIMS_ONLY or "[[claim]]" in path.read_text(encoding="utf-8")}


def run(args: argparse.Namespace) -> int:
    """Run ``symformer check``."""
    packaged = packaged_files()
    name = args.claims.removesuffix(".toml")
    if not os.path.lexists(args.claims):
        shipped = shipped_claims(packaged)
        if name not in shipped:
            raise InputError(f"{args.claims}: no such file (shipped claims, by name: "
                             f"{', '.join(shipped)})")
        args.claims = str(shipped[name])
    if example_path(args) is None and claims_file_is_example(args.claims):
        args.example = args.claims  # an example file with claims about itself
    example = load(args)
    p = prepare(example, request(args, "check"))
    with Progress("symformer check", quiet=args.quiet) as bar:
        judged = judge(p, args.claims, args.name or (), args.max_work, bar.step)
    if args.json:
        print(json.dumps(check_json(judged.numbers, judged.equations, judged.unchecked), indent=1,
                         ensure_ascii=False))
    else:
        print(check_text(judged.claims, judged.numbers, judged.equations, judged.unchecked))
    for line in judged.unreadable:  # each one line, as every bad input is; the rest judged
        print(f"symformer check: error: {line}", file=sys.stderr)
    return judged.status


