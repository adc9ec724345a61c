"""Each sub-layer in matrix form, as textbooks write it, before its index form.

``Q = X W_Q``, ``A = softmax(Q K^T / sqrt(d_k) + M)``, ``O = A V``, ``[O^(1) ... O^(h)]
W_O``, ``F = act(Y W_1 + b_1) W_2 + b_2``, ``Y = LayerNorm(R)``: one :class:`Line`
per stage a textbook names, its right-hand side a small expression tree over the
stages (as matrices: one row per token) and the operations' weights.  The same tree
prints the LaTeX (:func:`latex`) and is what a test evaluates, with its own NumPy, on
the example's weights, to compare with the stage at every entry
(tests/test_matrix_form.py): every displayed matrix equation is checked.

The tree is built from the stage graph (an attention weight's line walks back from the
softmax to the query and key it reads); a stage no line names (a row mean, a raw dot
product) is folded into the line that uses it.  Nothing here computes a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from symformer.engine import Stage
from symformer.notation import capital, notation, parameter
from symformer.registry import refuse


@dataclass(frozen=True)
class Ref:
    """A stage as a matrix (row i: token i)."""

    stage: str


@dataclass(frozen=True)
class Weight:
    """A weight of a stage's operation (``op.parameters()[name]``)."""

    stage: str
    name: str


@dataclass(frozen=True)
class MatMul:
    """``left @ right``."""

    left: object
    right: object


@dataclass(frozen=True)
class Sum:
    """``a + b + ...`` (a one-row bias is added to every row)."""

    terms: tuple


@dataclass(frozen=True)
class Transpose:
    """``arg`` transposed."""

    arg: object


@dataclass(frozen=True)
class Scores:
    """``Q K^T`` divided by ``sqrt(d_k)`` (``scale`` None), by ``scale`` or not at all
    (1), plus the causal mask's -inf where ``masked`` (the scores stage says where).
    Another score function's raw scores (not ``Q K^T``) are its stage, a :class:`Ref`."""

    product: object
    stage: str  # the scale-and-mask stage


@dataclass(frozen=True)
class RowSoftmax:
    """Softmax of each row."""

    arg: object


@dataclass(frozen=True)
class Apply:
    """An elementwise function (``stage``'s operation: ReLU, GELU, SiLU, ...)."""

    stage: str
    arg: object


@dataclass(frozen=True)
class Hadamard:
    """Entrywise product."""

    left: object
    right: object


@dataclass(frozen=True)
class Columns:
    """Matrices side by side (the heads' outputs concatenated)."""

    parts: tuple


@dataclass(frozen=True)
class RowNorm:
    """A normalisation of each row (LayerNorm, RMSNorm, ...: the operation's declared
    ``norm_label``), with the norm stage's own weights and ε."""

    stage: str
    arg: object


@dataclass(frozen=True)
class Rotate:
    """RoPE: each pair of columns of row m turned by position m's angle."""

    stage: str
    arg: object


@dataclass(frozen=True)
class Line:
    """``stage`` (as a matrix) equals ``rhs``."""

    stage: str
    rhs: object


def symbol(stage: Stage) -> str:
    """The stage as a matrix: its row symbol's letter as a capital (``q^{(1)}`` ->
    ``Q^{(1)}``, ``\\alpha`` -> ``A``, ``\\pi`` -> ``\\Pi``, ``\\tilde{k}`` ->
    ``\\tilde{K}``, ``\\breve{m}`` -> ``\\breve{M}``; an FFN activation's ``a`` ->
    ``\\tilde{H}``: :func:`symformer.notation.capital`)."""
    latex = notation(stage).latex
    m = re.match(r"(\\(?:tilde|bar|hat|breve)\{)?(\\alpha|\\pi|[a-z])(\})?(.*)$",
                 latex)  # q̄: Q̄
    if m is None:
        return latex
    letter = {r"\alpha": "A", r"\pi": r"\Pi"}.get(m.group(2)) or capital(stage, m.group(2))
    return f"{m.group(1) or ''}{letter}{m.group(3) or ''}{m.group(4)}"


