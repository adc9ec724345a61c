"""``symformer train``: exact optimisation steps, the certified loss of every step."""

from __future__ import annotations

import argparse
from fractions import Fraction

from symformer.blocks.train import (
    COMPARE_PRECISION,
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
    conventions_note,
    derivation,
    load,
    nonnegative_int,
    plural,
)
from symformer.display import Progress
from symformer.engine.rounding import start_precision
from symformer.errors import InputError
from symformer.example.write import updated_example
from symformer.files import output_file, write_file

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
reported. A comparison the balls leave open is decided from the printed certified
losses when they are more than two units of the last place apart; otherwise it is
reported as undecided (the enclosures overlap at every precision up to the ceiling),
never as an equality. --lr is read exactly from
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
    if args.write:  # a directory or device node is refused before any work
        output_file(args.write, "--write")
    example = load(args)
    if example.loss is None:
        raise InputError(f"{example.source}: the example has no [loss] table; add one, "
                         f"e.g. [loss] kind = \"mse\" with target = [[...]]")
    check_work(args, example, "backward", passes=4 * (steps + 1))
    progress = Progress("symformer train", total=steps + 1, quiet=args.quiet)
    losses: list[str] = []

    def each(training: Training, t: int) -> None:
        losses.append(loss_value(training, t, decimals=args.decimals))
        progress.update(f"step {t}/{steps}: loss {losses[-1]}")

    training = train(derivation(args, example), lr, steps, args.optimizer, each,
                     start_precision(args.decimals, None))
    progress.done()
    note = (" (causal mask)" if training.graph.causal else "") + conventions_note(args,
                                                                                   example)
    rate = f"lr = {lr}" + (" (adam)" if args.optimizer == "adam" else " (sgd)")
    print(f"{example.title}{note}: {plural(steps, 'step')}, {rate}, "
          f"{example.loss.kind} loss")
    width = len(str(steps))
    for t, text in enumerate(losses):
        print(f"step {t:>{width}}  loss {text}")
    print(_report(training, steps, losses, args.decimals))
    if args.write:
        weights, irrational = rational_weights(training)
        if irrational is not None:
            raise InputError(f"--write: not written: {irrational} is not rational (only "
                             f"an example whose every trained weight is rational can be "
                             f"saved)")
        write_file(args.write, updated_example(example, weights), "--write")
        print(f"wrote {args.write}")
    return 0


def _report(training: Training, steps: int, losses: list[str], decimals: int) -> str:
    """Which steps did not decrease the loss (certified), or that every one did.

    ``losses`` are the printed losses, each the exact loss rounded to ``decimals``
    places (certified): when :func:`~symformer.blocks.train.change` cannot decide a
    step, two printed losses further apart than their roundings allow still do.
    """
    notes = []
    for t in range(1, steps + 1):
        sign = change(training, t)
        via = ""
        if sign is None:
            sign = printed_order(losses[t - 1], losses[t], decimals)
            via = "; decided from the certified losses printed above"
        if sign is None:
            notes.append(f"step {t}: could not decide whether the loss decreased: the "
                         f"enclosures of the two losses overlap at every precision up to "
                         f"{max(COMPARE_PRECISION, training.precision)} bits, the "
                         f"ceiling, and they are not both rational")
        elif sign == 0:
            notes.append(f"step {t}: the loss does not decrease (exactly equal)")
        elif sign > 0:
            notes.append(f"step {t}: the loss does not decrease (it increases{via})")
    return "\n".join(notes) if notes else "the loss decreases at every step (certified)"


def printed_order(before: str, after: str, decimals: int) -> int | None:
    """The sign of after - before (1 or -1) when two certified roundings to
    ``decimals`` places are more than two units of the last place apart (each lies
    within half a unit of its exact value), else None.  A text that is not a plain
    number (an undecided range) decides nothing."""
    try:
        a, b = Fraction(before), Fraction(after)
    except ValueError:
        return None
    if abs(b - a) <= Fraction(2, 10 ** decimals):
        return None
    return 1 if b > a else -1
