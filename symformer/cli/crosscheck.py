"""``symformer crosscheck``: the NumPy float reference against the certified exact values."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import numpy as np

from symformer.cli._common import (
    add_convention_arguments,
    add_example_argument,
    causal,
    check_work,
    convention,
    load,
    tolerance,
)
from symformer.verify.crosscheck import crosscheck

ORDER = 50

EPILOG = """\
examples:
  symformer crosscheck                              # float64 vs exact, every stage
  symformer crosscheck --dtype float32 --tol 1e-6   # how far float32 drifts
  symformer crosscheck --causal --mask -1e9         # the -1e9 mask
  symformer crosscheck --layer-norm unbiased --norm pre --json
  symformer crosscheck symformer/examples/encoder_decoder.toml   # decoder stages too

The relative error of a stage is its largest absolute error divided by the largest
exact magnitude in the stage (entries that are exactly 0 do not blow it up). The
conventions apply to the NumPy reference and to the exact engine alike, decoder
blocks included (the decoder's self-attention is always masked; --causal masks
the encoder). next_token is compared as a choice: the float argmax must be the
exact one (or one of an exact tie). With a [loss] the loss and every gradient
(grad.*) are compared too, against a float64 backward pass of the reference's own
(each operation's NumPy vector-Jacobian product, run backwards over the forward
graph); a gradient's relative error divides by the largest magnitude in it or in
the gradients it is computed from. A stage the reference cannot compute is
reported FAILED with the reason. Exit status 1 when a stage exceeds --tol or fails.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``crosscheck`` sub-command."""
    p = sub.add_parser("crosscheck", help="compare the NumPy reference with the exact values",
                       description="Run the plain NumPy reference and the exact engine and "
                                   "print each stage's largest float error.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--tol", type=tolerance, default=1e-12,
                   help="largest relative error allowed per stage, a finite number >= 0 "
                        "(default 1e-12)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="floating-point type of the NumPy reference (default float64)")
    add_convention_arguments(p)
    p.add_argument("--json", action="store_true", help="print the errors as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer crosscheck``."""
    example = load(args)
    check_work(args, example, "crosscheck")
    conventions = convention(args)
    rows = crosscheck(example, conventions, causal=causal(args),
                      dtype=np.dtype(args.dtype).type, tol=args.tol, max_work=args.max_work)
    failed = [r for r in rows if not r.ok]
    if args.json:
        print(json.dumps({"dtype": args.dtype, "tol": args.tol,
                          "conventions": conventions.describe(),
                          "stages": [asdict(r) for r in rows], "ok": not failed}, indent=1))
    else:
        width = max(len(r.stage) for r in rows)
        print(f"{args.dtype} reference vs exact ({conventions.describe()}), tol {args.tol:g}")
        print(f"{'stage':<{width}}  {'max abs err':>11}  {'max rel err':>11}")
        for r in rows:
            flag = "" if r.ok else ("  FAILED" if r.note else "  > tol")
            note = f"  ({r.note})" if r.note else ""
            print(f"{r.stage:<{width}}  {r.abs_error:11.3e}  {r.rel_error:11.3e}{flag}{note}")
        print(f"\n{len(rows) - len(failed)} of {len(rows)} stages within tol")
    return 1 if failed else 0