def lines(stage: Stage) -> list[Line]:
    """The matrix-form lines of ``stage`` (none for a stage a textbook does not name:
    it is folded into the line of the stage that reads it)."""
    g, op = stage.derivation, stage.op
    if op.matrix_form == "affine" and op.role in ("queries", "keys", "values"):
        return [Line(stage.name, _affine(stage, Ref(stage.inputs[0])))]
    if op.matrix_form == "rotate":
        return [Line(stage.name, Rotate(stage.name, Ref(stage.inputs[0])))]
    if op.matrix_form == "softmax" and op.columns == "keys":  # attention weights
        scores = g[stage.inputs[0]]
        if scores.op.matrix_form != "scores":
            return []
        raw = g[scores.inputs[0]]
        if raw.op.matrix_form == "dot_products":
            q, k = raw.inputs
            product: object = MatMul(Ref(q), Transpose(Ref(k)))
        else:  # another score function: its scores as a matrix, said in the remark
            product = Ref(raw.name)
        return [Line(stage.name, RowSoftmax(Scores(product, scores.name)))]
    if op.matrix_form == "product":  # a head's weighted sum of the values
        a, v = stage.inputs
        return [Line(stage.name, MatMul(Ref(a), Ref(v)))]
    if op.matrix_form == "affine" and op.role == "heads":
        concat = g[stage.inputs[0]]
        if concat.op.matrix_form != "columns":
            return []
        heads = Columns(tuple(Ref(name) for name in concat.inputs))
        return [Line(stage.name, _affine(stage, heads))]
    if op.matrix_form == "sum" and op.residual:
        return [Line(stage.name, Sum(tuple(Ref(name) for name in stage.inputs)))]
    if op.norm_keys:  # any normalisation: its declared name (none declared: refused)
        return [Line(stage.name, RowNorm(stage.name, Ref(stage.inputs[0])))]
    if op.matrix_form == "affine" and op.role == "ffn_output":
        inner = _ffn_inner(g[stage.inputs[0]])
        return [] if inner is None else [Line(stage.name, _affine(stage, inner))]
    if op.matrix_form == "softmax":  # over the vocabulary (or the classes)
        logits = g[stage.inputs[0]]
        if logits.op.matrix_form != "affine":
            return []
        return [Line(stage.name, RowSoftmax(_affine(logits, Ref(logits.inputs[0]))))]
    return []


def _affine(stage: Stage, arg: object) -> object:
    """``arg W (+ b)`` with the stage's projection weight and bias."""
    op = stage.op
    names = [n for n, v in op.parameters().items() if v is not None]
    product = MatMul(arg, Weight(stage.name, names[0]))
    return Sum((product, Weight(stage.name, names[1]))) if len(names) > 1 else product


def _ffn_inner(activation: Stage) -> object | None:
    """The FFN's activation as a tree over its input: ``act(Y W_1 + b_1)``, or a gated
    ``SiLU(Y W_gate) ⊙ (Y W_1)``."""
    g = activation.derivation
    if activation.op.matrix_form == "hadamard":
        gate, hidden = (g[n] for n in activation.inputs)
        return Hadamard(Apply(activation.name, _affine(gate, Ref(gate.inputs[0]))),
                        _affine(hidden, Ref(hidden.inputs[0])))
    if activation.op.matrix_form == "identity" or len(activation.inputs) != 1:
        return None
    hidden = g[activation.inputs[0]]
    if hidden.op.matrix_form != "affine":
        return None
    return Apply(activation.name, _affine(hidden, Ref(hidden.inputs[0])))


