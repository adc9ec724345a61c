"""``symformer crosscheck``: the NumPy float reference against the certified exact values."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

import numpy as np

from symformer.cli._common import (
    MAX_STEPS,
    add_convention_arguments,
    add_example_argument,
    bounded_int,
    check_work,
    load,
    request,
    tolerance,
)
from symformer.cli.import_ import token_list
from symformer.conventions import Convention
from symformer.documents import (
    drift_json,
    drift_text,
    over_tol,
    prompts_json,
    prompts_text,
    reference_json,
    reference_text,
    torch_json,
    torch_text,
)
from symformer.parallel import MAX_JOBS
from symformer.pipeline import applied, prepare
from symformer.verify.crosscheck import crosscheck

ORDER = 50

EPILOG = """\
examples:
  symformer crosscheck                              # float64 vs exact, every stage
  symformer crosscheck --dtype float32 --tol 1e-6   # how far float32 drifts
  symformer crosscheck --causal --mask -1e9         # the -1e9 mask
  symformer crosscheck --layer-norm unbiased --norm pre --json
  symformer crosscheck symformer/examples/encoder_decoder.toml   # decoder stages too
  symformer crosscheck gpt2_style --torch --dtype bfloat16   # PyTorch's bfloat16, in eps
  symformer crosscheck ./my-gpt2 --text "Why did it fail?" --dtype bfloat16   # YOUR model
  symformer crosscheck ./my-llama --tokens 3,5,7 --dtype bfloat16 --attention eager
  symformer crosscheck ./my-llama --prompts prompts.txt --dtype float16 --jobs 2
  symformer crosscheck ./my-gpt2 --tokens 3,5,7 --kv-cache --steps 4 --dtype bfloat16
  symformer crosscheck gpt2_style --torch --kv-cache --dtype bfloat16   # the module's cache

A model directory (Hugging Face: config.json + model.safetensors) in place of the
example checks the user's own model: it is imported exactly (as `symformer import`
reads it), loaded with transformers as a user loads it (from_pretrained with
dtype=--load-dtype, default --dtype, and attn_implementation=--attention, default
sdpa; the title says which), run in --dtype with forward hooks on the modules each
stage names (docs/frameworks.md lists the module paths), and every stage it reaches
is compared with the exact values, in units of the dtype's epsilon. With --prompts
every prompt is checked as --text would check it; a prompt that cannot be is named
by its line and the others still run (exit 2 at the end).

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

