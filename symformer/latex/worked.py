"""Worked examples: a formula, the same formula with one token's numbers, the result.

Each substitution line is built from the inputs' certified decimals (or their
short closed forms with ``exact``) and the example's exact weights -- never
re-derived from the result.  Intermediate numbers that are not stage entries
(the exponentials and their sum in a softmax) are rounded with certified ball
arithmetic too.  One builder per stage kind, registered in :data:`_BUILDERS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import flint

from symformer.engine import Stage
from symformer.engine.rounding import certified_rounding
from symformer.errors import ClosedFormTooLarge
from symformer.latex import numbers
from symformer.latex.blocks import Step, Worked
from symformer.latex.escape import word_label
from symformer.latex.render import bmatrix
from symformer.latex.tables import VOCAB_KINDS
from symformer.ops import GELU

#: The letter of a stage kind's entries in worked examples.
LETTERS = {
    "embeddings": "e", "positional_encoding": r"\mathrm{PE}", "input": "x", "Q": "q",
    "K": "k", "V": "v", "raw_scores": r"s^{\text{raw}}", "scores": "s", "weights": "a",
    "head_output": "o", "concat": "c", "attention_output": "m", "residual": "y",
    "mean": r"\mu", "variance": r"\sigma^2", "layer_norm": "z", "ffn_hidden": "h",
    "ffn_activation": "r", "ffn_output": "f", "output": "z", "logits": r"\ell",
    "probabilities": "p",
}
#: Rough width (in characters of visible math) after which a long sum wraps.
LINE_WIDTH = 56
_COMMAND = re.compile(r"\\(left|right)|\\[A-Za-z]+|[{}^_]")


@dataclass(frozen=True)
class Style:
    """How numbers are shown: certified decimals, or short closed forms (``exact``)."""

    decimals: int = 2
    exact: bool = False
    max_ops: int = 12


def _letter(stage: Stage) -> str:
    return LETTERS.get(stage.kind, r"\mathrm{v}")


def _sub(base: str, index: str) -> str:
    """``base_{index}``, bracing a base that already has a superscript."""
    return f"{{{base}}}_{{{index}}}" if "^" in base else f"{base}_{{{index}}}"


class Numbers:
    """The entries of one stage as math, memoised: closed form or certified decimal."""

    def __init__(self, stage: Stage, style: Style) -> None:
        self.stage, self.style = stage, style
        self._values = stage.values(decimals=style.decimals)

    def text(self, i: int, j: int) -> str:
        """The certified decimal string."""
        return self._values[i][j]

    def __call__(self, i: int, j: int) -> str:
        return numbers.entry(self.stage, i, j, self.style.decimals,
                             self.style.max_ops if self.style.exact else None, self._values)[0]

    def result(self, i: int, j: int) -> tuple[tuple[str, str], ...]:
        """The result's relations: ``= closed form`` (if short and asked) then ``≈ decimal``."""
        decimal = numbers.decimal(self.text(i, j))
        if self.style.exact:
            try:
                form = self.stage.closed_form(i, j, max_ops=self.style.max_ops)
            except ClosedFormTooLarge:
                pass
            else:
                if form.is_Rational:
                    return (("=", numbers.exact(form)),)
                if form.is_finite is not False:
                    return (("=", numbers.exact(form)), (r"\approx", decimal))
        return ((r"\approx", decimal),) if decimal != r"-\infty" else (("=", decimal),)


def factor(value: str) -> str:
    """A value as a factor of a product: bracketed unless a plain non-negative number."""
    plain = value.replace(".", "").isdigit()
    return value if plain else rf"\left({value}\right)"


def width(latex: str) -> int:
    """A rough visible width of math: command names and braces count as nothing or one."""
    return len(_COMMAND.sub(lambda m: "" if m.group(1) or len(m.group()) == 1 else "x",
                            latex).replace(" ", ""))


