"""The backward pass: the loss and every gradient, as stages of the same derivation.

:func:`backward` appends to a derivation

* ``loss`` (1 x 1): the example's ``[loss]`` (:mod:`symformer.example.loss`), on the
  encoder ``output`` (mse) or the last ``probabilities`` stage (cross-entropy), with
  PyTorch's reductions and positions without a target, or a gradient given at a named
  stage (``kind = "upstream"``: the backward pass starts there);
* ``grad.loss`` = 1, then, latest stage first, ``grad.S`` = dL/dS for every stage S
  the loss depends on (same shape and labels as S): the sum of the backward rules of
  S's consumers (:class:`~symformer.ops.gradient.Gradient`), so every gradient stage
  has a short local formula and the backward graph is as large as autograd's;
* for every parameter of those stages (``op.parameters()``), ``grad.P`` with P named
  after the stage's block and the parameter: ``grad.layer1.head1.W_Q``,
  ``grad.layer1.W_O``, ``grad.layer1.W_1``, ``grad.layer1.b_1``,
  ``grad.layer1.add_norm1.gamma``, ``grad.embedding_table`` (only the rows of the
  tokens used), ``grad.positional_embeddings`` (a learned table: only the rows of
  the positions, ``pos0`` ...), ``grad.decoder.layer1.self.W_O``, ``grad.W_vocab``;
  a tied head's table gets the total of both uses over every vocabulary row
  (``grad.embedding_table``) and each use (``.lookup``, ``.head``):
  :func:`tied_table_stages`.

Exactness: ReLU's derivative at exactly h = 0 is the subgradient 0 (decided by the
certified sign of h, or a proof that h = 0); a score masked with -inf is a constant,
its gradient is exactly 0 (the mask set decides, not a number).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

from symformer.blocks.head import head_loss_source
from symformer.blocks.requested_stages import add_per_position_loss, not_asked
from symformer.blocks.side_stages import add_side_stage, unknown_message
from symformer.engine.graph import Derivation, Stage, unknown_stage_message
from symformer.errors import InputError
from symformer.notation import parameter_symbol, position_label
from symformer.notation import symbol as stage_symbol
from symformer.notation_types import Notation
from symformer.ops import (
    CrossEntropy,
    MeanSquaredError,
    Operation,
    TableSum,
    Transpose,
    UpstreamGradient,
)
from symformer.ops.binary_cross_entropy import BinaryCrossEntropy
from symformer.ops.gradient import Gradient, Seed, Term
from symformer.words import in_sentence

#: Name components of sub-layer groups, left out of a parameter's name.
_GROUPS = ("attention", "ffn")


def add_loss(g: Derivation) -> str:
    """Append the ``loss`` stage of the example's ``[loss]`` table; returns its name."""
    if "loss" in g:  # the example's own (an optimiser lesson's objective), or added
        return "loss"
    loss = g.example.loss
    if loss is None:
        example = g.example
        if example.lm_head is not None:  # a language model: its next tokens, say
            nexts = ", ".join(f'"{t}"' for t in (*example.tokens[1:], example.tokens[0]))
            hint = (f'[loss] kind = "cross_entropy" with targets = [{nexts}] (one target '
                    f'token per position; these are the next tokens)')
        else:
            hint = ('[loss] kind = "mse" with target = [[...]] (the shape of the output), '
                    'or kind = "cross_entropy" with targets = [...] with an [lm_head] or a '
                    '[decoder]')
        raise InputError(f"{example.source}: the example has no [loss] table; add one, "
                         f"e.g. {hint}")
    if "loss" in g:
        return "loss"
    if loss.kind == "upstream":
        source = loss.stage
        if source not in g or is_backward_stage(source):
            raise InputError(f"{loss.where}: stage = {source!r}: "
                             + unknown_stage_message(source, [s.name for s in g]))
        shape = (loss.gradient.rows, loss.gradient.cols)
        if g[source].shape != shape:
            raise InputError(f"{loss.where}: gradient is {shape[0]}x{shape[1]} but {source} "
                             f"is {g[source].shape[0]}x{g[source].shape[1]}")
        op: Operation = UpstreamGradient(loss.gradient)
    elif loss.kind == "mse":
        op = MeanSquaredError(loss.target, positions=loss.positions,
                              reduction=loss.reduction)
        source = head_loss_source(g, loss.kind) or "output"
    elif loss.kind == "bce":  # the sigmoid head's probabilities (checked at load)
        op = BinaryCrossEntropy(loss.target, reduction=loss.reduction)
        source = head_loss_source(g, loss.kind)
    else:
        found = [s for s in g if s.op.rows_sum_to_one and s.op.columns == "vocab"]
        if not found:
            raise InputError(f"{loss.where}: kind = \"cross_entropy\" needs a probabilities "
                             f"stage (a [decoder] with W_vocab, or an [lm_head])")
        source = found[-1].name
        op = CrossEntropy(loss.target_ids(g[source].cols, g[source].shape[0]),
                          reduction=loss.reduction)
    g.add("loss", "loss", op, (source,), ("loss",), ("L",), side=g[source].side)
    add_per_position_loss(g, "loss")  # [stages] per_position_loss = true
    return "loss"


