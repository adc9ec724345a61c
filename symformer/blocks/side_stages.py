"""Side stages added on demand: every number a worked example prints has an address.

A claim, a tagged note or a fill template naming one of these addresses adds its
stage to the derivation (:func:`add_side_stage`, called by
:func:`symformer.blocks.backward.stage_of`); nothing reads it, so the example's
other stages, verdicts and labels stay as they were.  The addresses (docs/verify.md,
"Addresses of the terms"), with S a stage of the kind named:

* ``S.exp``, ``S.exp_sum`` -- S a softmax: each e^{s_j} of its input, each row's Σ;
* ``S.products.rowR``, ``S.jacobian.rowR`` -- the lesson stages of
  :mod:`symformer.blocks.requested_stages`, without asking for them in ``[stages]``;
* ``S.output_mean``, ``S.output_variance``, ``loss.per_position`` -- the other lesson
  stages, without ``[stages]``;
* ``S.squares`` -- S a variance ((x_j - μ)²) or a mean square (x_j²);
* ``S.theta``, ``S.angles`` -- S a RoPE stage (``layer1.head1.Q_rot``): θ_i, p·θ_i;
* ``S.scale`` -- S a scaled-score stage (``layer1.head1.scores``): what its raw scores
  are divided by, √d_k (``√8``) or the example's scale τ;
* ``S.mask``, ``S.keep_scale`` -- S a dropout stage (``layer1.moe.output.dropout``): its
  given 0/1 mask D and the kept entries' factor 1/(1 − p);
* ``loss.uniform`` -- a cross-entropy's loss at a uniform prediction, −log(1/V) = log V
  for V classes (``−log(1/6)``): the loss an untrained model starts near;
* ``P`` -- an operation's weight, named as its gradient ``grad.P`` is
  (``layer1.head1.W_Q``, ``layer1.W_1``, ``layer1.add_norm1.gamma``,
  ``embedding_table``, ``W_vocab``);
* ``grad.S.via.C`` -- the contribution to dL/dS through its consumer C (the δ^(C)
  the notes print for a gradient with several paths);
* ``stepT.adam_mhat.W``, ``stepT.adam_vhat.W``, ``stepT.adam_denominator.W`` (√v̂ + ε),
  ``stepT.adam_update.W`` (lr m̂ / (√v̂ + ε), the amount taken off),
  ``stepT.adamw_decayed.W`` (W_(t-1)(1 - lr λ)) -- a training run's Adam step t;
* the terms of projections and weighted sums, the max-subtracted softmax, log p and
  1 − p, LayerNorm's x − μ and σ² + ε, the sinusoid's divisors and angles, RoPE's cos
  and sin, 1/√d_k, SGD's lr·g, Adam's partial products and bias corrections, the
  softmax backward's Σ α g: :mod:`symformer.blocks.side_parts`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from weakref import WeakKeyDictionary

from symformer.blocks import requested_stages, side_parts
from symformer.engine.graph import Derivation, Stage
from symformer.errors import InputError
from symformer.notation import CONSTANT_KIND, position_label
from symformer.notation import symbol as stage_symbol
from symformer.notation_types import Notation
from symformer.ops import Parameter
from symformer.ops.gradient import Gradient
from symformer.ops.side_terms import AdamPart, ConstantTable, Exponentials, ExpSums, Squares

#: The kind of the side stages this module adds (a weight's is "parameter", an Adam
#: part's "optimizer_state", so that labels name a weight's rows as a weight's).
KIND = "side"
#: The side stages added to each derivation.
_ADDED: WeakKeyDictionary[Derivation, set[str]] = WeakKeyDictionary()


def is_side_stage(g: Derivation, name: str) -> bool:
    """Was the stage ``name`` of ``g`` added by :func:`add_side_stage`?"""
    return name in _ADDED.get(g, ())


_ROW = re.compile(r"(?P<stage>.+)\.(?P<key>products|jacobian)\.row(?P<row>\d+)")
_SUFFIX = re.compile(r"(?P<stage>.+)\.(?P<key>exp|exp_sum|squares|theta|angles|scale|mask|"
                     r"keep_scale)")
#: The address of a cross-entropy's loss at a uniform prediction.
UNIFORM_LOSS = "loss.uniform"
_OUTPUT = re.compile(r"(?P<stage>.+)\.(?P<key>output_mean|output_variance)")
_VIA = re.compile(r"grad\.(?P<stage>.+?)\.via\.(?P<consumer>.+)")
_ADAM = re.compile(r"(?P<step>step[0-9]+)\.(?P<key>adam_mhat|adam_vhat|adam_denominator|"
                   r"adam_update|adamw_decayed)\.(?P<weight>.+)")
#: What each suffix needs S to be: operation names, and the words of the message.
_NEEDS = {"exp": (("softmax",), "a softmax stage (attention weights or probabilities)"),
          "exp_sum": (("softmax",), "a softmax stage (attention weights or probabilities)"),
          "squares": (("variance", "whole_variance", "mean_square"),
                      "a variance or mean-square stage"),
          "theta": (("rope",), "a RoPE stage (Q_rot, K_rot)"),
          "angles": (("rope",), "a RoPE stage (Q_rot, K_rot)"),
          "scale": (("scale_mask",), "a scaled-score stage (scores)"),
          "mask": (("dropout",), "a dropout stage (a sub-layer's output.dropout)"),
          "keep_scale": (("dropout",), "a dropout stage (a sub-layer's output.dropout)"),
          "products": (("dot_scores",), "a dot-product stage (raw_scores)"),
          "jacobian": (("softmax",), "a softmax stage (attention weights or probabilities)")}


def add_side_stage(g: Derivation, name: str) -> bool:
    """Add the side stage ``name`` to ``g`` if it is an address of this module whose
    stage ``g`` has (True; also when it is there already); False when ``name`` is no
    such address.  An address about a stage of the wrong kind raises InputError."""
    if name in g:
        return True
    before = set(g.stages)
    added = name == requested_stages.PER_POSITION and "loss" in g
    if added:
        requested_stages.add_per_position_loss(g, "loss", force=True)
    total = name.removesuffix(".total")
    if total != name and total in g and g[total].op.name != "mean":
        add_side_stage(g, f"{total}.squares")  # the sum inside a variance reads them
    for add in (side_parts.add_part, _row_stage, _suffix_stage, _output_stage, _via_stage,
                _adam_stage, _uniform_loss_stage, _parameter_stage):
        if added:
            break
        added = add(g, name)
    if added:
        _ADDED.setdefault(g, set()).update(set(g.stages) - before)
    return added


def add_requested(g: Derivation, patterns: Iterable[str]) -> None:
    """Add the side stages that ``--stage`` names or globs ask for: a name ``g`` lacks
    that is an address, and every address a glob matches when it matches no stage of
    ``g`` (``'layer1.head1.Q_rot.*'``, ``'step1.adam_*'``).  A name close to a side
    stage's address raises InputError naming the close addresses."""
    for name in patterns:
        if not any(c in name for c in "*?[") and name not in g:
            if not add_side_stage(g, name) and unknown_message(g, name) is not None:
                raise InputError(unknown_message(g, name))  # close to a side stage's
        elif not any(fnmatch.fnmatchcase(s, name) for s in g.stages):
            for address in list(side_addresses(g)):
                if fnmatch.fnmatchcase(address, name):
                    add_side_stage(g, address)


