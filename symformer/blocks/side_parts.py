"""More side stages on demand: the terms, shifts and factors worked examples print.

The addresses (docs/verify.md, "Addresses of the terms"; docs/stages.md), with S a
stage of the kind named, added by :func:`add_part` when named (nothing reads them):

* ``S.terms.rowR`` -- S a projection (x_c W_{c,j}: row c, column j) or a weighted sum
  (α_j v_{j,c}: row j, column c); each column adds up to entry (R, column) of S (the
  bias apart);
* ``S.shifted``, ``S.shifted_exp``, ``S.shifted_exp_sum`` -- S a softmax: s − max s,
  e^{s − max s} and each row's sum of them (the numerically stable softmax);
* ``S.log`` (log-probabilities, log p), ``S.complement`` (1 − p) -- S a softmax;
* ``S.total`` -- S a row mean (Σ_j x_j), a variance (Σ_j (x_j − μ)²) or a mean square
  (Σ_j x_j²): the sum it divides;
* ``S.centred`` (x − μ), ``S.variance_eps`` (σ² + ε) -- S a LayerNorm;
  ``S.mean_square_eps`` (⟨x²⟩ + ε) -- S an RMSNorm;
* ``S.divisors`` (base^(2i/d)), ``S.angles`` (pos / base^(2i/d)) -- S a sinusoidal
  positional encoding;
* ``S.cos``, ``S.sin`` -- S a RoPE stage: cos and sin of its angles p·θ_i;
* ``S.inv_scale`` -- S a scaled-score stage: 1/√d_k (or 1/τ), the multiplier;
* ``grad.S.dot`` -- S a softmax: Σ_j α_j ∂L/∂α_j, each row's term of the softmax
  backward ∂L/∂s_j = α_j (∂L/∂α_j − Σ_k α_k ∂L/∂α_k);
* ``stepT.sgd_update.W`` -- lr · g, what an SGD step takes off W;
* ``stepT.adam_m_kept.W`` (β₁ m_{t−1}), ``stepT.adam_m_added.W`` ((1 − β₁) g),
  ``stepT.adam_v_kept.W`` (β₂ v_{t−1}), ``stepT.adam_v_added.W`` ((1 − β₂) g²),
  ``stepT.adam_correction1`` (1 − β₁^t), ``stepT.adam_correction2`` (1 − β₂^t).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from symformer.engine.graph import Derivation, Stage
from symformer.errors import InputError
from symformer.lazy import sympy
from symformer.notation import CONSTANT_KIND
from symformer.notation_types import Notation
from symformer.ops.side_parts import (
    Affine,
    Centred,
    LogSoftmax,
    MaxShift,
    RowDot,
    RowSum,
    RowTerms,
)
from symformer.ops.side_terms import ConstantTable, Exponentials, ExpSums

#: The kind of these side stages (as :data:`symformer.blocks.side_stages.KIND`).
KIND = "side"
_TERMS = re.compile(r"(?P<stage>.+)\.terms\.row(?P<row>\d+)")
_SUFFIX = re.compile(r"(?P<stage>.+)\.(?P<key>shifted|shifted_exp|shifted_exp_sum|log|"
                     r"complement|centred|variance_eps|mean_square_eps|divisors|angles|cos|"
                     r"sin|inv_scale|total)")
_DOT = re.compile(r"grad\.(?P<stage>.+)\.dot")
_STEP = re.compile(r"(?P<step>step[0-9]+)\.(?P<key>sgd_update|adam_m_kept|adam_m_added|"
                   r"adam_v_kept|adam_v_added)\.(?P<weight>.+)")
_CORRECTION = re.compile(r"(?P<step>step[0-9]+)\.adam_correction(?P<k>[12])")
_SOFTMAX = (("softmax",), "a softmax stage (attention weights or probabilities)")
#: What each suffix needs S to be: operation names, and the words of the message.
NEEDS = {"terms": (("projection", "weighted_sum"),
                   "a projection (Q, K, V, an output, an FFN layer, logits) or a weighted "
                   "sum (a head's output)"),
         "shifted": _SOFTMAX, "shifted_exp": _SOFTMAX, "shifted_exp_sum": _SOFTMAX,
         "log": _SOFTMAX, "complement": _SOFTMAX, "dot": _SOFTMAX,
         "centred": (("normalize",), "a LayerNorm stage"),
         "variance_eps": (("normalize",), "a LayerNorm stage"),
         "mean_square_eps": (("rms_normalize",), "an RMSNorm stage"),
         "divisors": (("positional_encoding",), "a sinusoidal positional encoding"),
         "angles": (("positional_encoding",), "a sinusoidal positional encoding or a RoPE "
                    "stage"),
         "cos": (("rope",), "a RoPE stage (Q_rot, K_rot)"),
         "sin": (("rope",), "a RoPE stage (Q_rot, K_rot)"),
         "inv_scale": (("scale_mask",), "a scaled-score stage (scores)"),
         "total": (("mean", "variance", "mean_square"),
                 "a row mean, a variance or a mean square")}


def add_part(g: Derivation, name: str) -> bool:
    """Add the side stage ``name`` if it is an address of this module whose stage ``g``
    has (True), else False; an address about a stage of the wrong kind raises
    InputError."""
    for add in (_terms_stage, _suffix_stage, _dot_stage, _step_stage, _correction_stage):
        if add(g, name):
            return True
    return False


def part_addresses(g: Derivation, s: Stage) -> Iterator[str]:
    """The addresses of this module about the stage ``s`` of ``g``."""
    op = s.op.name
    if op in NEEDS["terms"][0]:
        yield from (f"{s.name}.terms.row{r}" for r in range(s.shape[0]))
    if op == "softmax":
        yield from (f"{s.name}.{k}" for k in ("shifted", "shifted_exp", "shifted_exp_sum",
                                             "log", "complement"))
        if f"grad.{s.name}" in g:
            yield f"grad.{s.name}.dot"
    if op == "normalize" and not s.op.unbiased:
        yield from (f"{s.name}.centred", f"{s.name}.variance_eps")
    if op == "rms_normalize":
        yield f"{s.name}.mean_square_eps"
    if op == "positional_encoding" and s.op.kind == "sinusoidal":
        yield from (f"{s.name}.divisors", f"{s.name}.angles")
    if op == "rope":
        yield from (f"{s.name}.cos", f"{s.name}.sin")
    if op == "scale_mask":
        yield f"{s.name}.inv_scale"
    if op in NEEDS["total"][0]:
        yield f"{s.name}.total"
    step = s.name.split(".", 1)
    if op == "sgd_step" and s.op.lr != 0:
        yield f"{step[0]}.sgd_update.{step[1]}"
    if op == "adam_moment":
        moment, weight = step[1].split(".", 1)
        yield from (f"{step[0]}.{moment}_kept.{weight}", f"{step[0]}.{moment}_added.{weight}")


def correction_addresses(g: Derivation) -> Iterator[str]:
    """``stepT.adam_correction1`` and ``2`` of every step T with an Adam step."""
    steps = dict.fromkeys(s.name.split(".", 1)[0] for s in g if s.op.name == "adam_step")
    for step in steps:
        yield from (f"{step}.adam_correction1", f"{step}.adam_correction2")


def needed(g: Derivation, name: str, key: str, stage: str,
           needs: dict[str, tuple[tuple[str, ...], str]] = NEEDS) -> Stage | None:
    """The stage ``stage`` of ``g`` the address ``name`` is about (None: no such stage);
    InputError when it is not of the kind the suffix ``key`` needs (``needs``: each
    suffix's operations and their description)."""
    if stage not in g:
        return None
    s = g[stage]
    ops, what = needs[key]
    if s.op.name not in ops:
        raise InputError(f"{name}: {stage} is not {what}, so it has no {key}")
    return s


def where(s: Stage) -> dict:
    """The placement a side stage of ``s`` shares with it (layer, head, side)."""
    return {"layer": s.layer, "head": s.head, "side": s.side}


def _constant(g: Derivation, name: str, s: Stage, value: sympy.Matrix, notation: Notation,
              rows: tuple, cols: tuple, by_token: bool = False) -> None:
    """A constant side stage of ``s``: one of the example's, or (``by_token``) one row per
    token."""
    g.add(name, KIND if by_token else CONSTANT_KIND,
          ConstantTable(value, notation, by_token=by_token), (), rows, cols, **where(s))


def _terms_stage(g: Derivation, name: str) -> bool:
    match = _TERMS.fullmatch(name)
    if not match or match["stage"] not in g:
        return False
    s = needed(g, name, "terms", match["stage"])
    row = int(match["row"])
    if row >= s.shape[0]:
        raise InputError(f"{name}: {s.name} has {s.shape[0]} rows (0 to {s.shape[0] - 1})")
    a = g[s.inputs[0]]
    if s.op.name == "weighted_sum":
        title = f"Terms α_j v_j inside row {row} ({s.rows[row]!r}) of {s.name}"
        op, inputs, rows = RowTerms(row, None, Notation("T", "T", title)), s.inputs[:2], \
            g[s.inputs[1]].rows
    else:
        title = f"Terms x_c W_(c,j) inside row {row} ({s.rows[row]!r}) of {s.name}"
        staged = s.op.from_stages
        op = RowTerms(row, None if staged else s.op.W, Notation("T", "T", title), True)
        inputs, rows = (s.inputs[:2] if staged else s.inputs[:1]), a.cols
    g.add(name, KIND, op, tuple(inputs), rows, s.cols, **where(s))
    return True


def _suffix_stage(g: Derivation, name: str) -> bool:
    match = _SUFFIX.fullmatch(name)
    if not match or match["stage"] not in g:
        return False
    key = match["key"]
    if key == "angles" and g[match["stage"]].op.name == "rope":
        return False  # RoPE's angles: symformer.blocks.side_stages
    s = needed(g, name, key, match["stage"])
    if key in ("shifted", "shifted_exp", "shifted_exp_sum"):
        _shifted(g, s, key)
    elif key in ("log", "complement"):
        op = LogSoftmax(Notation(r"\log p", "log p", f"Logarithms of {s.name}")) \
            if key == "log" else Affine(-1, 1, 1, Notation("1 - p", "1 − p",
                                                           f"One minus each entry of {s.name}"))
        g.add(name, KIND, op, (s.inputs[0] if key == "log" else s.name,), s.rows, s.cols,
              **where(s))
    elif key == "total":
        _sum(g, name, s)
    elif key in ("centred", "variance_eps", "mean_square_eps"):
        _norm_part(g, name, s, key)
    elif key in ("divisors", "angles"):
        _sinusoid(g, name, s, key)
    elif key in ("cos", "sin"):
        rope = s.op
        f = sympy.cos if key == "cos" else sympy.sin
        value = sympy.Matrix(rope.n, rope.d // 2, lambda m, i: f(rope.angle(m, i)))
        _constant(g, name, s, value, Notation(rf"\{key}", key, f"RoPE's {key}(p·θ_i) of "
                                                               f"{s.name}"),
                  s.rows, tuple(f"i{i}" for i in range(rope.d // 2)), by_token=True)
    else:
        op = s.op
        value = 1 / sympy.sqrt(op.d_k) if op.scale is None else 1 / sympy.Rational(op.scale)
        text = "1/√d_k" if op.scale is None else "1/τ"
        _constant(g, name, s, sympy.Matrix([[value]]),
                  Notation(r"1/\sqrt{d_k}" if op.scale is None else r"1/\tau", text,
                           f"The multiplier {text} of {s.name}"), (text,), ("value",))
    return True


def _shifted(g: Derivation, s: Stage, key: str) -> None:
    """``S.shifted`` (added first: the others read it) and its exponentials or their sums."""
    shifted = f"{s.name}.shifted"
    source = g[s.inputs[0]]
    if shifted not in g:
        g.add(shifted, KIND, MaxShift(Notation("z", "z", f"z = s − max s: {source.name} "
                                                         f"minus each row's maximum")),
              (source.name,), s.rows, s.cols, **where(s))
    if key == "shifted_exp":
        g.add(f"{s.name}.{key}", KIND, Exponentials(Notation(
            "e^{z}", "e^z", f"Exponentials e^(s − max s) of {shifted}")), (shifted,),
            s.rows, s.cols, **where(s))
    elif key == "shifted_exp_sum":
        g.add(f"{s.name}.{key}", KIND, ExpSums(Notation(
            r"\Sigma", "Σ", f"Sum of the exponentials of each row of {shifted}")), (shifted,),
            s.rows, ("Σ",), **where(s))


def _sum(g: Derivation, name: str, s: Stage) -> None:
    """The sum a row mean divides by d: of its input (a mean), of the squares (a
    variance's (x_j − μ)², a mean square's x_j²: ``S.squares`` added first)."""
    if s.op.name == "mean":
        source, what = s.inputs[0], "Σ_j x_j"
    else:  # S.squares: added first by symformer.blocks.side_stages.add_side_stage
        source = f"{s.name}.squares"
        what = "Σ_j (x_j − μ)²" if s.op.name == "variance" else "Σ_j x_j²"
    g.add(name, KIND, RowSum(Notation(r"\Sigma", "Σ", f"{what}, the sum inside {s.name}")),
          (source,), s.rows, ("Σ",), **where(s))


def _norm_part(g: Derivation, name: str, s: Stage, key: str) -> None:
    """x − μ or σ² + ε of a LayerNorm, ⟨x²⟩ + ε of an RMSNorm (the norm's own ε)."""
    x = g[s.inputs[0]]
    if key == "centred":
        g.add(name, KIND, Centred(Notation(r"x - \mu", "x − μ", f"Centred values of {x.name}")),
              tuple(s.inputs[:2]), x.rows, x.cols, **where(s))
        return
    if s.op.name == "normalize" and s.op.unbiased:
        raise InputError(f"{name}: {s.name} is an unbiased LayerNorm (its denominator is "
                         f"the unbiased standard deviation, with no ε under the root)")
    source = g[s.inputs[2] if key == "variance_eps" else s.inputs[1]]
    symbol = "σ²" if key == "variance_eps" else "⟨x²⟩"
    latex = r"\sigma^2 + \epsilon" if key == "variance_eps" else r"\langle x^2\rangle + \epsilon"
    g.add(name, KIND, Affine(1, s.op.eps, 1, Notation(latex, f"{symbol} + ε",
                                                      f"{source.name} plus ε")),
          (source.name,), source.rows, source.cols, **where(s))


def _sinusoid(g: Derivation, name: str, s: Stage, key: str) -> None:
    """base^(2i/d) (1 × d/2) or the angles pos / base^(2i/d) (n × d/2)."""
    op = s.op
    if op.kind != "sinusoidal":
        raise InputError(f"{name}: {s.name} is not sinusoidal, so it has no {key}")
    half = (op.d_model + 1) // 2
    cols = tuple(f"i{i}" for i in range(half))
    base = sympy.Rational(op.base)
    if key == "divisors":
        value = sympy.Matrix(1, half, lambda _, i: base ** sympy.Rational(2 * i, op.d_model))
        _constant(g, name, s, value, Notation(r"10000^{2i/d}", "10000^(2i/d)",
                                              f"The divisors of {s.name}"), ("divisor",), cols)
        return
    value = sympy.Matrix(op.n, half, lambda p, i: p * base ** sympy.Rational(-2 * i, op.d_model))
    _constant(g, name, s, value, Notation(r"\omega", "ω", f"The angles pos/10000^(2i/d) of "
                                                          f"{s.name}"), s.rows, cols,
              by_token=True)


def _dot_stage(g: Derivation, name: str) -> bool:
    match = _DOT.fullmatch(name)
    if not match or f"grad.{match['stage']}" not in g:
        return False
    s = needed(g, name, "dot", match["stage"])
    grad = f"grad.{s.name}"
    g.add(name, KIND, RowDot(Notation(r"\Sigma", "Σ", f"Σ_j α_j ∂L/∂α_j of each row of "
                                                      f"{s.name}")),
          (s.name, grad), s.rows, ("Σ",), **where(s))
    return True


def _step_stage(g: Derivation, name: str) -> bool:
    match = _STEP.fullmatch(name)
    if not match:
        return False
    step, key, weight = match["step"], match["key"], match["weight"]
    if key == "sgd_update":
        source = f"{step}.{weight}"
        if source not in g:
            return False
        s = g[source]
        if s.op.name != "sgd_step" or s.op.lr == 0:
            raise InputError(f"{name}: {source} is not an SGD step (the run's optimizer is "
                             f"not sgd, or the weight is frozen)")
        g.add(name, "optimizer_state", Affine(s.op.lr, 0, 1, Notation(
            r"\eta g", "η g", f"lr times the gradient of {weight}"), optimizer_state=True),
              (s.inputs[1],), s.rows, s.cols, **where(s))
        return True
    moment = key.rsplit("_", 1)[0]
    source = f"{step}.{moment}.{weight}"
    if source not in g:
        return False
    s = g[source]
    beta, power = s.op.beta, s.op.power
    m = "m" if power == 1 else "v"
    b = "β₁" if power == 1 else "β₂"
    if key.endswith("_kept"):
        notation = Notation(rf"\beta {m}", f"{b} {m}", f"{b} {m}_(t-1) of {weight}")
        if len(s.inputs) == 1:  # step 1: m_0 = 0
            value = sympy.zeros(*s.shape)
            g.add(name, "optimizer_state", ConstantTable(value, notation, optimizer_state=True),
                  (), s.rows, s.cols, **where(s))
        else:
            g.add(name, "optimizer_state", Affine(beta, 0, 1, notation, optimizer_state=True),
                  (s.inputs[0],), s.rows, s.cols, **where(s))
        return True
    g.add(name, "optimizer_state", Affine(1 - beta, 0, power, Notation(
        rf"(1 - \beta) g{'^2' if power == 2 else ''}", f"(1 − {b}) g{'²' if power == 2 else ''}",
        f"The gradient's part of {m}_t of {weight}"), optimizer_state=True), (s.inputs[-1],),
        s.rows, s.cols, **where(s))
    return True


def _correction_stage(g: Derivation, name: str) -> bool:
    match = _CORRECTION.fullmatch(name)
    if not match:
        return False
    steps = [s for s in g if s.name.startswith(match["step"] + ".")
             and s.op.name == "adam_step"]
    if not steps:
        return False
    op, k = steps[0].op, match["k"]
    beta = op.beta1 if k == "1" else op.beta2
    b = "β₁" if k == "1" else "β₂"
    notation = Notation(rf"1 - \beta_{k}^t", f"1 − {b}^t",
                        f"Adam's bias correction 1 − {b}^t at step {op.t}")
    g.add(name, CONSTANT_KIND, ConstantTable(sympy.Matrix([[1 - beta ** op.t]]), notation), (),
          (f"1 − {b}^t",), ("value",))  # the step's, not one weight's
    return True