def decide_relu_zeros(g: Derivation, relus: list[str], prec: int | None = None) -> None:
    """The ReLU stages' inputs that are exactly 0 get the subgradient 0 by proof.

    A ball around an exact 0 never separates from it, so ReLU's ball step would stay
    [0, 1] at every precision and no gradient through it would ever be certified.
    Entries whose ball at ``prec`` bits contains 0 have their sign decided exactly
    (:meth:`~symformer.engine.graph.Derivation.sign`: higher precision, the exact
    forward pass, a proof); the exact zeros are given to the ReLU operation.
    ``prec`` defaults to :meth:`~symformer.engine.certify.Certification.backward_precision`
    (the evaluation that printing the stages then reuses).
    """
    prec = prec or g.certification.backward_precision()
    for stage in (g[name] for name in relus):
        h = stage.inputs[0]
        balls = g.evaluate(prec)[h]
        zeros = frozenset((i, j) for i, row in enumerate(balls) for j, b in enumerate(row)
                          if not (b > 0 or b < 0) and g.sign(h, i, j) == 0)
        if zeros:
            stage.op = replace(stage.op, zeros=stage.op.zeros | zeros)


def backward(g: Derivation, loss: str | None = None, stop: frozenset[str] = frozenset(),
             parameters: bool = True, relu_zeros: bool = True) -> Derivation:
    """Append the loss and every gradient stage to ``g`` (see the module); returns ``g``.

    ``loss`` names an existing loss stage (default: the example's, added as ``loss``);
    its gradients are named ``grad.<stage>``.  The stages in ``stop`` are leaves: they
    get a gradient, but what they read does not (a training step's weights, computed
    from the step before).  ``parameters=False`` leaves out the gradients of the
    operations' constant weights (``grad.layer1.W_1``).  ``relu_zeros=False``: the
    caller has decided the ReLU inputs that are exactly 0 (:func:`decide_relu_zeros`).
    """
    if loss is None:
        if "grad.loss" in g:
            return g
        loss = add_loss(g)
    needed = _needed(g, loss, stop)
    consumers: dict[str, list[tuple[Stage, int]]] = {name: [] for name in needed}
    for stage in g:
        if stage.name in needed and stage.name not in stop:
            for k, source in enumerate(stage.inputs):
                consumers[source].append((stage, k))
    if relu_zeros:
        decide_relu_zeros(g, [name for name in needed if g[name].op.kinked])
    g.add(f"grad.{loss}", "gradient", Seed(), (), ("loss",), ("L",))
    names = parameter_names(g, needed) if parameters else {}
    for name in reversed([s.name for s in g if s.name in needed and s.name != loss]):
        stage = g[name]
        terms, inputs = [], []
        for consumer, k in consumers[name]:
            terms.append(Term(consumer.op, k, len(consumer.inputs)))
            inputs += [*consumer.inputs, consumer.name, f"grad.{consumer.name}"]
        grad = g.add(f"grad.{name}", "gradient", Gradient(tuple(terms), _notation(stage)),
                     inputs, stage.rows, stage.cols, **_where(stage))
        if parameters:
            _weight_gradients(g, stage, grad, names)
    if parameters and g[loss].op.parameters():  # an objective: the loss has weights itself
        _weight_gradients(g, g[loss], f"grad.{loss}", names)
    for part in tied_table_stages(g, names):
        g.add(part.name, "weight_gradient", part.op, part.inputs, part.rows, part.cols,
              **_where(part.owner))
    return g


def _weight_gradients(g: Derivation, stage: Stage, grad: str,
                      names: dict[tuple[str, str], str]) -> None:
    """The gradient of each weight of ``stage``'s operation (``grad`` is dL/d stage)."""
    for parameter, value in stage.op.parameters().items():
        rows, cols = parameter_labels(g, stage, parameter, value)
        g.add(names[(stage.name, parameter)], "weight_gradient",
              Gradient((Term(stage.op, parameter, len(stage.inputs)),),
                       _notation(stage, parameter, "the lookup's use" if names[
                           (stage.name, parameter)].endswith(TIED_PARTS[0]) else "")),
              (*stage.inputs, stage.name, grad), rows, cols, **_where(stage))