def join_terms(terms: list[str]) -> str:
    """A sum of terms, ``a - b`` for negative terms, wrapped when a line grows too wide."""
    out, line = "", 0
    for k, term in enumerate(terms):
        line += width(term) + 1
        if k and line > LINE_WIDTH:
            out += r" \\ &\qquad"
            line = width(term)
        if k == 0:
            out += term
        elif term.startswith("-"):
            out += " - " + term[1:]
        else:
            out += " + " + term
    return out or "0"


def bracket(terms: list[str]) -> str:
    """A wrapped sum in parentheses: ``\\left(``/``\\right)`` cannot span the line break
    :func:`join_terms` may insert, so a wrapped sum gets ``\\Bigl(``/``\\Bigr)``."""
    body = join_terms(terms)
    if r"\\" in body:
        return rf"\Bigl({body}\Bigr)"
    return rf"\left({body}\right)"


def certified(fn: Callable[[int], flint.arb], decimals: int, where: str) -> str:
    """A derived quantity's certified decimal: ``fn(prec)`` is its ball at ``prec`` bits.

    ``where`` names the quantity in a warning or error (an undecided rounding).
    """
    return certified_rounding(fn, where, decimals=decimals).fixed()


Builder = Callable[[Stage, int, Style], list[Step]]
_BUILDERS: dict[str, Builder] = {}


def builder(*kinds: str) -> Callable[[Builder], Builder]:
    """Register the worked example of the given stage kinds."""
    def register(fn: Builder) -> Builder:
        for kind in kinds:
            _BUILDERS[kind] = fn
        return fn
    return register


def worked_example(stage: Stage, token: int, style: Style | None = None) -> Worked | None:
    """The worked example of ``stage`` for the token at position ``token``."""
    fn = _BUILDERS.get(stage.kind)
    return Worked(tuple(fn(stage, token, style or Style()))) if fn else None


def _inputs(stage: Stage, style: Style) -> list[Numbers]:
    g = stage.derivation
    return [Numbers(g[name], style) for name in stage.inputs]


def _row(numbers_: Numbers, i: int) -> str:
    return bmatrix(((*(numbers_(i, j) for j in range(numbers_.stage.shape[1])),),))


@builder("embeddings")
def _embeddings(stage: Stage, i: int, style: Style) -> list[Step]:
    example = stage.derivation.example
    side = example.decoder if stage.side == "decoder" else example
    ident = side.token_ids[i]
    table = r"E_{\text{dec}}" if stage.side == "decoder" else "E"
    out = Numbers(stage, Style(style.decimals, exact=True, max_ops=style.max_ops))
    return [Step("e", (("=", rf"{table}[\operatorname{{id}}(t_{{{i}}})]"),
                       ("=", f"{table}[{ident}]"), ("=", _row(out, i))))]


@builder("positional_encoding")
def _pe(stage: Stage, i: int, style: Style) -> list[Step]:
    out, d = Numbers(stage, style), stage.shape[1]
    steps = []
    for j in range(d):
        fn, even = (r"\sin", j - j % 2) if j % 2 == 0 else (r"\cos", j - j % 2)
        steps.append(Step(rf"\mathrm{{PE}}_{{({i},\,{j})}}", (
            ("=", rf"{fn}\left(\frac{{{i}}}{{10000^{{{even}/{d}}}}}\right)"),
            *out.result(i, j))))
    return steps


@builder("input", "residual")
def _add(stage: Stage, i: int, style: Style) -> list[Step]:
    a, b = _inputs(stage, style)
    out = Numbers(stage, style)
    la, lb, lo = _letter(a.stage), _letter(b.stage), _letter(stage)
    return [Step(_sub(lo, str(j + 1)), (
        ("=", f"{_sub(la, str(j + 1))} + {_sub(lb, str(j + 1))}"),
        ("=", join_terms([a(i, j), b(i, j)])), *out.result(i, j)))
        for j in range(stage.shape[1])]