def latex(node: object, g) -> str:
    """A tree as LaTeX, over the derivation ``g``'s stages."""
    if isinstance(node, Ref):
        return symbol(g[node.stage])
    if isinstance(node, Weight):
        return parameter(g[node.stage], node.name).latex
    if isinstance(node, MatMul):
        return f"{_factor(node.left, g)} {_factor(node.right, g)}"
    if isinstance(node, Sum):
        return " + ".join(latex(t, g) for t in node.terms)
    if isinstance(node, Transpose):
        inner = latex(node.arg, g)
        return f"{inner}^{{\\top}}" if "^" not in inner else \
            f"\\bigl({inner}\\bigr)^{{\\top}}"
    if isinstance(node, Scores):
        op = g[node.stage].op
        product = latex(node.product, g)
        if op.scale is None:
            product = f"\\frac{{{product}}}{{\\sqrt{{d_{{k}}}}}}"
        elif op.scale != 1:
            product = f"\\frac{{{product}}}{{\\tau}}"
        return product + (" + \\mathcal{M}" if op.masked else "")
    if isinstance(node, RowSoftmax):
        return f"\\operatorname{{softmax}}\\Bigl({latex(node.arg, g)}\\Bigr)"
    if isinstance(node, Apply):
        op = g[node.stage].op
        op = op.activation if op.gates else op
        name = op.name if op.function_name is None else op.function_name
        return f"\\operatorname{{{name}}}\\bigl({latex(node.arg, g)}\\bigr)"
    if isinstance(node, Hadamard):
        return f"{latex(node.left, g)} \\odot \\bigl({latex(node.right, g)}\\bigr)"
    if isinstance(node, Columns):
        return "\\bigl[\\," + " \\;\\; ".join(latex(p, g) for p in node.parts) + "\\,\\bigr]"
    if isinstance(node, RowNorm):
        op = g[node.stage].op
        if op.norm_label is None:
            raise refuse("normalisation", op.norm_keys[0], "the matrix form",
                         "norm_label (its function's name)")
        return f"\\operatorname{{{op.norm_label}}}\\bigl({latex(node.arg, g)}\\bigr)"
    if isinstance(node, Rotate):
        return f"\\operatorname{{RoPE}}\\bigl({latex(node.arg, g)}\\bigr)"
    raise TypeError(f"no LaTeX for {type(node).__name__}")


def _factor(node: object, g) -> str:
    text = latex(node, g)
    return f"\\bigl({text}\\bigr)" if isinstance(node, Sum) else text


def remark(line: Line, g) -> str:
    """What a line's functions do, as LaTeX after the formula (row-wise softmax, the
    causal mask's entries, what the norm does), or ``""``."""
    node = line.rhs
    words = ""
    own = ""
    if isinstance(node, RowSoftmax) and isinstance(node.arg, Scores) \
            and isinstance(node.arg.product, Ref):  # a score function other than Q K^T
        raw = g[node.arg.product.stage]
        own = (rf"{symbol(raw)}\text{{: {raw.op.symbol.title.lower()}, "
               rf"in index form below; }}")
    if isinstance(node, RowSoftmax) and isinstance(node.arg, Scores) \
            and g[node.arg.stage].op.masked:
        return (r"\quad \text{(softmax of each row; }" + own + r"\mathcal{M}_{ij} = 0"
                r"\text{ for } j \le i,\ -\infty \text{ for } j > i\text{)}")
    if own:
        return r"\quad \text{(softmax of each row; }" + own.removesuffix("; }") + ")}"
    if isinstance(node, RowSoftmax):
        words = "softmax of each row"
    if isinstance(node, RowNorm):
        words = g[node.stage].op.norm_remark
    if isinstance(node, Rotate):
        words = "each pair of columns of row i turned by the angle of position i"
    return rf"\quad \text{{({words})}}" if words else ""


def equation_lines(stages: list[Stage], shapes: bool = False) -> tuple[tuple[str, str], ...]:
    """The (lhs, rhs) display lines of the stages' matrix forms, in order; ``shapes``:
    each line ends with its matrix's shape (``Q^{(1)} \\in \\mathbb{R}^{4 \\times 2}``)
    where the line has room for it (:func:`shape_latex`)."""
    from symformer.latex.render import TEXT_WIDTH
    from symformer.worked.render_latex import width

    out = []
    for stage in stages:
        g = stage.derivation
        for line in lines(stage):
            text = remark(line, g)
            lhs = symbol(g[line.stage])
            rhs = latex(line.rhs, g) + (f" {text}" if text else "")
            shape = rf" \qquad {shape_latex(g[line.stage])}"
            if shapes and width(f"{lhs} = {rhs}{shape}") <= TEXT_WIDTH:
                rhs += shape
            out.append((lhs, rhs))
    return tuple(out)


