"""Exact optimisation steps: the weights after each step are stages of the graph.

:func:`train` builds one derivation holding every step.  Step t (0-based) is

* the weights it reads: at step 0 the example's own, as parameter stages
  (``step0.layer1.W_1``, :class:`~symformer.ops.parameter.Parameter`); at step t >= 1
  the optimiser's update of step t-1's (``step1.layer1.W_1 = step0.layer1.W_1 -
  lr * grad.step0.layer1.W_1``, :class:`~symformer.ops.sgd.SgdStep`, or Adam's
  moments and update, :mod:`symformer.ops.adam`, AdamW's with its decoupled weight
  decay; a frozen weight (:class:`OptimizerSettings` ``train``/``freeze``) is kept as it is);
* a copy of the example's forward pass and loss (``step1.layer1.ffn.hidden``,
  ``step1.loss``) whose operations read those weight stages
  (:meth:`~symformer.ops.base.Operation.staged`);
* its backward pass (``grad.step1.*``), stopped at the weight stages: their
  gradients are what the next update reads.

Every local formula is one line over the stage symbols of the step before, so
steps do not swell: step 5 costs what step 1 costs.  The weights are exact (no
longer rational after a softmax or a square root has entered them); only their
digits are certified when printed.  Trained: the weights of every operation that can
read them from stages (the projections: W_Q, W_K, W_V, W_O, W_1, b_1, W_2, b_2, W_vocab;
the LayerNorms' gamma and beta, RMSNorm's gamma; the embedding tables and a learned positional
table, each whole: the rows the sentence does not read get the gradient exactly 0
and stay exactly as they were).  A tied language-model head (``[lm_head] tied =
true``) trains one table: W_vocab is the stage ``stepT.W_vocab`` = the transpose of
``stepT.embedding_table`` (:mod:`symformer.ops.transpose`), so the table's gradient
is the sum of both uses and the tie holds after every step.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from symformer.blocks.backward import (
    add_loss,
    backward,
    decide_relu_zeros,
    is_backward_stage,
    parameter_labels,
    parameter_names,
    position_labels,
)
from symformer.blocks.side_stages import is_side_stage
from symformer.engine.graph import Derivation, Stage
from symformer.engine.rounding import round_ball
from symformer.errors import InputError
from symformer.example.literals import exact_number
from symformer.lazy import sympy
from symformer.notation_types import Notation, named
from symformer.ops import (
    AdamMoment,
    AdamStep,
    Parameter,
    SgdStep,
    Transpose,
)
from symformer.ops.adam import DEFAULTS

#: The most steps ``train`` takes (each step adds a forward and a backward pass).
MAX_STEPS = 50
#: Bits a step's balls may lose (measured: about 9 for SGD on the built-in example,
#: 25 for Adam on random weights), added to the working precision per step.
BITS_PER_STEP = 32
#: The optimisers.
OPTIMIZERS = ("sgd", "adam", "adamw")
#: The keys of a ``[train]`` table (a claims file's, or an example file's).
TRAIN_KEYS = ("lr", "steps", "optimizer", "beta1", "beta2", "eps", "weight_decay",
              "train", "freeze")
#: A stage of a training run: a step's weight, forward stage or loss, or its gradient.
_STEP = re.compile(r"(?:grad\.)?step[0-9]+\.")


def step_of(name: str) -> int:
    """The step a training run's stage belongs to (``step2.loss``: 2; gradients of step t
    are built with step t + 1)."""
    match = _STEP.match(name)
    step = int(match.group(0).removeprefix("grad.")[4:-1])
    return step + 1 if name.startswith("grad.") else step


def is_training_stage(name: str) -> bool:
    """Is ``name`` a stage of a training run (``step1.layer1.W_1``, ``step2.loss``,
    ``grad.step0.output``, ``step1.adam_m.layer1.W_1``)?"""
    return _STEP.match(name) is not None


@dataclass(frozen=True)
class OptimizerSettings:
    """What ``train`` does besides lr and steps (PyTorch's conventions and defaults).

    ``beta1``, ``beta2``, ``eps``: Adam's and AdamW's; ``weight_decay``: AdamW's
    decoupled decay (W (1 - lr wd) before the Adam update); ``train``/``freeze``: glob
    patterns over the weight names (``layer1.head1.W_Q``, ``embedding_table``): only
    the weights matching ``train`` (all when empty) and not ``freeze`` are updated.
    """

    beta1: sympy.Rational
    beta2: sympy.Rational
    eps: sympy.Rational
    weight_decay: sympy.Rational
    train: tuple[str, ...] = ()
    freeze: tuple[str, ...] = ()


def options(optimizer: str = "sgd", beta1: object = None, beta2: object = None,
            eps: object = None, weight_decay: object = None, train: tuple[str, ...] = (),
            freeze: tuple[str, ...] = (), where: str = "") -> OptimizerSettings:
    """Read the optimiser's numbers exactly (text, TOML numbers) and check them:
    0 <= beta < 1, eps > 0, weight_decay >= 0 and only for AdamW (``where`` prefixes
    the names in messages: ``--`` for options, ``file.toml, train: `` for a table)."""
    if optimizer not in OPTIMIZERS:
        raise InputError(f"{where}optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"found {str(optimizer)[:40]!r}")
    given = {"beta1": beta1, "beta2": beta2, "eps": eps, "weight_decay": weight_decay}
    if optimizer == "sgd":
        named = [k for k, v in given.items() if v is not None]
        if named:
            raise InputError(f"{where}{named[0].replace('_', '-') if where == '--' else named[0]}"
                             f" applies to adam and adamw, not sgd")
    if optimizer == "adam" and weight_decay is not None:
        raise InputError(f"{where}{'weight-decay' if where == '--' else 'weight_decay'} is "
                         f"AdamW's decoupled decay: use optimizer adamw")
    values = {}
    for key, value in given.items():
        text = DEFAULTS[key] if value is None else value
        label = f"{where}{key.replace('_', '-') if where == '--' else key}"
        values[key] = exact_number(text, f"{label} {str(text)[:40]!r}")
    for key in ("beta1", "beta2"):
        if not 0 <= values[key] < 1:
            raise InputError(f"{where}{key} must be from 0 to below 1, found {values[key]}")
    if values["eps"] <= 0:
        raise InputError(f"{where}eps must be positive, found {values['eps']}")
    if values["weight_decay"] < 0:
        raise InputError(f"{where}weight decay must be 0 or more, found "
                         f"{values['weight_decay']}")
    decay = values["weight_decay"] if optimizer == "adamw" else sympy.S.Zero
    return OptimizerSettings(values["beta1"], values["beta2"], values["eps"], decay, tuple(train),
                   tuple(freeze))


@dataclass(frozen=True)
class Run:
    """A training run's settings: lr, steps, optimiser and its :class:`OptimizerSettings`."""

    lr: sympy.Rational
    steps: int
    optimizer: str
    options: OptimizerSettings


def train_table(table: object, where: str) -> Run:
    """A ``[train]`` table (``lr``, ``steps``, ``optimizer``, ``beta1``, ``beta2``, ``eps``,
    ``weight_decay``, ``train``, ``freeze``): the run a claim on a step's stage means."""
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table")
    unknown = sorted(set(table) - set(TRAIN_KEYS))
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (known keys: "
                         f"{', '.join(TRAIN_KEYS)})")
    if "lr" not in table:
        raise InputError(f"{where}: missing key 'lr' (the learning rate)")
    steps = table.get("steps", 1)
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise InputError(f"{where}: steps must be a whole number, found {steps!r}"[:200])
    for key in ("train", "freeze"):
        found = table.get(key, [])
        if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
            raise InputError(f"{where}: {key} must be a list of glob patterns over weight "
                             f"names, e.g. [\"layer1.*\"]")
    optimizer = table.get("optimizer", "sgd")
    prefix = f"{where}: "
    try:
        lr = learning_rate(table["lr"])
        steps = check_steps(steps)
    except InputError as exc:
        raise InputError(f"{prefix}{exc}") from None
    return Run(lr, steps, optimizer, options(
        optimizer, *(table.get(k) for k in ("beta1", "beta2", "eps", "weight_decay")),
        tuple(table.get("train", [])), tuple(table.get("freeze", [])), prefix))


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
    #: The optimiser's numbers and which weights train.
    options: OptimizerSettings | None = None
    #: The names of the weights that do not train (``--freeze``, ``--train``).
    frozen: frozenset[str] = frozenset()

    def loss(self, step: int) -> str:
        """The name of the loss stage of ``step`` (0: before any update)."""
        return f"step{step}.loss"

    def weight(self, step: int, weight: Weight) -> str:
        """The name of ``weight``'s stage after ``step`` updates."""
        return f"step{step}.{weight.name}"


def learning_rate(text: object) -> sympy.Rational:
    """``--lr``: an exact positive rational from its text (``0.1`` is 1/10, ``"1/8"``)."""
    value = exact_number(text, f"--lr {str(text)[:40]!r}")
    if value <= 0:
        raise InputError(f"--lr must be positive, found {str(text)[:40]}")
    return value


def check_steps(steps: int) -> int:
    """The number of steps, refused beyond :data:`MAX_STEPS`."""
    if not 1 <= steps <= MAX_STEPS:
        raise InputError(f"--steps must be from 1 to {MAX_STEPS}, found {steps}")
    return steps


def trained_weights(g: Derivation) -> list[Weight]:
    """The weights ``train`` updates: those of operations that can read them from stages
    (:meth:`~symformer.ops.base.Operation.staged`)."""
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
    if stage.op.lookup == "tokens":
        side = g.example.decoder if stage.side == "decoder" else g.example
        return tuple(getattr(side, "table_vocab", side.vocab)), stage.cols
    if stage.op.lookup == "positions":
        return position_labels(range(value.rows)), stage.cols
    return parameter_labels(g, stage, parameter, value)


def train(g: Derivation, lr: sympy.Rational, steps: int, optimizer: str = "sgd",
          each: Callable[[Training, int], None] | None = None,
          precision: int = 128, settings: OptimizerSettings | None = None) -> Training:
    """Take ``steps`` exact optimisation steps from the derivation ``g`` (see the module).

    ``each(training, t)`` is called once step t's loss stage exists (t = 0 .. steps),
    and is timed with it: ``training.seconds[t]`` is step t-1's backward pass, step
    t's update, forward pass and loss, and what ``each`` does (evaluating the loss).
    Every step is evaluated at one working precision, ``precision`` bits plus
    :data:`BITS_PER_STEP` per step, so that no step re-evaluates the steps before it
    at a higher precision (a ball widens with every step).
    """
    check_steps(steps)
    settings = settings if settings is not None else options(optimizer, where="--")
    if optimizer not in OPTIMIZERS:
        raise InputError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, "
                         f"found {optimizer!r}")
    weights = trained_weights(g)
    if not weights:  # given inputs or Q, K, V alone: nothing for a step to change
        raise InputError(f"{g.example.source}: the example has no weights to train (its "
                         f"matrices are given as they are); `symformer backward` gives "
                         f"their gradients")
    loss = add_loss(g)
    # every forward stage, so that a step's next token or lesson stage can be claimed
    # (not the side stages claims added on demand: a step adds its own when asked)
    forward = [s for s in g if not is_side_stage(g, s.name) and (
        not is_backward_stage(s.name) or s.name in g.ancestors(loss) | {loss})]
    by_stage: dict[str, list[Weight]] = {}
    for w in weights:
        by_stage.setdefault(w.stage, []).append(w)
    training = Training(Derivation(g.example, g.causal), weights, optimizer, lr,
                        precision=precision + BITS_PER_STEP * steps, options=settings,
                        frozen=frozen_weights(weights, settings))
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
                                    if s.op.kinked], training.precision)
        training.steps = t
        if each is not None:
            each(training, t)
        training.seconds.append(time.perf_counter() - start)
    return training