With --kv-cache a causal language model's directory runs as generation does: a
prefill of the sentence, then one token at a time with past_key_values (the tokens
the exact greedy run chose), in --dtype; each stage's rows over the calls are the
cached path's stage. The table gives its drift from the exact values (cached =
uncached is proved exactly: `generate --kv-cache`), the same model's uncached drift
beside it, and per step the exact greedy token and each path's (FLIPPED where the
float argmax is not the exact one). --tol applies to the cached path.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``crosscheck`` sub-command."""
    p = sub.add_parser("crosscheck", help="compare the NumPy reference with the exact values",
                       description="Run the plain NumPy reference and the exact engine and "
                                   "print each stage's largest float error.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--tol", type=tolerance, default=None,
                   help="largest relative error allowed per stage, a finite number >= 0 "
                        "(default 1e-12; with --torch, no limit unless given)")
    p.add_argument("--dtype", choices=("float64", "float32", "float16", "bfloat16"),
                   default="float64",
                   help="floating-point type of the NumPy reference, of --torch or of the "
                        "model directory's run (default float64; bfloat16 with --torch or "
                        "a model directory only)")
    p.add_argument("--load-dtype", choices=("float64", "float32", "float16", "bfloat16"),
                   default=None,
                   help="with a model directory: the dtype given to from_pretrained "
                        "(default: --dtype, as a user running in that dtype loads it); "
                        "the model is then run in --dtype")
    p.add_argument("--attention", choices=("sdpa", "eager"), default="sdpa",
                   help="with a model directory: the attention implementation given to "
                        "from_pretrained (default sdpa, transformers' own default)")
    p.add_argument("--torch", action="store_true",
                   help="run the example as a PyTorch module (export --format torch) in "
                        "--dtype and give each stage's worst error in units of the dtype's "
                        "epsilon and its digits kept (needs PyTorch)")
    p.add_argument("--kv-cache", action="store_true",
                   help="with a causal LM's model directory, or an example's module "
                        "(--torch): run it as generation does "
                        "(a prefill, then one token at a time with its KV cache) in "
                        "--dtype, and give each stage's drift from the exact values, "
                        "cached and uncached, and whether each step's greedy token flips")
    p.add_argument("--steps", type=bounded_int(1, MAX_STEPS), default=3, metavar="N",
                   help="with --kv-cache: the greedy steps (default 3)")
    add_convention_arguments(p)
    p.add_argument("--tokens", type=token_list, metavar="IDS_OR_NAMES", default=None,
                   help="with a model directory: the sentence, as token ids or names")
    p.add_argument("--text", metavar="TEXT", default=None,
                   help="with a model directory: the sentence as text, tokenized by its "
                        "own tokenizer")
    p.add_argument("--prompts", metavar="FILE", default=None,
                   help="with a model directory: one prompt a line, each checked as --text "
                        "would be; a summary over all of them")
    p.add_argument("--jobs", type=bounded_int(1, MAX_JOBS), default=1, metavar="N",
                   help="with --prompts: run the prompts on N local processes (default 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="with --prompts: run each prompt as a task on the Dask scheduler at "
                        "ADDRESS (tcp://host:8786; needs the distributed package)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print the errors as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer crosscheck``."""
    from pathlib import Path

    from symformer.cli._common import example_path
    from symformer.errors import InputError

    source = example_path(args)
    if source is not None and Path(source).is_dir():
        return _model_directory(args, source)
    if args.tokens is not None or args.text is not None or args.prompts is not None:
        raise InputError("--tokens, --text and --prompts go with a model directory "
                         "(crosscheck DIR)")
    if args.jobs != 1 or args.scheduler is not None:
        raise InputError("--jobs and --scheduler go with --prompts")
    if args.load_dtype is not None or args.attention != "sdpa":
        raise InputError("--load-dtype and --attention go with a model directory "
                         "(crosscheck DIR)")
    if args.kv_cache and not args.torch:
        raise InputError("--kv-cache runs a PyTorch cached forward: a model directory's "
                         "(crosscheck DIR --kv-cache) or an example's module (crosscheck "
                         "EXAMPLE --torch --kv-cache); an example's exact cache: "
                         "generate EXAMPLE --kv-cache")
    if args.torch and args.kv_cache:
        return _torch_cached(args)
    if args.torch:
        return _torch(args)
    if args.dtype == "bfloat16":
        raise InputError("--dtype bfloat16 needs --torch (NumPy has no bfloat16)")
    args.tol = 1e-12 if args.tol is None else args.tol
    asked = request(args, "crosscheck")
    # the reference applies the conventions itself: only the work is checked here
    example = prepare(load(args), replace(asked, conventions=Convention(), causal=None,
                                          derive=False)).example
    conventions = asked.conventions
    rows = crosscheck(example, conventions, causal=asked.causal,
                      dtype=np.dtype(args.dtype).type, tol=args.tol, max_work=args.max_work)
    if args.json:
        print(json.dumps(reference_json(rows, args.dtype, args.tol, conventions), indent=1))
    else:
        print(reference_text(rows, args.dtype, args.tol, conventions))
    return 0 if all(r.ok for r in rows) else 1


def _torch(args: argparse.Namespace) -> int:
    """``--torch``: PyTorch in --dtype against the exact values, in units of epsilon."""
    from symformer.frameworks import require_torch
    from symformer.frameworks.torch_check import torch_crosscheck

    require_torch()  # one line saying what to install, before any work
    asked = request(args, "crosscheck")
    example = applied(load(args), asked)  # the module is built under the conventions
    rows = torch_crosscheck(example, args.dtype, prepare(example, asked).derivation)
    return _print_torch_rows(args, rows, f"PyTorch {args.dtype}")


