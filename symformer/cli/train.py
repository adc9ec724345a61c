"""``symformer train``: exact optimisation steps, the certified loss of every step."""

from __future__ import annotations

import argparse
from pathlib import Path

from symformer.blocks.train import (
    MAX_STEPS,
    OPTIMIZERS,
    Training,
    check_steps,
    learning_rate,
    loss_value,
    options,
    rational_weights,
    rounded_weights,
    train,
    train_table,
)
from symformer.cli._common import (
    DEFAULT_DECIMALS,
    MAX_DECIMALS,
    add_convention_arguments,
    add_example_argument,
    decimals,
    load,
    nonnegative_int,
    plural,
    request,
)
from symformer.cli._progress import Progress
from symformer.documents import train_lines
from symformer.engine.rounding import start_precision
from symformer.errors import InputError
from symformer.example.loader import read_text_file, read_toml
from symformer.example.write import updated_example
from symformer.files import output_file, write_file
from symformer.pipeline import prepare

ORDER = 16

EPILOG = f"""\
examples:
  symformer train --lr 0.1 --steps 5                # five exact gradient-descent steps
  symformer train --lr 0.01 --steps 3 --optimizer adam --beta2 0.99 --eps 1e-6
  symformer train --lr 0.01 --steps 2 --optimizer adamw --weight-decay 0.1
  symformer train --lr 0.1 --steps 2 --freeze embedding_table --freeze 'layer1.head*'
  symformer train --lr 0.1 --steps 1 --stage 'step1.layer1.head1.W_*' --stage step1.loss
  symformer train my_example.toml --lr 1/8 --steps 1 --write trained.toml --decimals 4

Each step's weights are exact: after step 1 they are no longer rational (softmax,
square roots), so they are stages of the graph (step1.layer1.W_1 = step0.layer1.W_1 -
lr * grad.step0.layer1.W_1) that the next step reads by name; --stage GLOB prints
any of them (stepT.<weight>, stepT.loss, stepT.<forward stage>, grad.stepT.*,
stepT.adam_m.<weight>), as claims files can check them (docs/backward.md). The loss
of every step is printed with certified digits; a step where the loss does not
decrease is reported. A comparison the balls leave open is decided from the printed
certified losses when they are more than two units of the last place apart;
otherwise it is reported as undecided (the enclosures overlap at every precision up
to the ceiling), never as an equality. --lr and the optimiser's numbers are read exactly from their
text (0.1 is 1/10; "1/8" works too). At most {MAX_STEPS} steps. Adam and AdamW follow
PyTorch: beta1 = 0.9, beta2 = 0.999, eps = 1e-8 by default, eps added to the square
root of the bias-corrected second moment; AdamW's weight decay (default 0.01) is
decoupled: W (1 - lr * weight_decay) before the Adam update. --train/--freeze GLOB
choose the weights updated (names as in --stage without the stepT. prefix). --write
saves the updated example: exact when every trained weight is rational and
--decimals is not given, otherwise each weight correctly rounded to --decimals
places, which the file's first lines say.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    p = sub.add_parser("train", help="take exact optimisation steps on the example's loss",
                       description="Take exact gradient steps on the example's [loss] and "
                                   "print the certified loss of every step.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--lr", metavar="R",
                   help="learning rate, read exactly (0.1, 1e-2, \"1/8\"); must be > 0 "
                        "(required unless the example file has a [train] table)")
    p.add_argument("--steps", type=nonnegative_int, default=None, metavar="N",
                   help=f"number of steps, 1 to {MAX_STEPS} (default 1)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="sgd (default): W - lr dL/dW; adam; adamw (decoupled weight decay)")
    for name, default, what in (("beta1", "0.9", "first-moment decay"),
                                ("beta2", "0.999", "second-moment decay"),
                                ("eps", "1e-8", "added to the square root of v^")):
        p.add_argument(f"--{name}", metavar="X",
                       help=f"Adam's/AdamW's {what} (default {default}, read exactly)")
    p.add_argument("--weight-decay", metavar="X",
                   help="AdamW's decoupled weight decay (default 0.01, PyTorch's)")
    p.add_argument("--train", action="append", default=[], metavar="GLOB",
                   help="train only the weights matching GLOB (repeatable; e.g. 'layer1.*')")
    p.add_argument("--freeze", action="append", default=[], metavar="GLOB",
                   help="keep the weights matching GLOB fixed (repeatable; e.g. "
                        "embedding_table)")
    p.add_argument("--stage", action="append", metavar="GLOB",
                   help="print these stages of the run (repeatable): step1.layer1.W_1, "
                        "'step2.*', step1.loss, 'grad.step0.layer1.*'")
    p.add_argument("--write", metavar="FILE",
                   help="write the example with the trained weights (exact when all are "
                        "rational and --decimals is not given, else rounded)")
    add_convention_arguments(p)
    p.add_argument("--decimals", type=decimals, default=None, metavar="N",
                   help=f"decimals of the losses and tables (default {DEFAULT_DECIMALS}, "
                        f"at most {MAX_DECIMALS}); with --write: the weights rounded to N")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (it is shown only on a terminal anyway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer train``."""
    example = load(args)
    _defaults(args, example)
    lr = learning_rate(args.lr)
    steps = check_steps(args.steps)
    settings = options(args.optimizer, args.beta1, args.beta2, args.eps, args.weight_decay,
                       tuple(args.train), tuple(args.freeze), where="--")
    places = DEFAULT_DECIMALS if args.decimals is None else args.decimals
    if args.write is not None:  # a directory or device node is refused before any work
        output_file(args.write, "--write")
    if example.loss is None:
        raise InputError(f"{example.source}: the example has no [loss] table; add one, "
                         f"e.g. [loss] kind = \"mse\" with target = [[...]]")
    p = prepare(example, request(args, "train", work={"steps": steps}))
    progress = Progress("symformer train", total=steps + 1, quiet=args.quiet)
    losses: list[str] = []

    def each(training: Training, t: int) -> None:
        losses.append(loss_value(training, t, decimals=places))
        progress.update(f"step {t}/{steps}: loss {losses[-1]}")

    training = train(p.derivation, lr, steps, args.optimizer, each,
                     start_precision(places, None), settings)
    progress.done()
    for piece in train_lines(p, training, losses, places, args.stage):
        print(piece)
    if args.write is not None:
        write_file(args.write, _written(training, example, args.decimals), "--write")
        print(f"wrote {args.write}")
    return 0