def frozen_weights(weights: list[Weight], settings: OptimizerSettings) -> frozenset[str]:
    """The weights ``settings`` keeps fixed: those not matching a ``train`` pattern (when
    any is given) and those matching a ``freeze`` pattern.  A pattern matching no
    weight is an error naming the weights (a tied W_vocab follows its table)."""
    names = [w.name for w in weights if w.tied is None]
    for kind, patterns in (("train", settings.train), ("freeze", settings.freeze)):
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
                raise InputError(f"--{kind} {pattern[:60]!r} matches no weight; the weights: "
                                 + ", ".join(names))
    return frozenset(
        n for n in names
        if (settings.train and not any(fnmatch.fnmatchcase(n, p) for p in settings.train))
        or any(fnmatch.fnmatchcase(n, p) for p in settings.freeze))


def _copy(g: Derivation, s: Stage, t: int, weights: list[Weight]) -> None:
    """Step t's copy of the forward stage ``s``, reading step t's weight stages."""
    inputs = [f"step{t}.{i}" for i in s.inputs]
    op = s.op.for_graph(g, lambda name: f"step{t}.{name}")
    if weights:  # the staged form in step t's graph (a given-gradient objective: step t's)
        op = s.op.staged().for_graph(g, lambda name: f"step{t}.{name}")
        inputs += [f"step{t}.{w.name}" for w in weights]
    g.add(f"step{t}.{s.name}", s.kind, op, inputs, s.rows, s.cols,
          layer=s.layer, head=s.head, side=s.side)