def _torch_cached(args: argparse.Namespace) -> int:
    """``--torch --kv-cache``: the example's PyTorch module run as generation runs it (a
    prefill, then one token a call with its KV cache) in --dtype against the exact
    values, stage by stage, with its uncached forward and the greedy flips."""
    from symformer.blocks.cost import crosscheck_work, generate_work
    from symformer.blocks.work import check_work as refuse_over
    from symformer.frameworks import require_torch
    from symformer.frameworks.kv_drift import example_drift

    require_torch()
    asked = request(args, "crosscheck")
    example = applied(load(args), asked)  # the module is built under the conventions
    refuse_over(crosscheck_work(example) + generate_work(example, args.steps),
                args.max_work, f"{example.source}: `symformer crosscheck --torch --kv-cache`")
    report = example_drift(example, args.dtype, args.steps, max_work=0)  # bounded above
    return _print_drift(args, report, f"{example.title}: the PyTorch module (export --format "
                                      f"torch) in {args.dtype}")


def _print_drift(args: argparse.Namespace, report: Any, title: str,
                 load: dict[str, str] | None = None) -> int:
    """The drift report as text or JSON; exit 1 when a cached stage is over --tol."""
    if args.json:
        print(json.dumps(drift_json(report, args.dtype, args.tol)
                         | ({"load": load} if load else {}), indent=1, default=str))
    else:
        print(drift_text(report, title, args.dtype, args.tol))
    return 1 if over_tol(report.cached, args.tol) else 0


def _model_directory(args: argparse.Namespace, directory: str) -> int:
    """``crosscheck DIR``: the user's own Hugging Face model, loaded as the user loads it
    (--load-dtype, --attention), run in --dtype, stage by stage."""
    from symformer.errors import InputError
    from symformer.frameworks import require_torch
    from symformer.frameworks.hf_in import from_pretrained
    from symformer.frameworks.torch_check import load_hf_model, loaded_as, module_crosscheck

    if any(getattr(args, k, None) for k in ("causal", "mask", "layer_norm", "norm")):
        raise InputError("the conventions (--causal, --mask, --layer-norm, --norm) are the "
                         "model's own in crosscheck DIR")
    if args.torch:
        raise InputError("--torch runs an example file as a PyTorch module; a model "
                         "directory is run by transformers already (drop --torch)")
    require_torch()
    if args.kv_cache:
        return _cached(args, directory)
    if args.prompts is not None:
        return _prompts(args, directory)
    if args.jobs != 1 or args.scheduler is not None:
        raise InputError("--jobs and --scheduler go with --prompts")
    example = from_pretrained(directory, args.tokens, max_work=args.max_work,
                              text=args.text)
    check_work(args, example, "crosscheck", model=True)
    model = load_hf_model(directory, example, args.load_dtype or args.dtype, args.attention)
    rows = module_crosscheck(model, example, args.dtype, max_work=0)  # bounded above
    return _print_torch_rows(args, rows, f"{type(model).__name__} of {directory} "
                                         f"(loaded with {loaded_as(model)}) in {args.dtype}",
                             load=_load(args))


def _cached(args: argparse.Namespace, directory: str) -> int:
    """``crosscheck DIR --kv-cache``: the model's own cached forward in --dtype against
    the exact values, stage by stage, with its uncached forward and the greedy flips."""
    from symformer.blocks.cost import generate_work, model_load_work
    from symformer.blocks.work import check_work as refuse_over
    from symformer.errors import InputError
    from symformer.frameworks.hf_in import from_pretrained
    from symformer.frameworks.kv_drift import cached_drift
    from symformer.frameworks.torch_check import load_hf_model, loaded_as

    if args.prompts is not None:
        raise InputError("--kv-cache checks one sentence (--tokens or --text), not --prompts")
    example = from_pretrained(directory, args.tokens, max_work=args.max_work,
                              text=args.text)
    refuse_over(generate_work(example, args.steps) + model_load_work(), args.max_work,
                "crosscheck --kv-cache")
    model = load_hf_model(directory, example, args.load_dtype or args.dtype, args.attention)
    report = cached_drift(model, example, args.dtype, args.steps, max_work=0)
    title = (f"{type(model).__name__} of {directory} (loaded with {loaded_as(model)}) in "
             f"{args.dtype}")
    return _print_drift(args, report, title, _load(args))