def unknown_message(g: Derivation, name: str) -> str | None:
    """The unknown-stage message for ``name`` when the closest name is a side stage's
    address (None otherwise: the usual message stands)."""
    import difflib

    known = [s.name for s in g]
    extra = [a for a in side_addresses(g) if a not in g]
    close = difflib.get_close_matches(name, known + extra, n=5, cutoff=0.5)
    if not close or close[0] not in extra:  # the closest is a stage: the usual message
        return None
    return (f"unknown stage {name!r}; did you mean {', '.join(close)}? (`symformer derive "
            f"--list --all` lists all {len(known) + len(extra)} addresses, the side "
            f"stages' included)")


def side_addresses(g: Derivation) -> Iterator[str]:
    """Every address :func:`add_side_stage` takes on ``g`` as it stands (for
    ``derive --list --all``), stage by stage."""
    for s in list(g):
        op = s.op.name
        for key, (ops, _) in _NEEDS.items():
            if op not in ops:
                continue
            if key in ("products", "jacobian"):
                yield from (f"{s.name}.{key}.row{r}" for r in range(s.shape[0]))
            elif key != "theta" or s.op.angles is None:
                yield f"{s.name}.{key}"
        yield from side_parts.part_addresses(g, s)
        if op == "normalize":
            yield from (f"{s.name}.output_mean", f"{s.name}.output_variance")
        if op == "gradient" and len({c for c, _ in _terms(g, s)}) > 1:
            yield from (f"{s.name}.via.{c}" for c in dict.fromkeys(c for c, _ in _terms(g, s)))
        if op == "adam_step":
            step, weight = s.name.split(".", 1)
            for key in ("adam_mhat", "adam_vhat", "adam_denominator", "adam_update"):
                yield f"{step}.{key}.{weight}"
            if s.op.decay:
                yield f"{step}.adamw_decayed.{weight}"
    yield from side_parts.correction_addresses(g)
    if "loss" in g and g["loss"].op.name in ("cross_entropy", "mse"):
        yield requested_stages.PER_POSITION
    if "loss" in g and g["loss"].op.name == "cross_entropy":
        yield UNIFORM_LOSS
    yield from _parameters(g, every=True)