def _defaults(args: argparse.Namespace, example) -> None:
    """Options not given on the command line from the example file's ``[train]`` table
    (the run its claims are about), else the defaults; --lr is needed from one of them."""
    source = Path(example.source)
    table = {}
    if source.suffix == ".toml" and source.is_file():
        data = read_toml(read_text_file(source, "an example .toml file"), str(source))
        if "train" in data:
            train_table(data["train"], f"{source}, train")  # its own messages first
            table = data["train"]
    for key in ("lr", "steps", "optimizer", "beta1", "beta2", "eps", "weight_decay"):
        if getattr(args, key) is None:
            setattr(args, key, table.get(key, {"steps": 1, "optimizer": "sgd"}.get(key)))
    for key in ("train", "freeze"):
        if not getattr(args, key):
            setattr(args, key, list(table.get(key, [])))
    if args.lr is None:
        raise InputError("--lr is required (or a [train] table with lr in the example file)")
    if isinstance(args.steps, bool) or not isinstance(args.steps, int):
        raise InputError(f"{source}, train: steps must be a whole number")
    if args.optimizer not in OPTIMIZERS:
        raise InputError(f"{source}, train: optimizer must be one of {', '.join(OPTIMIZERS)}")


def _written(training: Training, example, decimals: int | None) -> str:
    """The example with the trained weights: exact when every one is rational and no
    --decimals was given, else each correctly rounded, as its first lines say."""
    weights, irrational = rational_weights(training) if decimals is None else ({}, "")
    if irrational is None:
        return updated_example(example, weights)
    places = DEFAULT_DECIMALS if decimals is None else decimals
    why = f" ({irrational} is not rational)" if irrational else ""
    note = (f"symformer train: the weights after {plural(training.steps, 'step')} "
            f"({training.optimizer}, lr = "
            f"{training.lr}), each the correct rounding to {places} decimals of the exact "
            f"trained weight{why}; not the exact values.")
    return updated_example(example, rounded_weights(training, places), note)

