"""Exact optimisation steps: the weights after each step are stages of the graph.

:func:`train` builds one derivation holding every step.  Step t (0-based) is

* the weights it reads: at step 0 the example's own, as parameter stages
  (``step0.layer1.W_1``, :class:`~symformer.ops.parameter.Parameter`); at step t >= 1
  the optimiser's update of step t-1's (``step1.layer1.W_1 = step0.layer1.W_1 -
  lr * grad.step0.layer1.W_1``, :class:`~symformer.ops.sgd.SgdStep`, or Adam's
  moments and update, :mod:`symformer.ops.adam`);
* a copy of the example's forward pass and loss (``step1.layer1.ffn.hidden``,
  ``step1.loss``) whose operations read those weight stages
  (:meth:`~symformer.ops.base.Operation.staged`);
* its backward pass (``grad.step1.*``), stopped at the weight stages: their
  gradients are what the next update reads.

Every local formula is one line over the stage symbols of the step before, so
steps do not swell: step 5 costs what step 1 costs.  The weights are exact (no
longer rational after a softmax or a square root has entered them); only their
digits are certified when printed.  Trained: the weights of every operation with a
staged variant (the projections: W_Q, W_K, W_V, W_O, W_1, b_1, W_2, b_2, W_vocab;
the LayerNorms' gamma and beta, RMSNorm's gamma; the embedding tables and a learned positional
table, each whole: the rows the sentence does not read get the gradient exactly 0
and stay exactly as they were).  A tied language-model head (``[lm_head] tied =
true``) trains one table: W_vocab is the stage ``stepT.W_vocab`` = the transpose of
``stepT.embedding_table`` (:mod:`symformer.ops.transpose`), so the table's gradient
is the sum of both uses and the tie holds after every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from symformer.blocks.backward import (
    add_loss,
    backward,
    decide_relu_zeros,
    parameter_labels,
    parameter_names,
    position_labels,
)
from symformer.engine.graph import Derivation, Stage
from symformer.engine.rounding import round_ball
from symformer.errors import InputError
from symformer.example.numbers import exact_number
from symformer.lazy import sympy
from symformer.ops import (
    AdamMoment,
    AdamStep,
    Embedding,
    LearnedPositional,
    Parameter,
    ReLU,
    SgdStep,
    Transpose,
)
from symformer.ops.adam import DEFAULTS
from symformer.ops.base import named

#: The most steps ``train`` takes (each step adds a forward and a backward pass).
MAX_STEPS = 50
#: Bits a step's balls may lose (measured: about 9 for SGD on the built-in example,
#: 25 for Adam on random weights), added to the working precision per step.
BITS_PER_STEP = 32
#: The optimisers.
OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Weight:
    """A trained weight: its name (``layer1.W_1``), the stage and parameter it belongs to.

    ``tied``: the name of the weight this one is the transpose of (a tied head's
    W_vocab is the ``embedding_table`` transposed); it is not trained on its own.
    """

    name: str
    stage: str
    parameter: str
    value: sympy.Matrix
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    tied: str | None = None


@dataclass
class Training:
    """The derivation of every step, the trained weights and each step's time (s)."""

    graph: Derivation
    weights: list[Weight]
    optimizer: str
    lr: sympy.Rational
    steps: int = 0
    seconds: list[float] = field(default_factory=list)
    #: The working precision (bits) every step is evaluated at (:func:`loss_value`).
    precision: int = 256

    def loss(self, step: int) -> str:
        """The name of the loss stage of ``step`` (0: before any update)."""
        return f"step{step}.loss"

    def weight(self, step: int, weight: Weight) -> str:
        """The name of ``weight``'s stage after ``step`` updates."""
        return f"step{step}.{weight.name}"


def learning_rate(text: str) -> sympy.Rational:
    """``--lr``: an exact positive rational from its text (``0.1`` is 1/10, ``"1/8"``)."""
    value = exact_number(text, f"--lr {text[:40]!r}")
    if value <= 0:
        raise InputError(f"--lr must be positive, found {text[:40]}")
    return value