def shape_latex(stage: Stage) -> str:
    """A stage as a matrix with its shape: ``Q^{(1)} \\in \\mathbb{R}^{4 \\times 2}``."""
    rows, cols = stage.shape
    return rf"{symbol(stage)} \in \mathbb{{R}}^{{{rows} \times {cols}}}"


def _named(node: object) -> list[object]:
    """The stages and weights a tree names, left to right."""
    if isinstance(node, (Ref, Weight)):
        return [node]
    if isinstance(node, (Sum, Columns)):
        parts = node.terms if isinstance(node, Sum) else node.parts
        return [x for part in parts for x in _named(part)]
    if isinstance(node, (MatMul, Hadamard)):
        return _named(node.left) + _named(node.right)
    if isinstance(node, Scores):
        return _named(node.product)
    return _named(node.arg) if hasattr(node, "arg") else []


def shapes(stages: list[Stage]) -> tuple[tuple[str, int, int], ...]:
    """Every matrix the stages' matrix-form lines name, once, with its shape (rows,
    columns), in the order a reader meets them: each line's left-hand side, then what
    its right-hand side reads (``Q ∈ ℝ^{4×2}``, ``X ∈ ℝ^{4×4}``, ``W_Q ∈ ℝ^{4×2}``)."""
    out: dict[str, tuple[int, int]] = {}
    for stage in stages:
        g = stage.derivation
        for line in lines(stage):
            for node in [Ref(line.stage), *_named(line.rhs)]:
                if isinstance(node, Ref):
                    name, shape = symbol(g[node.stage]), g[node.stage].shape
                else:
                    value = g[node.stage].op.parameters()[node.name]
                    name, shape = parameter(g[node.stage], node.name).latex, value.shape
                out.setdefault(name, tuple(shape))
    return tuple((name, rows, cols) for name, (rows, cols) in out.items())


# --- the backward pass in matrix form -------------------------------------------------
#
# A gradient stage sums its consumers' rules (``Gradient.terms``: each consumer's
# operation, which input or weight it differentiates by, its arity); each rule has the
# matrix form every textbook prints, keyed by the consumer's declared ``matrix_form``
# (or its ``trace_step`` for an elementwise activation, its registry ``name`` for a
# loss).  Norms keep their index form only (their matrix form is no shorter).


def grad(latex_symbol: str) -> str:
    """``∂L/∂X`` as a display fraction."""
    return rf"\frac{{\partial L}}{{\partial {latex_symbol}}}"


def terms(stage: Stage):
    """Each consumer term of a gradient stage: (operation's term, consumer, its inputs,
    the consumer's gradient stage)."""
    g, names, k = stage.derivation, stage.inputs, 0
    for term in getattr(stage.op, "terms", ()):
        inputs = names[k:k + term.arity]
        consumer, upstream = names[k + term.arity], names[k + term.arity + 1]
        k += term.arity + 2
        yield term, g[consumer], inputs, upstream


def cross_entropy_logits(stage: Stage) -> str | None:
    """``(P - Y)/n`` when ``stage`` is the gradient at the logits of the probabilities a
    cross-entropy loss reads: the softmax and the loss in one line."""
    g = stage.derivation
    loss = g.example.loss
    if loss is None or loss.kind != "cross_entropy":
        return None
    for _, consumer, _, upstream in terms(stage):
        if consumer.op.matrix_form != "softmax":
            return None
        readers = [t for t in terms(g[upstream])]
        if not readers or any(c.op.name != "cross_entropy" for _, c, _, _ in readers):
            return None
        p = symbol(consumer)
        scale = "" if loss.reduction == "sum" else r"\frac{1}{n}\,"
        return rf"{scale}\bigl({p} - Y\bigr)"
    return None


