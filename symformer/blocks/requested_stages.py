"""The stages lessons print that an example asks for in its ``[stages]`` table.

* ``jacobian``: a softmax row's Jacobian, ``NAME.jacobian.rowR``
  (:class:`~symformer.ops.softmax_jacobian.SoftmaxJacobian`);
* ``products``: the products inside one query's dot products,
  ``NAME.products.rowR`` (:class:`~symformer.ops.dot_products.DotProducts`);
* ``per_position_loss``: ``loss.per_position``, each position's loss
  (:mod:`symformer.ops.position_losses`), added with the loss.

Each is a side stage (nothing reads it), placed with the stage it is about.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from symformer.engine.graph import Derivation, Stage, unknown_stage_message
from symformer.errors import InputError
from symformer.example.schema import StageRequest
from symformer.notation_types import Notation
from symformer.ops import DotProducts, DotScores, Softmax, SoftmaxJacobian
from symformer.registry import per_position_form

#: The name of the per-position loss stage.
PER_POSITION = "loss.per_position"


def add_requested_stages(g: Derivation) -> None:
    """Append the Jacobians and products the example's ``[stages]`` asks for."""
    asked = g.example.stages if g.example is not None else None
    if asked is None:
        return
    for request in asked.jacobian:
        _add_rows(g, request, asked.where, "jacobian", Softmax.name, "a softmax stage "
                  "(attention weights or probabilities)", _jacobian)
    for request in asked.products:
        _add_rows(g, request, asked.where, "products", DotScores.name, "a dot-product stage "
                  "(raw_scores)", _products)


def _jacobian(g: Derivation, s: Stage, row: int) -> None:
    title = f"Jacobian of softmax row {row} ({s.rows[row]!r}): d{s.op.symbol.text}_j/ds_k"
    op = SoftmaxJacobian(row, Notation("J", "J", title))
    g.add(f"{s.name}.jacobian.row{row}", "jacobian", op, (s.name,), s.cols, s.cols,
          layer=s.layer, head=s.head, side=s.side)


def _products(g: Derivation, s: Stage, row: int) -> None:
    q, k = s.inputs
    title = f"Products inside the dot products of query {row} ({s.rows[row]!r}) with each key"
    g.add(f"{s.name}.products.row{row}", "products", DotProducts(row, Notation("P", "P", title)),
          (q, k), g[k].rows, g[q].cols, layer=s.layer, head=s.head, side=s.side)


def add_row_stage(g: Derivation, stage: Stage, key: str, row: int) -> None:
    """Append ``stage``'s lesson stage ``key`` ("jacobian" or "products") of ``row``
    (appended last: a claim asked for it, :mod:`symformer.blocks.side_stages`)."""
    (_products if key == "products" else _jacobian)(g, stage, row)


def _add_rows(g: Derivation, request: StageRequest, where: str, key: str, kind: str,
              what: str, add: Callable[[Derivation, Stage, int], None]) -> None:
    if request.stage not in g:
        raise InputError(f"{where}: {key} names {request.text!r}: "
                         + unknown_stage_message(request.stage, [s.name for s in g]))
    stage = g[request.stage]
    if stage.op.name != kind:  # the operation's declared name
        raise InputError(f"{where}: {key} names {request.stage}, which is not {what}")
    n = stage.shape[0]
    if request.row is not None and request.row >= n:
        raise InputError(f"{where}: {key} names row {request.row} of {request.stage}, "
                         f"which has {n} rows (0 to {n - 1})")
    for row in range(n) if request.row is None else (request.row,):
        if f"{stage.name}.{key}.row{row}" not in g:  # asked twice: once
            add(g, stage, row)
            _place_after(g, f"{stage.name}.{key}.row{row}", stage.name)


def _place_after(g: Derivation, name: str, anchor: str) -> None:
    """Move the just-added stage ``name`` next to ``anchor`` (after the side stages
    already there), so that notes show it with the stage it is about.  Only while the
    derivation is being built: nothing has been evaluated, and every input of ``name``
    precedes ``anchor`` or is ``anchor``."""
    order = [s for s in g.stages if s != name]
    at = order.index(anchor) + 1
    while at < len(order) and order[at].startswith(anchor + "."):
        at += 1
    order.insert(at, name)
    g.stages = {s: g.stages[s] for s in order}


def add_per_position_loss(g: Derivation, loss: str, force: bool = False) -> None:
    """``loss.per_position`` after the loss stage, when ``[stages]`` asks for it (or
    ``force``: a claim names it, :mod:`symformer.blocks.side_stages`)."""
    asked = g.example.stages if g.example is not None else None
    if not force and (asked is None or not asked.per_position_loss) or PER_POSITION in g:
        return
    where = asked.where if asked is not None else PER_POSITION
    stage = g[loss]
    form = per_position_form(stage.op.name)
    if form is None:
        raise InputError(f"{where}: per_position_loss needs a [loss] of kind "
                         f"\"cross_entropy\", \"mse\" or \"bce\" (an upstream gradient "
                         f"has no positions)")
    op = form.from_loss(stage.op)
    source = g[stage.inputs[0]]
    g.add(PER_POSITION, "position_losses", op, (source.name,), source.rows, ("L",),
          side=source.side)


#: Names of the stages ``[stages]`` adds, and the line that asks for each.
_ASKED = ((re.compile(r"(?P<stage>.+)\.jacobian\.row(?P<row>\d+)"),
           'jacobian = ["{stage}[{row}]"]'),
          (re.compile(r"(?P<stage>.+)\.products\.row(?P<row>\d+)"),
           'products = ["{stage}[{row}]"]'),
          (re.compile(r".+\.output_(mean|variance)"), "output_moments = true"),
          (re.compile(re.escape(PER_POSITION)), "per_position_loss = true"))


def asked_by(name: str) -> str | None:
    """The ``[stages]`` line that adds the stage ``name`` (None: not such a stage), for
    the message of a claim or a placeholder naming one the example does not ask for."""
    for pattern, line in _ASKED:
        match = pattern.fullmatch(name)
        if match:
            return line.format(**match.groupdict())
    return None


def not_asked(name: str) -> str | None:
    """The message for a lesson stage ``name`` the example does not ask for (None: not
    such a stage)."""
    line = asked_by(name)
    return None if line is None else (f"{name} is there only when the example asks for "
                                      f"it: add a [stages] table with {line} "
                                      f"(docs/blocks.md)")