def _load(args: argparse.Namespace) -> dict[str, str]:
    """How ``crosscheck DIR`` loads the model, for --json."""
    return {"dtype": args.load_dtype or args.dtype, "attention": args.attention}


def _prompts(args: argparse.Namespace, directory: str) -> int:
    """``crosscheck DIR --prompts FILE``: every prompt a task (local processes or Dask),
    each stage's worst error over all of them, in the prompts' order; a prompt that
    cannot be checked is named by its line, the others still run (exit 2 at the end)."""
    from symformer.blocks.cost import PER_SECOND, model_load_work, prompt_work, prompts_work
    from symformer.blocks.work import check_work as refuse_over
    from symformer.cli._progress import Progress
    from symformer.errors import InputError
    from symformer.frameworks.prompts import (
        crosscheck_prompt,
        fingerprint,
        prompt_examples,
        read_prompts,
    )
    from symformer.parallel import Outcome, run_tasks

    if args.tokens is not None or args.text is not None:
        raise InputError("--prompts gives the sentences: no --tokens or --text with it")
    prompts = read_prompts(args.prompts)
    examples = prompt_examples(directory, prompts, args.max_work)
    names = [p.name(k + 1) for k, p in enumerate(prompts)]
    checked = [k for k, e in enumerate(examples) if not isinstance(e, str)]
    # a process loads the model once, whatever number of prompts it runs
    loads = min(len(checked), 1 if args.scheduler else args.jobs)
    refuse_over(prompts_work([examples[k] for k in checked], loads), args.max_work,
                f"{args.prompts}: {len(checked):,} prompts")
    load = (args.load_dtype, args.attention)
    model = fingerprint(str(directory)) if checked else None  # each worker's must match
    tasks = [(str(directory), tuple(examples[k].token_ids), args.dtype, load, model)
             for k in checked]
    longest = max((prompt_work(examples[k]) for k in checked), default=0)
    idle = max(120.0, 4 * (model_load_work() + longest) / PER_SECOND)  # with room
    with Progress("symformer crosscheck", total=len(tasks), quiet=args.quiet) as bar:
        ran = run_tasks(crosscheck_prompt, tasks, [names[k] for k in checked],
                        jobs=args.jobs, scheduler=args.scheduler, progress=bar.step,
                        idle_timeout=idle)
    outcomes = [Outcome(name, error=f"line {p.line} of {args.prompts}: {e}")
                if isinstance(e, str) else None
                for name, p, e in zip(names, prompts, examples)]
    for k, outcome in zip(checked, ran):
        outcomes[k] = outcome
    texts = [p.text for p in prompts]
    title = (f"{directory} (loaded with dtype=torch.{load[0] or args.dtype}, "
             f"attn_implementation={args.attention!r})")
    if args.json:
        print(json.dumps(prompts_json(str(directory), args.dtype, texts, outcomes)
                         | {"load": _load(args)}, indent=1, default=str))
    else:
        print(prompts_text(title, args.dtype, texts, outcomes))
    return 0 if all(o.ok for o in outcomes) else 2


def _print_torch_rows(args: argparse.Namespace, rows: list, title: str,
                      load: dict[str, str] | None = None) -> int:
    """The table of per-stage errors in units of epsilon, and the worst stage
    (``load``: how a model directory was loaded, in --json)."""
    if args.json:
        document = torch_json(rows, args.dtype, args.tol) | ({"load": load} if load else {})
        print(json.dumps(document, indent=1, default=str))
    else:
        print(torch_text(rows, title, args.dtype, args.tol))
    return 1 if over_tol(rows, args.tol) else 0