def _row_stage(g: Derivation, name: str) -> bool:
    match = _ROW.fullmatch(name)
    if not match or match["stage"] not in g:
        return False
    s = side_parts.needed(g, name, match["key"], match["stage"], _NEEDS)
    row = int(match["row"])
    if row >= s.shape[0]:
        raise InputError(f"{name}: {s.name} has {s.shape[0]} rows (0 to {s.shape[0] - 1})")
    requested_stages.add_row_stage(g, s, match["key"], row)
    return True


def _suffix_stage(g: Derivation, name: str) -> bool:
    match = _SUFFIX.fullmatch(name)
    if not match or match["stage"] not in g:
        return False
    key = match["key"]
    s = side_parts.needed(g, name, key, match["stage"], _NEEDS)
    where = side_parts.where(s)
    if key in ("exp", "exp_sum"):
        source = g[s.inputs[0]]
        title = f"Exponentials of {source.name}" if key == "exp" else \
            f"Sum of the exponentials of each row of {source.name}"
        op = Exponentials(Notation("e^{s}", "e^s", title)) if key == "exp" else \
            ExpSums(Notation(r"\Sigma", "Σ", title))
        g.add(name, KIND, op, (source.name,), s.rows, s.cols if key == "exp" else ("Σ",),
              **where)
    elif key == "scale":
        _scale_stage(g, name, s, where)
    elif key in ("mask", "keep_scale"):
        _dropout_stage(g, name, s, key, where)
    elif key == "squares":
        x = g[s.inputs[0]]
        centred = s.op.name in ("variance", "whole_variance")
        title = f"Squares {'(x_j - μ)²' if centred else 'x_j²'} inside {s.name}"
        g.add(name, KIND, Squares(Notation("x^2", "x²", title)),
              tuple(s.inputs[:2]) if centred else (x.name,), x.rows, x.cols, **where)
    else:
        _rope_stage(g, name, s, key, where)
    return True


def _output_stage(g: Derivation, name: str) -> bool:
    """A LayerNorm output's own mean and variance (what ``[stages] output_moments``
    adds), read from the output."""
    from symformer.blocks.sublayers import OUTPUT_MEAN, OUTPUT_VARIANCE
    from symformer.ops import RowMean, RowVariance, WholeMean, WholeVariance

    match = _OUTPUT.fullmatch(name)
    if not match or match["stage"] not in g:
        return False
    s = g[match["stage"]]
    if s.op.name != "normalize":
        raise InputError(f"{name}: {s.name} is not a LayerNorm stage, so it has no "
                         f"{match['key']}")
    whole = g[s.inputs[1]].op.name == "whole_mean"
    mean = f"{s.name}.output_mean"
    if mean not in g:
        g.add(mean, "mean", WholeMean(notation=OUTPUT_MEAN) if whole
              else RowMean(notation=OUTPUT_MEAN), (s.name,), s.rows, ("mean",),
              layer=s.layer)
    if match["key"] == "output_variance":
        g.add(name, "variance", WholeVariance(notation=OUTPUT_VARIANCE) if whole
              else RowVariance(notation=OUTPUT_VARIANCE), (s.name, mean), s.rows,
              ("variance",), layer=s.layer)
    return True


def _scale_stage(g: Derivation, name: str, s: Stage, where: dict) -> None:
    """What the scores ``s`` divide their raw scores by: √d_k, or the example's scale."""
    from symformer.lazy import sympy

    op = s.op
    value = sympy.sqrt(op.d_k) if op.scale is None else sympy.Rational(op.scale)
    notation = (Notation(r"\sqrt{d_k}", "√d_k", f"The divisor √d_k of {s.name}")
                if op.scale is None else
                Notation(r"\tau", "τ", f"The divisor τ of {s.name}"))
    g.add(name, CONSTANT_KIND, ConstantTable(sympy.Matrix([[value]]), notation), (),
          (notation.text,), ("value",), **where)