def check_steps(steps: int) -> int:
    """The number of steps, refused beyond :data:`MAX_STEPS`."""
    if not 1 <= steps <= MAX_STEPS:
        raise InputError(f"--steps must be from 1 to {MAX_STEPS}, found {steps}")
    return steps


def trained_weights(g: Derivation) -> list[Weight]:
    """The weights ``train`` updates: those of operations with a staged variant."""
    loss = add_loss(g)
    needed = g.ancestors(loss) | {loss}
    names = parameter_names(g, needed, contributions=False)
    found = []
    head = g.example.lm_head
    for stage in g:
        if stage.name in needed and stage.op.staged() is not None:
            for parameter, value in stage.op.parameters().items():
                rows, cols = _labels(g, stage, parameter, value)
                tied = "embedding_table" if head is not None and head.tied \
                    and stage.side != "decoder" and parameter == "W_vocab" else None
                found.append(Weight(names[(stage.name, parameter)].removeprefix("grad."),
                                    stage.name, parameter, value, rows, cols, tied))
    return found


def _labels(g: Derivation, stage: Stage, parameter: str, value: sympy.Matrix
            ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Row and column labels of a trained weight: a table is trained whole (every
    vocabulary entry, every position), the others as their gradient is labelled."""
    if isinstance(stage.op, Embedding):
        side = g.example.decoder if stage.side == "decoder" else g.example
        return tuple(side.vocab), stage.cols
    if isinstance(stage.op, LearnedPositional):
        return position_labels(range(value.rows)), stage.cols
    return parameter_labels(g, stage, parameter, value)


def train(g: Derivation, lr: sympy.Rational, steps: int, optimizer: str = "sgd",
          each: Callable[[Training, int], None] | None = None,
          precision: int = 128) -> Training:
    """Take ``steps`` exact optimisation steps from the derivation ``g`` (see the module).

    ``each(training, t)`` is called once step t's loss stage exists (t = 0 .. steps),
    and is timed with it: ``training.seconds[t]`` is step t-1's backward pass, step
    t's update, forward pass and loss, and what ``each`` does (evaluating the loss).
    Every step is evaluated at one working precision, ``precision`` bits plus
    :data:`BITS_PER_STEP` per step, so that no step re-evaluates the steps before it
    at a higher precision (a ball widens with every step).
    """
    check_steps(steps)
    if optimizer not in OPTIMIZERS:
        raise InputError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"found {optimizer!r}")
    weights = trained_weights(g)
    loss = add_loss(g)
    forward = [s for s in g if s.name in g.ancestors(loss) | {loss}]
    by_stage: dict[str, list[Weight]] = {}
    for w in weights:
        by_stage.setdefault(w.stage, []).append(w)
    training = Training(Derivation(g.example, g.causal), weights, optimizer, lr,
                        precision=precision + BITS_PER_STEP * steps)
    t_graph = training.graph
    for t in range(steps + 1):
        start = time.perf_counter()
        if t > 0:  # the step before's backward pass, stopped at its weight stages
            backward(t_graph, training.loss(t - 1), parameters=False, relu_zeros=False,
                     stop=frozenset(training.weight(t - 1, w) for w in weights
                                    if w.tied is None))
        for w in weights:
            _add_weight(training, w, t)
        for s in forward:
            _copy(t_graph, s, t, by_stage.get(s.name, []))
        decide_relu_zeros(t_graph, [f"step{t}.{s.name}" for s in forward
                                    if isinstance(s.op, ReLU)], training.precision)
        training.steps = t
        if each is not None:
            each(training, t)
        training.seconds.append(time.perf_counter() - start)
    return training


def _copy(g: Derivation, s: Stage, t: int, weights: list[Weight]) -> None:
    """Step t's copy of the forward stage ``s``, reading step t's weight stages."""
    inputs = [f"step{t}.{i}" for i in s.inputs]
    op = s.op
    if weights:
        op = s.op.staged()
        inputs += [f"step{t}.{w.name}" for w in weights]
    g.add(f"step{t}.{s.name}", s.kind, op, inputs, s.rows, s.cols,
          layer=s.layer, head=s.head, side=s.side)


def _add_weight(training: Training, w: Weight, t: int) -> None:
    """``w``'s stage at step t: the example's value (t = 0) or the optimiser's update."""
    g, name = training.graph, training.weight(t, w)
    notation = named(w.parameter.split(".")[-1], f"{w.name} after {t} steps")
    where = {"rows": w.rows, "cols": w.cols}
    if w.tied is not None:  # the tied table's transpose, read from step t's table
        g.add(name, "parameter", Transpose(notation), (f"step{t}.{w.tied}",), **where)
        return
    if t == 0:
        g.add(name, "parameter", Parameter(w.value, notation), (), **where)
        return
    previous = training.weight(t - 1, w)
    grad = f"grad.{previous}"
    if grad not in g:  # the loss does not depend on it: its gradient is 0
        g.add(name, "parameter", SgdStep(sympy.S.Zero, notation), (previous, previous),
              **where)
        return
    if training.optimizer == "sgd":
        g.add(name, "parameter", SgdStep(training.lr, notation), (previous, grad), **where)
        return
    beta1, beta2, eps = (exact_number(DEFAULTS[k], f"Adam's {k}")
                         for k in ("beta1", "beta2", "eps"))
    moments = []
    for label, beta, power in (("adam_m", beta1, 1), ("adam_v", beta2, 2)):
        moment = f"step{t}.{label}.{w.name}"
        before = f"step{t - 1}.{label}.{w.name}"
        sources = (before, grad) if t > 1 else (grad,)
        g.add(moment, "optimizer_state", AdamMoment(beta, power), sources, **where)
        moments.append(moment)
    g.add(name, "parameter", AdamStep(training.lr, t, beta1, beta2, eps, notation),
          (previous, *moments), **where)


#: The highest precision (bits) at which two losses are compared before the exact
#: comparison of their rational values is tried.
COMPARE_PRECISION = 4096


def loss_value(training: Training, t: int, *, decimals: int | None = None,
               significant: int | None = None) -> str:
    """Step t's loss, certified, at the working precision (the engine's escalating
    rounding, with its exact proofs, when that does not decide it)."""
    name = training.loss(t)
    ball = training.graph.evaluate(training.precision)[name][0][0]
    rounded = round_ball(ball, decimals=decimals, significant=significant)
    if rounded is None:
        return training.graph[name].values(decimals=decimals, significant=significant)[0][0]
    return rounded.fixed() if decimals is not None else rounded.significant()


def change(training: Training, t: int) -> int | None:
    """The sign of loss(t) - loss(t - 1), certified: -1 (it decreased), 0 (equal,
    proved exactly), 1 (it increased), or None (undecided: equal to
    :data:`COMPARE_PRECISION` bits and not both rational)."""
    g = training.graph
    before, after = training.loss(t - 1), training.loss(t)
    prec = training.precision
    while prec <= max(COMPARE_PRECISION, training.precision):
        values = g.evaluate(prec)
        difference = values[after][0][0] - values[before][0][0]
        if difference > 0 or difference < 0:
            return 1 if difference > 0 else -1
        prec *= 4
    a, b = g.exact_rational(after, 0, 0), g.exact_rational(before, 0, 0)
    if a is None or b is None:
        return None
    return (a > b) - (a < b)


def rational_weights(training: Training) -> tuple[dict[str, sympy.Matrix], str | None]:
    """The final weights as exact rationals, or the name of the first entry that is
    not rational (by the exact forward pass, :mod:`symformer.engine.exact`); a tied
    W_vocab is not listed (it is the embedding table's transpose)."""
    g, found = training.graph, {}
    for w in (w for w in training.weights if w.tied is None):
        name = training.weight(training.steps, w)
        rows, cols = g[name].shape
        values = []
        for i in range(rows):
            for j in range(cols):
                value = g.exact_rational(name, i, j)
                if value is None:
                    return {}, f"{name}[{i},{j}]"
                values.append(sympy.Rational(value.numerator, value.denominator))
        found[w.name] = sympy.Matrix(rows, cols, values)
    return found, None