@builder("output")
def _output(stage: Stage, i: int, style: Style) -> list[Step]:
    (x,) = _inputs(stage, style)
    return [Step("z", (("=", rf"{_letter(x.stage)}^{{(L)}}"), ("=", _row(x, i))))]


@builder("Q", "K", "V", "attention_output", "ffn_hidden", "ffn_output", "logits")
def _affine(stage: Stage, i: int, style: Style) -> list[Step]:
    (x,) = _inputs(stage, style)[:1]
    out = Numbers(stage, style)
    lx, lo = _letter(x.stage), _letter(stage)
    W, b = getattr(stage.op, "W", None), getattr(stage.op, "b", None)
    name = {"Q": "W_Q", "K": "W_K", "V": "W_V", "attention_output": "W_O",
            "ffn_hidden": "W_1", "ffn_output": "W_2",
            "logits": r"W_{\text{vocab}}"}.get(stage.kind, "W")
    bias = {"ffn_hidden": "b_1", "ffn_output": "b_2"}.get(stage.kind, "b")
    steps = []
    for j in range(stage.shape[1]):
        if W is None:  # identity: the entry is carried over
            symbolic, numeric = [_sub(lx, str(j + 1))], [x(i, j)]
        else:
            used = [k for k in range(W.rows) if W[k, j] != 0]
            symbolic = [f"{_sub(lx, str(k + 1))} ({name})_{{{k + 1},{j + 1}}}" for k in used]
            numeric = [rf"{factor(x(i, k))} \cdot {factor(numbers.weight(W[k, j]))}"
                       for k in used]
            if b is not None and b[j] != 0:
                symbolic.append(f"({bias})_{{{j + 1}}}")
                numeric.append(numbers.weight(b[j]))
        steps.append(Step(_sub(lo, str(j + 1)), (
            ("=", join_terms(symbolic)), ("=", join_terms(numeric)), *out.result(i, j))))
    return steps


@builder("raw_scores")
def _raw(stage: Stage, i: int, style: Style) -> list[Step]:
    q, k = _inputs(stage, style)
    out = Numbers(stage, style)
    steps = []
    for j in range(stage.shape[1]):
        width = q.stage.shape[1]
        symbolic = [f"q_{{{c + 1}}} k_{{{j},{c + 1}}}" for c in range(width)]
        numeric = [rf"{factor(q(i, c))} \cdot {factor(k(j, c))}" for c in range(width)]
        steps.append(Step(_sub(_letter(stage), str(j)), (
            ("=", join_terms(symbolic)), ("=", join_terms(numeric)), *out.result(i, j))))
    return steps


@builder("scores")
def _scores(stage: Stage, i: int, style: Style) -> list[Step]:
    (raw,) = _inputs(stage, style)
    out = Numbers(stage, style)
    d_k = stage.op.d_k
    steps = []
    for j in range(stage.shape[1]):
        lhs = _sub("s", str(j))
        if (i, j) in stage.op.masked and stage.op.mask_value is None:
            steps.append(Step(lhs, (("=", r"-\infty \quad (\text{masked: } j > i)"),)))
            continue
        numeric = rf"\frac{{{raw(i, j)}}}{{\sqrt{{{d_k}}}}}"
        chain = [("=", rf"\frac{{{_sub(raw.stage and _letter(raw.stage), str(j))}}}"
                       rf"{{\sqrt{{d_k}}}}"), ("=", numeric)]
        if (i, j) in stage.op.masked:
            chain[-1] = ("=", numeric + " + " + numbers.weight(stage.op.mask_value))
        steps.append(Step(lhs, (*chain, *out.result(i, j))))
    return steps


def column_index(stage: Stage, j: int) -> str:
    """Column ``j``'s subscript: the key position, or the vocabulary word."""
    if stage.kind in VOCAB_KINDS:
        return word_label(stage.cols[j])
    return str(j)