def _dropout_stage(g: Derivation, name: str, s: Stage, key: str, where: dict) -> None:
    """A dropout stage's given mask D (its shape), or the kept entries' factor 1/(1 − p)."""
    from symformer.lazy import sympy

    if key == "mask":
        g.add(name, CONSTANT_KIND, ConstantTable(s.op.mask_matrix(), Notation(
            "D", "D", f"The given dropout mask of {s.name}"), by_token=True), (), s.rows,
            s.cols, **where)
        return
    notation = Notation(r"\frac{1}{1 - p}", "1/(1 − p)", f"The factor of {s.name}'s kept "
                        f"entries")
    g.add(name, CONSTANT_KIND, ConstantTable(sympy.Matrix([[1 / (1 - sympy.S(s.op.p))]]),
                                             notation), (), (notation.text,), ("value",),
          **where)


def _uniform_loss_stage(g: Derivation, name: str) -> bool:
    """``loss.uniform``: −log(1/V) = log V, V the classes the cross-entropy is over."""
    from symformer.lazy import sympy

    if name != UNIFORM_LOSS or "loss" not in g:
        return False
    loss = g["loss"]
    if loss.op.name != "cross_entropy":
        raise InputError(f"{name}: the example's loss is not a cross-entropy, so it has no "
                         f"loss at a uniform prediction")
    classes = g[loss.inputs[0]].shape[1]
    notation = Notation(r"\log V", "log V",
                        f"The loss at a uniform prediction over V = {classes} classes, "
                        f"-log(1/{classes})")
    g.add(name, CONSTANT_KIND, ConstantTable(sympy.Matrix([[sympy.log(classes)]]), notation), (),
          ("L",), ("uniform",), side=loss.side)
    return True