def _add_weight(training: Training, w: Weight, t: int) -> None:
    """``w``'s stage at step t: the example's value (t = 0) or the optimiser's update."""
    g, name = training.graph, training.weight(t, w)
    notation = named(w.parameter.split(".")[-1], f"{w.name} after {t} step{'' if t == 1 else 's'}")
    where = {"rows": w.rows, "cols": w.cols}
    if w.tied is not None:  # the tied table's transpose, read from step t's table
        g.add(name, "parameter", Transpose(notation, is_weight=True), (f"step{t}.{w.tied}",),
              **where)
        return
    if t == 0:
        g.add(name, "parameter", Parameter(w.value, notation, is_weight=True), (), **where)
        return
    previous = training.weight(t - 1, w)
    grad = f"grad.{previous}"
    if grad not in g or w.name in training.frozen:  # no gradient (0), or frozen: kept
        g.add(name, "parameter", SgdStep(sympy.S.Zero, notation), (previous, previous),
              **where)
        return
    if training.optimizer == "sgd":
        g.add(name, "parameter", SgdStep(training.lr, notation), (previous, grad), **where)
        return
    settings = training.options
    beta1, beta2, eps = settings.beta1, settings.beta2, settings.eps
    moments = []
    for label, beta, power in (("adam_m", beta1, 1), ("adam_v", beta2, 2)):
        moment = f"step{t}.{label}.{w.name}"
        before = f"step{t - 1}.{label}.{w.name}"
        sources = (before, grad) if t > 1 else (grad,)
        second = Notation("v", "v", "Adam second-moment estimate") if power == 2 else None
        g.add(moment, "optimizer_state", AdamMoment(beta, power, second), sources, **where)
        moments.append(moment)
    g.add(name, "parameter", AdamStep(training.lr, t, beta1, beta2, eps, notation,
                                      settings.weight_decay), (previous, *moments), **where)


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
    proved exactly), 1 (it increased), or None (undecided: their enclosures overlap at
    every precision up to :data:`COMPARE_PRECISION` bits and they are not both
    rational; nothing is then known about their order)."""
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


def rounded_weights(training: Training, decimals: int) -> dict[str, list[list[str]]]:
    """The final weights, each entry its certified correct rounding to ``decimals``
    places (decimal text); a tied W_vocab is not listed (the table's transpose)."""
    g = training.graph
    return {w.name: g[training.weight(training.steps, w)].values(decimals=decimals)
            for w in training.weights if w.tied is None}