@builder("weights", "probabilities")
def _softmax(stage: Stage, i: int, style: Style) -> list[Step]:
    scores = stage.derivation[stage.inputs[0]]
    s = Numbers(scores, style)
    out = Numbers(stage, style)
    live = [j for j in range(stage.shape[1]) if s.text(i, j) != "-inf"]
    ls, lo = _letter(scores), _letter(stage)

    def at(j: int) -> str:
        return column_index(stage, j)

    def ball(j: int) -> Callable[[int], flint.arb]:
        return lambda prec: scores.balls(prec)[i][j].exp()

    def total(prec: int) -> flint.arb:
        return sum((scores.balls(prec)[i][j].exp() for j in live), flint.arb(0))

    exps = {j: certified(ball(j), style.decimals, f"exp({scores.name}[{i},{j}])") for j in live}
    sigma = certified(total, style.decimals, f"the sum of exp({scores.name}[{i},k]) over k")
    steps = [Step(r"\Sigma", (
        ("=", join_terms([rf"e^{{{_sub(ls, at(j))}}}" for j in live])),
        ("=", join_terms([rf"e^{{{s(i, j)}}}" for j in live])),
        (r"\approx", join_terms([exps[j] for j in live])),
        (r"\approx", sigma)))]
    for j in range(stage.shape[1]):
        if j not in live:
            steps.append(Step(_sub(lo, at(j)), (("=", r"0 \quad (\text{masked})"),)))
            continue
        steps.append(Step(_sub(lo, at(j)), (
            ("=", rf"\frac{{e^{{{_sub(ls, at(j))}}}}}{{\Sigma}}"),
            (r"\approx", rf"\frac{{{exps[j]}}}{{{sigma}}}"), *out.result(i, j))))
    return steps


@builder("head_output")
def _weighted_sum(stage: Stage, i: int, style: Style) -> list[Step]:
    a, v = _inputs(stage, style)
    out = Numbers(stage, style)
    keys = range(a.stage.shape[1])
    return [Step(_sub("o", str(c + 1)), (
        ("=", join_terms([f"a_{{{j}}} v_{{{j},{c + 1}}}" for j in keys])),
        ("=", join_terms([rf"{factor(a(i, j))} \cdot {factor(v(j, c))}" for j in keys])),
        *out.result(i, c))) for c in range(stage.shape[1])]


@builder("concat")
def _concat(stage: Stage, i: int, style: Style) -> list[Step]:
    heads = _inputs(stage, style)
    parts = ", ".join(rf"\mathrm{{head}}_{{{h + 1}}}[{i}]" for h in range(len(heads)))
    return [Step("c", (("=", rf"\left[{parts}\right]"), ("=", _row(Numbers(stage, style), i))))]


@builder("mean")
def _mean(stage: Stage, i: int, style: Style) -> list[Step]:
    (x,) = _inputs(stage, style)[:1]
    out, d = Numbers(stage, style), x.stage.shape[1]
    lx = _letter(x.stage)
    return [Step(r"\mu", (
        ("=", rf"\frac{{1}}{{{d}}}{bracket([_sub(lx, str(j + 1)) for j in range(d)])}"),
        ("=", rf"\frac{{1}}{{{d}}}{bracket([x(i, j) for j in range(d)])}"),
        *out.result(i, 0)))]


@builder("variance")
def _variance(stage: Stage, i: int, style: Style) -> list[Step]:
    x, mu = _inputs(stage, style)
    out, d = Numbers(stage, style), x.stage.shape[1]
    n = d - 1 if stage.op.unbiased else d
    lx = _letter(x.stage)
    lhs = "s^2" if stage.op.unbiased else r"\sigma^2"
    symbolic = [rf"({_sub(lx, str(j + 1))} - \mu)^2" for j in range(d)]
    numeric = [rf"\left({x(i, j)} - {factor(mu(i, 0))}\right)^2" for j in range(d)]
    return [Step(lhs, (
        ("=", rf"\frac{{1}}{{{n}}}{bracket(symbolic)}"),
        ("=", rf"\frac{{1}}{{{n}}}{bracket(numeric)}"),
        *out.result(i, 0)))]


