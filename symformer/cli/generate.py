"""``symformer generate``: greedy decoding, one exact argmax per step, shown as a table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from symformer.blocks import generate
from symformer.cli._common import (
    MAX_STEPS,
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    bounded_int,
    example_path,
    request,
)
from symformer.display import Progress
from symformer.documents import generate_json, generate_text
from symformer.example import load_example
from symformer.pipeline import prepare

ORDER = 60

#: The example used when none is named (the built-in example has no decoder).
DEFAULT_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "encoder_decoder.toml"

EPILOG = """\
examples:
  symformer generate                                 # the packaged encoder-decoder example
  symformer generate --steps 5 --decimals 6
  symformer generate --mask -1e9 --layer-norm unbiased
  symformer generate my_example.toml --steps 3 --json

Each step re-derives the decoder with the target tokens so far and appends the
token whose logit at the last position is largest, decided exactly: balls that
separate the largest logit decide it, and logits no precision separates are proved
equal and reported as a tie (generation stops there; a tie is never broken).
Generation also stops after "</s>" when the vocabulary has it.  Every printed
probability is certified.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` sub-command."""
    p = sub.add_parser("generate", help="append the exact next token step by step",
                       description="Greedy generation with the example's decoder: print the "
                                   "next-token probabilities of every step and the exact "
                                   "argmax. Without EXAMPLE.toml, the packaged encoder-decoder "
                                   "example (symformer/examples/encoder_decoder.toml) is "
                                   "used.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p, default="the packaged encoder_decoder example")
    p.add_argument("--steps", type=bounded_int(1, MAX_STEPS), default=3, metavar="N",
                   help=f"tokens to append at most (default 3, at most {MAX_STEPS}); each "
                        f"step costs a forward pass, one token longer, in the work limit")
    add_decimals_argument(p, "the probabilities")
    add_convention_arguments(p, causal_help="mask the encoder's self-attention too (the "
                                            "decoder's is always masked)")
    p.add_argument("--json", action="store_true", help="print the steps as one JSON object")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown only on a terminal anyway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer generate``."""
    given = load_example(example_path(args) or DEFAULT_EXAMPLE)
    p = prepare(given, request(args, "generate", derive=False, work={"steps": args.steps}))
    example = p.example
    with Progress("symformer generate", total=args.steps, quiet=args.quiet) as bar:
        steps = generate(example, args.steps, max_work=args.max_work,
                         on_step=lambda step: bar.update(f"next token {step.choice}"))
    if args.json:
        print(json.dumps(generate_json(p, steps, args.decimals), indent=1,
                         ensure_ascii=False))
    else:
        print(generate_text(p, steps, args.decimals))
    return 0