def _rope_stage(g: Derivation, name: str, s: Stage, key: str, where: dict) -> None:
    from symformer.lazy import sympy

    rope = s.op
    pairs = tuple(f"i{i}" for i in range(rope.d // 2))
    if key == "theta":
        if rope.angles is not None:
            raise InputError(f"{name}: the example gives RoPE's angles (rope_angles), "
                             f"not frequencies θ_i: claim {s.name}.angles")
        value = sympy.Matrix(1, rope.d // 2, lambda _, i: sympy.sympify(rope.thetas[i])
                             if rope.thetas is not None
                             else rope.base ** sympy.Rational(-2 * i, rope.d))
        op = ConstantTable(value, Notation(r"\theta", "θ", f"RoPE frequencies θ_i of {s.name}"))
        g.add(name, CONSTANT_KIND, op, (), ("θ",), pairs, **where)
        return
    value = sympy.Matrix(rope.n, rope.d // 2, lambda m, i: rope.angle(m, i))
    op = ConstantTable(value, Notation(r"p\theta", "pθ", f"RoPE angles p·θ_i of {s.name}"),
                       by_token=True)
    g.add(name, KIND, op, (), s.rows, pairs, **where)


def _terms(g: Derivation, s: Stage) -> list[tuple[str, tuple]]:
    """(consumer, (term, its inputs)) for each term of the gradient stage ``s``."""
    found, k = [], 0
    for term in s.op.terms:
        inputs = s.inputs[k:k + term.arity + 2]
        found.append((inputs[term.arity], (term, inputs)))
        k += term.arity + 2
    return found


def _via_stage(g: Derivation, name: str) -> bool:
    match = _VIA.fullmatch(name)
    if not match:
        return False
    grad = f"grad.{match['stage']}"
    if grad not in g:  # no backward pass yet (stage_of appends it first) or no such stage
        return False
    s = g[grad]
    if s.op.name != "gradient":
        raise InputError(f"{name}: {grad} is not a gradient with paths to split")
    terms = [t for c, t in _terms(g, s) if c == match["consumer"]]
    if not terms:
        consumers = ", ".join(dict.fromkeys(c for c, _ in _terms(g, s)))
        raise InputError(f"{name}: {match['consumer']} does not read {match['stage']}; "
                         f"the paths of {grad} go through {consumers}")
    mark = stage_symbol(g[match["consumer"]])  # δ^(q), as the notes print it
    notation = Notation(rf"\delta^{{({mark.latex})}}", f"δ^({mark.text})",
                        f"The term of {grad} through {match['consumer']}")
    g.add(name, KIND, Gradient(tuple(t for t, _ in terms), notation),
          tuple(i for _, inputs in terms for i in inputs), s.rows, s.cols,
          layer=s.layer, head=s.head, side=s.side)
    return True


def _adam_stage(g: Derivation, name: str) -> bool:
    match = _ADAM.fullmatch(name)
    if not match:
        return False
    step = f"{match['step']}.{match['weight']}"
    if step not in g:
        g[step]  # the unknown stage message, with the close names
    s = g[step]
    if s.op.name != "adam_step":
        raise InputError(f"{name}: {step} is not an Adam step (the run's optimizer is "
                         f"not adam or adamw, or the weight is frozen)")
    op = s.op
    part = match["key"].split("_", 1)[1]
    if part == "decayed" and not op.decay:
        raise InputError(f"{name}: the run's optimizer is adam, which has no decoupled "
                         f"weight decay (optimizer = \"adamw\")")
    symbols = {"mhat": (r"\hat{m}", "m̂", "Bias-corrected first moment m̂"),
               "vhat": (r"\hat{v}", "v̂", "Bias-corrected second moment v̂"),
               "denominator": (r"\sqrt{\hat{v}} + \epsilon", "√v̂ + ε",
                               "Adam's denominator √v̂ + ε"),
               "update": (r"\eta \hat{m}/(\sqrt{\hat{v}} + \epsilon)", "η m̂/(√v̂ + ε)",
                          "Adam's update (taken off the weight)"),
               "decayed": (r"W(1 - \eta\lambda)", "W(1 - ηλ)", "AdamW's decayed weight")}
    latex, text, title = symbols[part]
    g.add(name, "optimizer_state", AdamPart(part, op.lr, op.t, op.beta1, op.beta2, op.eps, op.decay,
                               Notation(latex, text, f"{title} of {match['weight']}")),
          s.inputs, s.rows, s.cols, layer=s.layer, head=s.head, side=s.side)
    return True


#: Name components of sub-layer groups, left out of a weight's address (as of its
#: gradient's: :func:`symformer.blocks.backward.parameter_names`).
_GROUPS = ("attention", "ffn")


def _parameters(g: Derivation, every: bool = False) -> dict[str, tuple[Stage, str]]:
    """Every operation weight's address not yet a stage (``every``: with those that are),
    with its stage and parameter name: ``grad.P``'s P (the stage's block and the
    parameter; a norm's gamma and beta under the norm's own name; the stage's own name
    where two stages of a block have weights of one name)."""
    short: dict[tuple[str, str], str] = {}
    for s in g:
        if s.name.startswith("grad.") or is_side_stage(g, s.name):
            continue
        block = [c for c in s.name.split(".")[:-1] if c not in _GROUPS]
        for parameter in s.op.parameters():
            where = [s.name] if parameter in ("gamma", "beta") else block
            short[(s.name, parameter)] = ".".join([*where, parameter])
    counts: dict[str, int] = {}
    for v in short.values():
        counts[v] = counts.get(v, 0) + 1
    found: dict[str, tuple[Stage, str]] = {}
    for (stage, parameter), v in short.items():
        found.setdefault(v if counts[v] == 1 else f"{stage}.{parameter}", (g[stage], parameter))
    return {name: v for name, v in found.items() if every or name not in g}


def _weight_labels(g: Derivation, stage: Stage, parameter: str, value
                   ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A weight's row and column labels: a table's vocabulary or positions, a weight
    W's input columns, a row vector's name."""
    if stage.op.name == "embedding" and len(g.example.vocab) == value.rows:
        rows = tuple(g.example.vocab)
    elif stage.op.name == "learned_positional":
        rows = tuple(position_label(p) for p in range(value.rows))
    elif value.rows == 1:
        rows = (parameter,)
    elif stage.inputs and value.rows == g[stage.inputs[0]].shape[1]:
        rows = g[stage.inputs[0]].cols
    else:
        rows = tuple(f"r{i}" for i in range(value.rows))
    if len(rows) != value.rows:
        rows = tuple(position_label(p) for p in range(value.rows))
    named = getattr(stage.op, "parameter_columns", None)  # an objective's parameter names
    cols = named(parameter) if named is not None else stage.cols \
        if value.cols == stage.shape[1] else tuple(f"c{j}" for j in range(value.cols))
    return rows, cols


def _parameter_stage(g: Derivation, name: str) -> bool:
    if name.startswith(("grad.", "loss")):
        return False
    found = _parameters(g).get(name)
    if found is None:
        return False
    stage, parameter = found
    value = stage.op.parameters()[parameter]
    rows, cols = _weight_labels(g, stage, parameter, value)
    symbol = parameter.split(".")[-1]
    # a subscript of its own is bracketed, so that an index can follow: (b_1)_2
    g.add(name, "parameter", Parameter(value, Notation(symbol, symbol, f"The weight {name}",
                                                       bracket="_" in symbol), is_weight=True),
          (), rows, cols, layer=stage.layer, head=stage.head, side=stage.side)
    return True