@builder("std")
def _std(stage: Stage, i: int, style: Style) -> list[Step]:
    """sigma = sqrt(sigma^2 + eps) (issue 10's stage; the generic worked lines replace it)."""
    (var,) = _inputs(stage, style)
    eps = numbers.weight(stage.op.eps)
    return [Step(stage.op.symbol.latex, (
        ("=", rf"\sqrt{{{var.stage.op.symbol.latex} + {eps}}}"),
        ("=", rf"\sqrt{{{var(i, 0)} + {eps}}}"), *Numbers(stage, style).result(i, 0)))]


@builder("layer_norm")
def _layer_norm(stage: Stage, i: int, style: Style) -> list[Step]:
    x, mu, var = _inputs(stage, style)
    op = stage.op
    out = Numbers(stage, style)
    lx = _letter(x.stage)
    eps = numbers.weight(op.eps)
    steps = []
    for j in range(stage.shape[1]):
        if op.unbiased:
            root, numeric_root = r"\sqrt{s^2} + \epsilon", rf"\sqrt{{{var(i, 0)}}} + {eps}"
        else:
            root, numeric_root = r"\sqrt{\sigma^2 + \epsilon}", rf"\sqrt{{{var(i, 0)} + {eps}}}"
        gamma, beta = numbers.weight(op.gamma[j]), numbers.weight(op.beta[j])
        steps.append(Step(_sub("z", str(j + 1)), (
            ("=", rf"\gamma_{{{j + 1}}} \frac{{{_sub(lx, str(j + 1))} - \mu}}{{{root}}}"
                  rf" + \beta_{{{j + 1}}}"),
            ("=", rf"{factor(gamma)} \cdot \frac{{{x(i, j)} - {factor(mu(i, 0))}}}"
                  rf"{{{numeric_root}}} + {factor(beta)}"),
            *out.result(i, j))))
    steps.append(Step("z", (("=", _row(out, i)),)))
    return steps


@builder("ffn_activation")
def _activation(stage: Stage, i: int, style: Style) -> list[Step]:
    (h,) = _inputs(stage, style)
    out = Numbers(stage, style)
    gelu = isinstance(stage.op, GELU)
    steps = []
    for j in range(stage.shape[1]):
        hj = _sub("h", str(j + 1))
        if gelu:
            formula, numeric = (
                rf"\frac{{{v}}}{{2}}\left(1 + \operatorname{{erf}}\frac{{{v}}}{{\sqrt 2}}\right)"
                for v in (hj, h(i, j)))
        else:
            formula, numeric = rf"\max(0, {hj})", rf"\max(0, {h(i, j)})"
        result = out.result(i, j)
        if not gelu and stage.derivation.sign(h.stage.name, i, j) <= 0:
            result = (("=", "0"),)  # certified: the input is not positive
        steps.append(Step(_sub("r", str(j + 1)), (("=", formula), ("=", numeric), *result)))
    return steps


@builder("next_token")
def _argmax(stage: Stage, i: int, style: Style) -> list[Step]:
    g = stage.derivation
    logits = Numbers(g[stage.inputs[0]], style)
    n = logits.stage.shape[0] - 1  # the last position
    letter = _letter(logits.stage)
    choice = g.next_token()
    words = [word_label(w) for w in choice.tokens]
    chosen = words[0] if len(words) == 1 else (
        r"\{" + ", ".join(words) + r"\} \quad (\text{exact tie})")
    best = choice.indices[0]
    return [Step(_sub(letter, str(n)), (("=", _row(logits, n)),)),
            Step(r"\hat{t}", (("=", r"\arg\max_{w} " + _sub(letter, f"{n},w")),
                              ("=", chosen))),
            Step(_sub(letter, f"{n},{column_index(stage, best)}"),
                 (("=", r"\max_{w} " + _sub(letter, f"{n},w")),
                  *logits.result(n, best)))]