#: The name suffixes of a tied table's two contributions: the lookup's, the head's.
TIED_PARTS = (".lookup", ".head")
#: The superscript marking each contribution's symbol (∂L/∂E^lookup).
_PART_MARKS = {"the lookup's use": "lookup", "the head's use": "head"}


@dataclass(frozen=True)
class TiedPart:
    """A stage that makes a tied table's gradient the total of its two uses."""

    name: str
    op: Operation
    inputs: tuple[str, ...]
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    owner: Stage  # the lookup stage: where the stage sits


def _tied_keys(g: Derivation, keys) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """(lookup stage, parameter) and (head stage, parameter) of a tied head whose table's
    two uses both have gradients among ``keys``; None otherwise."""
    head = g.example.lm_head if g.example is not None else None
    if head is None or not head.tied:
        return None
    lookup = [k for k in keys if k[1] == "embedding_table" and g[k[0]].side != "decoder"]
    vocab = [k for k in keys if k[1] == "W_vocab" and g[k[0]].side != "decoder"]
    return (lookup[0], vocab[0]) if lookup and vocab else None


def tied_table_stages(g: Derivation, names: dict[tuple[str, str], str]) -> list[TiedPart]:
    """With ``[lm_head] tied = true``: the head's use of the table, ``grad.W_vocab``
    transposed (``grad.embedding_table.head``, every vocabulary row), and the table's
    whole gradient ``grad.embedding_table``, the lookup's rows
    (``grad.embedding_table.lookup``) plus the head's, over every vocabulary row (what
    PyTorch reports for the shared parameter).  Empty when the table is not tied or a
    use has no gradient."""
    keys = _tied_keys(g, names)
    if keys is None:
        return []
    lookup, vocab = keys
    stage = g[lookup[0]]
    total = names[lookup].removesuffix(TIED_PARTS[0])
    head = total + TIED_PARTS[1]
    rows = tuple(g.example.vocab)
    return [TiedPart(head, Transpose(_notation(stage, lookup[1], "the head's use"), True),
                     (names[vocab],), rows, stage.cols, stage),
            TiedPart(total, TableSum(tuple(stage.op.used_rows()),
                                     _notation(stage, lookup[1], "both uses")),
                     (names[lookup], head), rows, stage.cols, stage)]


def is_backward_stage(name: str) -> bool:
    """Is ``name`` a stage of the backward pass (``loss``, ``loss.per_position``,
    ``grad.*`` and its named contributions)?"""
    return name == "loss" or name.startswith(("grad.", "loss."))


def stage_of(g: Derivation, name: str) -> Stage:
    """``g[name]``, appending the loss and every gradient first when ``name`` needs them.

    A side stage's address (``layer1.head1.weights.exp``, ``layer1.W_1``,
    ``grad.S.via.C``: :mod:`symformer.blocks.side_stages`) adds that stage.
    A forward-only derivation stays forward-only until a backward stage is asked for
    (forward checks stay as fast).  A name that is not a stage at all gets the unknown
    stage message over every stage the example has, its gradients included (the count
    ``derive --list`` shows); a backward stage of an example without ``[loss]`` gets the
    message saying how to add one.
    """
    if name not in g and not is_backward_stage(name) and add_side_stage(g, name):
        return g[name]  # a side stage on demand (symformer.blocks.side_stages)
    if name not in g and "grad.loss" not in g:
        if is_backward_stage(name):
            backward(g)  # raises the "no [loss] table" message when there is none
        elif g.example is not None and g.example.loss is not None:
            try:
                backward(g)
            except InputError:  # a backward pass that cannot be built: name the forward ones
                pass
    if name not in g and add_side_stage(g, name):  # a gradient's path, say
        return g[name]
    if name not in g and not_asked(name) is not None:  # a lesson stage not asked for
        raise InputError(not_asked(name))
    if name not in g and unknown_message(g, name) is not None:  # close to a side stage
        raise InputError(unknown_message(g, name))
    return g[name]


#: Per derivation, (its stages, its copy's stages, the copy) of :func:`with_gradients`.
_WITH_GRADIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def with_gradients(g: Derivation) -> Derivation:
    """``g`` when it has its gradient stages, else a copy of ``g`` with them appended
    (``g`` itself unchanged: an export or a trace does not add stages to the caller's
    derivation).  The copy is built once per ``g`` (stages are append-only: a stage added
    to either since builds a new one), so every export and trace of ``g`` shares its
    computed values and proofs."""
    if "grad.loss" in g:
        return g
    known = _WITH_GRADIENTS.get(g)
    if known is not None and known[0] == len(g) and known[1] == len(known[2]):
        return known[2]
    copy = Derivation(g.example, g.causal)
    for s in g:
        copy.add(s.name, s.kind, s.op, s.inputs, s.rows, s.cols, **_where(s))
    copy = backward(copy)
    _WITH_GRADIENTS[g] = (len(g), len(copy), copy)
    return copy