def _rule(term, consumer: Stage, inputs: tuple[str, ...], upstream: str) -> str | None:
    """One consumer's rule in matrix form, or None where there is none to print."""
    g, op, wrt = consumer.derivation, consumer.op, term.wrt
    up = grad(symbol(consumer))
    ref = [symbol(g[n]) for n in inputs]
    form = op.matrix_form
    if form == "affine":
        names = [n for n, v in op.parameters().items() if v is not None]
        if wrt == 0:
            return rf"{up}\, {_t(parameter(consumer, names[0]).latex)}"
        if wrt == names[0]:
            return rf"{_t(ref[0])}\, {up}"
        return rf"\mathbf{{1}}^{{\top}} {up}"  # a bias: the sum of the rows
    if form == "product":
        return rf"{up}\, {_t(ref[1])}" if wrt == 0 else rf"{_t(ref[0])}\, {up}"
    if form == "dot_products":
        return rf"{up}\, {ref[1]}" if wrt == 0 else rf"\Bigl({up}\Bigr)^{{\top}} {ref[0]}"
    if form == "scores":
        if op.scale is None:
            return rf"\frac{{1}}{{\sqrt{{d_{{k}}}}}}\, {up}"
        return rf"\frac{{1}}{{\tau}}\, {up}" if op.scale != 1 else up
    if form in ("sum", "identity"):
        return up
    if op.name == "embedding" and isinstance(wrt, str):
        return (rf"\Pi^{{\top}} {up} \quad \text{{(}}\Pi\text{{: the tokens one-hot, "
                r"one row per position)}")
    if form == "columns":
        return rf"\Bigl({up}\Bigr)_{{\text{{columns of }} {ref[wrt]}}}"
    if form == "rotate" and wrt == 0:
        return rf"\operatorname{{RoPE}}^{{-1}}\Bigl({up}\Bigr)"
    if form == "softmax" and wrt == 0:
        a = symbol(consumer)
        return (rf"{a} \odot \Bigl({up} - \operatorname{{rowsum}}\bigl({a} \odot {up}\bigr)"
                r"\Bigr) \quad \text{(rowsum: a row's sum, taken from each of its entries)}")
    if op.trace_step == "activation" and form is None and wrt == 0:
        if op.clips:
            return rf"{up} \odot \mathbb{{1}}\bigl[{ref[0]} > 0\bigr]"
        name = op.name if op.function_name is None else op.function_name
        return rf"{up} \odot \operatorname{{{name}}}'\bigl({ref[0]}\bigr)"
    if op.name == "mse" and wrt == 0:
        loss = g.example.loss
        if loss.reduction == "sum":
            return rf"2\,\bigl({ref[0]} - T\bigr)"
        return (rf"\frac{{2}}{{c}}\,\bigl({ref[0]} - T\bigr) \quad \text{{(}}c"
                r"\text{: the number of entries with a target)}")
    return None


def _t(latex_symbol: str) -> str:
    return f"{latex_symbol}^{{\\top}}" if not set("^'") & set(latex_symbol) else \
        f"\\bigl({latex_symbol}\\bigr)^{{\\top}}"


def backward_lines(stage: Stage) -> tuple[tuple[str, str], ...]:
    """A gradient stage in matrix form: ``∂L/∂X`` (or ``∂L/∂W`` for a weight) equals
    the sum of its consumers' rules, each as a textbook writes it (``∂L/∂W_Q = X^T
    ∂L/∂Q``, ``∂L/∂V = A^T ∂L/∂O``); no line when a rule has none (a norm's)."""
    g = stage.derivation
    found = list(terms(stage))
    if not found:
        return ()
    if stage.op.of_weight:
        term, consumer, _, _ = found[0]
        lhs = grad(parameter(consumer, term.wrt).latex)
    else:
        lhs = grad(symbol(g[stage.name.removeprefix("grad.")]))
    one_line = cross_entropy_logits(stage)
    if one_line is not None:
        return ((lhs, one_line),)
    rules = [_rule(*t) for t in found]
    if not rules or any(r is None for r in rules):
        return ()
    return ((lhs, " + ".join(rules)),)
