"""``symformer train``: exact optimisation steps, the certified loss of every step."""

from __future__ import annotations

import argparse

from symformer.blocks.train import (
    MAX_STEPS,
    OPTIMIZERS,
    Training,
    change,
    check_steps,
    learning_rate,
    loss_value,
    rational_weights,
    train,
)
from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    check_work,
    derivation,
    load,
    nonnegative_int,
)
from symformer.display import Progress
from symformer.engine.rounding import start_precision
from symformer.errors import InputError
from symformer.example.write import updated_example
from symformer.files import write_file

ORDER = 16

EPILOG = f"""\
examples:
  symformer train --lr 0.1 --steps 5                # five exact gradient-descent steps
  symformer train --lr 0.01 --steps 3 --optimizer adam
  symformer train my_example.toml --lr 1/8 --steps 1 --write trained.toml

Each step's weights are exact: after step 1 they are no longer rational (softmax,
square roots), so they are stages of the graph (step1.layer1.W_1 = step0.layer1.W_1 -
lr * grad.step0.layer1.W_1) that the next step reads by name. The loss of every
step is printed with certified digits; a step where the loss does not decrease is
reported (an undecidable comparison is said to be one). --lr is read exactly from
its text (0.1 is 1/10; "1/8" works too). At most {MAX_STEPS} steps. Adam uses
beta1 = 0.9, beta2 = 0.999, eps = 1e-8, read exactly. Trained: the projections'
weights and biases, the LayerNorms' gamma and beta, the embedding tables and a
learned positional table (rows not read get gradient 0 and stay as they were); a
tied head (tied = true) trains the one table, its gradient the sum of both uses.
--write saves the updated example (encoder, decoder, tables) only when every
trained weight is still rational.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    p = sub.add_parser("train", help="take exact optimisation steps on the example's loss",
                       description="Take exact gradient steps on the example's [loss] and "
                                   "print the certified loss of every step.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--lr", required=True, metavar="R",
                   help="learning rate, read exactly (0.1, 1e-2, \"1/8\"); must be > 0")
    p.add_argument("--steps", type=nonnegative_int, default=1, metavar="N",
                   help=f"number of steps, 1 to {MAX_STEPS} (default 1)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                   help="sgd (default): W - lr dL/dW; adam: Adam with the usual defaults")
    p.add_argument("--write", metavar="FILE",
                   help="write the example with the trained weights (only when every "
                        "one is rational)")
    add_convention_arguments(p)
    add_decimals_argument(p, "the losses")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (it is shown only on a terminal anyway)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer train``."""
    lr = learning_rate(args.lr)
    steps = check_steps(args.steps)
    example = load(args)
    if example.loss is None:
        raise InputError(f"{example.source}: the example has no [loss] table; add one, "
                         f"e.g. [loss] kind = \"mse\" with target = [[...]]")
    check_work(args, example, "train", steps=steps)
    progress = Progress("symformer train", total=steps + 1, quiet=args.quiet)
    losses: list[str] = []

    def each(training: Training, t: int) -> None:
        losses.append(loss_value(training, t, decimals=args.decimals))
        progress.update(f"step {t}/{steps}: loss {losses[-1]}")

    training = train(derivation(args, example), lr, steps, args.optimizer, each,
                     start_precision(args.decimals, None))
    progress.done()
    note = " (causal mask)" if training.graph.causal else ""
    rate = f"lr = {lr}" + (" (adam)" if args.optimizer == "adam" else " (sgd)")
    print(f"{example.title}{note}: {steps} step{'s' if steps > 1 else ''}, {rate}, "
          f"{example.loss.kind} loss")
    width = len(str(steps))
    for t, text in enumerate(losses):
        print(f"step {t:>{width}}  loss {text}")
    print(_report(training, steps))
    if args.write:
        weights, irrational = rational_weights(training)
        if irrational is not None:
            raise InputError(f"--write: not written: {irrational} is not rational (only "
                             f"an example whose every trained weight is rational can be "
                             f"saved)")
        write_file(args.write, updated_example(example, weights))
        print(f"wrote {args.write}")
    return 0


def _report(training: Training, steps: int) -> str:
    """Which steps did not decrease the loss (certified), or that every one did."""
    notes = []
    for t in range(1, steps + 1):
        sign = change(training, t)
        if sign is None:
            notes.append(f"step {t}: undecided whether the loss decreased (it equals "
                         f"step {t - 1}'s to 4096 bits)")
        elif sign == 0:
            notes.append(f"step {t}: the loss does not decrease (exactly equal)")
        elif sign > 0:
            notes.append(f"step {t}: the loss does not decrease (it increases)")
    return "\n".join(notes) if notes else "the loss decreases at every step (certified)"
