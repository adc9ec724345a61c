"""``symformer generate``: one exact decision per step (greedy, or a decoding rule),
shown as a table and, with a rule, each step's decisions with their margins."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from symformer.blocks import generate
from symformer.blocks.generate import run_derivation
from symformer.blocks.kv_cache import cached_heads, prove_cache
from symformer.cli._common import (
    MAX_STEPS,
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    bounded_int,
    example_path,
    request,
)
from symformer.cli._progress import Progress
from symformer.documents import generate_json, generate_text
from symformer.documents.generate import RunExtras
from symformer.errors import InputError
from symformer.example import load_example
from symformer.example.decoding import merged
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
  symformer generate --top-p 0.9 --temperature 0.5 --seed 7     # nucleus sampling, exact
  symformer generate --min-new-tokens 2 --ban '<s>'              # no </s> before step 3
  symformer generate gpt2_style --kv-cache --stage 'step*.layer1.head1.K_cache'

Each step re-derives the decoder with the target tokens so far and appends the
token whose logit at the last position is largest, decided exactly: balls that
separate the largest logit decide it, and logits no precision separates are proved
equal and reported as a tie (generation stops there; a tie is never broken).
Generation also stops after "</s>" (and a --stop token) when the vocabulary has
it.  Every printed probability is certified.

A decoding rule (the example's [decoding] table; these flags override its keys)
applies Hugging Face's processors and warpers in their order: repetition penalty,
banned tokens, end tokens masked before --min-new-tokens, forced tokens, then
temperature, top-k (ties with the k-th kept), top-p (the smallest set whose mass
reaches p, the crossing token included), min-p.  With --seed the token is drawn by
the inverse CDF from u = k/2^53, the t-th random() of Python's random.Random(seed);
without, it is the exact argmax.  Every decision is a stage (step2.kept,
step2.nucleus_mass, step2.draw: claimable with `symformer check`) and is printed
with its certified margin; a boundary case (a mass exactly at p, a tie) is proved
and the rule that decides it named.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` sub-command."""
    p = sub.add_parser("generate", help="append the exact next token step by step",
                       description="Generation with the example's decoder or language "
                                   "model: print the next-token probabilities of every step "
                                   "and the exact argmax, or the token a decoding rule "
                                   "chooses, every decision exact. Without EXAMPLE.toml, the "
                                   "packaged encoder-decoder example "
                                   "(symformer/examples/encoder_decoder.toml) is used.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p, default="the packaged encoder_decoder example")
    p.add_argument("--steps", type=bounded_int(1, MAX_STEPS), default=3, metavar="N",
                   help=f"tokens to append at most (default 3, at most {MAX_STEPS}); each "
                        f"step costs a forward pass, one token longer, in the work limit")
    add_decimals_argument(p, "the probabilities")
    add_convention_arguments(p, causal_help="mask the encoder's self-attention too (the "
                                            "decoder's is always masked)")
    rule = p.add_argument_group("decoding rule (overrides the example's [decoding] table)")
    rule.add_argument("--temperature", metavar="T", help="divide the logits by T (exact: 0.5, "
                                                           "1/3)")
    rule.add_argument("--top-k", type=int, metavar="K", help="keep the K largest scores "
                                                             "(and every score tied with the K-th)")
    rule.add_argument("--top-p", metavar="P", help="nucleus: the smallest set of most probable "
                                                   "tokens whose mass reaches P (crossing token "
                                                   "included)")
    rule.add_argument("--min-p", metavar="P", help="keep tokens with p >= P * p_max")
    rule.add_argument("--repetition-penalty", metavar="R",
                      help="divide (logit >= 0) or multiply (< 0) the logits of tokens already "
                           "in the sequence by R")
    rule.add_argument("--ban", action="append", metavar="TOKEN", help="never this token "
                                                                      "(repeatable)")
    rule.add_argument("--min-new-tokens", type=int, metavar="N",
                      help="mask the end tokens (</s>, --stop) for the first N steps")
    rule.add_argument("--stop", action="append", metavar="TOKEN",
                      help="stop after this token as after </s> (repeatable)")
    rule.add_argument("--force", action="append", metavar="STEP=TOKEN",
                      help="step STEP (1-based) produces TOKEN (repeatable)")
    rule.add_argument("--seed", type=int, metavar="N",
                      help="sample: draw u = k/2^53 from random.Random(N) at each step")
    rule.add_argument("--greedy", action="store_true",
                      help="the exact argmax even if the [decoding] table gives a seed")
    p.add_argument("--kv-cache", action="store_true",
                   help="derive the run as prefill then decode steps with a KV cache "
                        "(stepT.<head>.K_cache, V_cache, q_new, ..., output_new) and prove "
                        "cached = uncached exactly")
    p.add_argument("--stage", action="append", metavar="PATTERN",
                   help="also print these stages of the run (repeatable; globs): "
                        "'step2.kept', 'step*.decoder.layer1.self.head1.K_cache'")
    p.add_argument("--json", action="store_true", help="print the steps as one JSON object")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown only on a terminal anyway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer generate``."""
    given = load_example(example_path(args) or DEFAULT_EXAMPLE)
    settings = merged(given.decoding, _rule(args), "generate")
    if args.greedy and settings is not None:
        settings = dataclasses.replace(settings, seed=None)
    work = {"steps": args.steps, "kv_cache": args.kv_cache, "decoding": settings}
    p = prepare(given, request(args, "generate", derive=False, work=work))
    example = p.example
    with Progress("symformer generate", total=args.steps, quiet=args.quiet) as bar:
        steps = generate(example, args.steps, max_work=args.max_work,
                         on_step=lambda step: bar.update(f"next token {step.choice}"),
                         decoding=settings, decimals=args.decimals)
    run = run_derivation(steps, kv_cache=args.kv_cache) if args.kv_cache or args.stage \
        else None
    extra = RunExtras(run, prove_cache(run, len(steps), cached_heads(run))
                      if args.kv_cache else None, run.select(args.stage) if args.stage else [])
    if args.json:
        print(json.dumps(generate_json(p, steps, args.decimals, extra), indent=1,
                         ensure_ascii=False))
    else:
        print(generate_text(p, steps, args.decimals, extra))
    return 0



def _rule(args: argparse.Namespace) -> dict[str, object]:
    """The decoding keys the flags give (None: not given)."""
    forced = None
    if args.force:
        forced = {}
        for item in args.force:
            step, sep, token = item.partition("=")
            if not sep or not step.strip().isdigit():
                raise InputError(f"--force {item[:40]!r}: expected STEP=TOKEN (--force 1=je)")
            forced[step.strip()] = token
    return {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p,
            "min_p": args.min_p, "repetition_penalty": args.repetition_penalty,
            "banned": args.ban, "min_new_tokens": args.min_new_tokens, "stop": args.stop,
            "forced": forced, "seed": args.seed}