def _needed(g: Derivation, loss: str, stop: frozenset[str]) -> set[str]:
    """The loss and every stage it reads, not looking past the ``stop`` stages."""
    seen = {loss}
    todo = [loss]
    while todo:
        name = todo.pop()
        if name in stop:
            continue
        for source in g[name].inputs:
            if source not in seen:
                seen.add(source)
                todo.append(source)
    return seen


def parameter_labels(g: Derivation, stage: Stage, parameter: str, value
                     ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Row and column labels of ``stage``'s weight ``parameter`` (and of its gradient)."""
    rows = _parameter_rows(g, stage, parameter, value.rows)
    named = getattr(stage.op, "parameter_columns", None)  # an objective's parameter names
    cols = named(parameter) if named is not None else stage.cols \
        if value.cols == stage.shape[1] else tuple(f"c{j}" for j in range(value.cols))
    return rows, cols


def parameter_names(g: Derivation, needed: set[str], contributions: bool = True
                    ) -> dict[tuple[str, str], str]:
    """``grad.<block>.<parameter>`` for each (stage, parameter); the stage's own name
    replaces the block for a norm's gamma and beta (``grad.layer1.add_norm1.gamma``,
    whether or not the layer has a second norm: ``train --write`` finds ``gamma_1`` by
    it) and where two stages of a block have parameters of the same name.  A tied
    table's lookup gradient is its contribution ``grad.embedding_table.lookup``
    (:func:`tied_table_stages`) unless ``contributions`` is False (the weight's own
    name, for ``train``)."""
    short: dict[tuple[str, str], str] = {}
    for s in g:
        if s.name in needed:
            block = [c for c in s.name.split(".")[:-1] if c not in _GROUPS]
            for parameter in s.op.parameters():
                where = [s.name] if parameter in ("gamma", "beta") else block
                short[(s.name, parameter)] = ".".join(["grad", *where, parameter])
    counts: dict[str, int] = {}
    for v in short.values():
        counts[v] = counts.get(v, 0) + 1
    names = {key: v if counts[v] == 1 else f"grad.{key[0]}.{key[1]}"
             for key, v in short.items()}
    tied = _tied_keys(g, names) if contributions else None
    if tied is not None:
        names[tied[0]] += TIED_PARTS[0]
    return names


def _parameter_rows(g: Derivation, stage: Stage, parameter: str, rows: int
                    ) -> tuple[str, ...]:
    # the tables first: one token or one position read is still a row of the table
    if stage.op.lookup == "positions":  # the learned table: the positions read
        return position_labels(stage.op.used_rows())
    if stage.op.lookup == "tokens":  # the embedding table: the tokens used
        return tuple(dict.fromkeys(stage.rows))
    if rows == 1:
        return (parameter,)
    if stage.inputs and rows == g[stage.inputs[0]].shape[1]:
        return g[stage.inputs[0]].cols  # a weight W: one row per input column
    return tuple(dict.fromkeys(stage.rows))


def position_labels(positions) -> tuple[str, ...]:
    """The row labels of a learned positional table's rows: ``position 0``, ... (as
    :func:`symformer.notation.position_label` names them)."""
    return tuple(position_label(p) for p in positions)


def _notation(stage: Stage, parameter: str | None = None, part: str = "") -> Notation:
    """dL/dS for a stage, dL/dP for its parameter P (written as the operation writes it);
    ``part`` names one contribution of several (a tied table's: "the head's use").

    A parameter with a subscript of its own is bracketed, so that an index can follow:
    (dL/dW_Q)_0 is column 0 of the gradient of W_Q."""
    symbol = parameter_symbol(stage, parameter) if parameter else stage_symbol(stage)
    latex, text = rf"\partial L/\partial {symbol.latex}", f"∂L/∂{symbol.text}"
    title = f"Gradient of the loss at {in_sentence(symbol.title)}" + (
        f", {part}" if part else "")
    if part in _PART_MARKS:  # one use of a tied table: marked, so that the sum reads
        mark = _PART_MARKS[part]
        return Notation(rf"{latex}^{{\text{{{mark}}}}}", f"{text}^{mark}", title, bracket=True)
    if parameter and "_" in symbol.latex:
        return Notation(latex, text, title, bracket=True)
    # braced when it has a subscript of its own, so that an index can follow
    return Notation(f"{{{latex}}}" if "_" in symbol.latex else latex, text, title)


def _where(stage: Stage) -> dict[str, object]:
    return {"layer": stage.layer, "head": stage.head, "side": stage.side}
