"""The one table of function names: how each is written (LaTeX, text), read and evaluated.

An equation calls functions: the fixed mathematical ones (``exp``, ``log``, ``tanh``,
``erf``, ...), the row-wise ones a claim may write (``softmax``, ``rowsum``, ``diag``),
and the FFN activations.  Every place that names a function reads this table: the index
language of :mod:`symformer.equations.ir` (which names an operation's equation may
call), the printers (:mod:`.latex`, :mod:`.text`: ``\\exp``, ``\\mathrm{erf}``,
``tanh(...)``) and the claim reader (:mod:`symformer.verify.latex_math`: the macros,
``\\operatorname{..}`` words and bare words it reads as a call) with the claim
evaluator (:mod:`symformer.verify.equation_eval`: each function's certified value).

The activations are not listed here: each declares its name
(``Operation.function_name``, ``\\operatorname{ReLU}``) and the other spellings authors
use (``function_aliases``: ``relu``, ``Swish``) in its own module, and
:func:`functions` reads them from the registry -- so an activation registered at run
time (``\\operatorname{ReLU^2}``) is read back by ``check`` as ``export`` prints it, and
evaluated by the operation's own certified balls.  A name claimed twice keeps its first
meaning (the fixed table, then the activations in listing order: ``GELU`` is the exact
GELU, not its tanh approximation, which also prints as GELU).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from flint import arb

from symformer import registry


@dataclass(frozen=True)
class Function:
    """One function: its key (the evaluator's name), how it prints and how it is read.

    ``latex`` is its printed name (``\\exp``, ``\\mathrm{erf}``); ``operator`` says it
    is set like an operator (``\\exp x``, brackets only around what needs them, as
    latexify sets its built-in functions) rather than always with its argument in
    brackets; ``text`` the terminal spelling.  ``macros`` are the backslash names a
    claim may write it with (``\\ln``), ``words`` the names inside
    ``\\operatorname{..}``/``\\mathrm{..}``/``\\text{..}``, ``bare`` the names written
    without a backslash before ``(`` (``sin(x)``), ``symbols`` the symbols read as it
    when the notation does not bind them (``\\sigma(x)``, ``\\Phi``), ``brackets`` the
    names read as it before ``[..]`` (a row's statistic: ``E[x]``, ``\\mathrm{Var}[x]``).
    ``index``: an operation's index equation may call it.  ``derivative``: the key of
    its derivative (``\\tanh'(x)``).
    """

    key: str
    latex: str = ""
    text: str = ""
    operator: bool = False
    macros: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    bare: tuple[str, ...] = ()
    index: bool = False
    derivative: str | None = None
    symbols: tuple[str, ...] = ()
    brackets: tuple[str, ...] = ()
    #: SymPy's function of the same name, for an operation's equation instantiated
    #: exactly (``Max`` for ``max``); "": none
    sympy: str = ""


def _f(key: str, latex: str = "", *, operator: bool = False, macros: tuple[str, ...] = (),
       words: tuple[str, ...] = (), bare: tuple[str, ...] = (), index: bool = False,
       derivative: str | None = None, symbols: tuple[str, ...] = (),
       brackets: tuple[str, ...] = ()) -> Function:
    sympy_name = {"max": "Max"}.get(key, key) if index else ""
    return Function(key, latex or rf"\mathrm{{{key}}}", key, operator, macros, words, bare,
                    index, derivative, symbols, brackets, sympy_name)


#: The fixed functions, in the order a lookup tries them.
FIXED: tuple[Function, ...] = (
    _f("exp", r"\exp", operator=True, macros=("exp",), words=("exp",), bare=("exp",),
       index=True, derivative="exp"),
    _f("log", r"\log", operator=True, macros=("log", "ln"), words=("log",),
       bare=("log", "ln"), index=True, derivative="d_log"),
    _f("sqrt", r"\sqrt", macros=("sqrt",), bare=("sqrt",), index=True),
    _f("tanh", r"\tanh", operator=True, macros=("tanh",), words=("tanh",), bare=("tanh",),
       index=True, derivative="d_tanh"),
    _f("sin", r"\sin", operator=True, macros=("sin",), words=("sin",), bare=("sin",),
       index=True, derivative="cos"),
    _f("cos", r"\cos", operator=True, macros=("cos",), words=("cos",), bare=("cos",),
       index=True),
    _f("erf", words=("erf",), bare=("erf",), index=True, derivative="d_erf"),
    _f("max", r"\max", words=("max",), bare=("max",), index=True),
    _f("softmax", r"\operatorname{softmax}", words=("softmax",), bare=("softmax",)),
    _f("sigmoid", words=("sigmoid",), bare=("sigmoid",), derivative="d_sigmoid",
       symbols=("sigma",)),
    _f("normal_cdf", r"\Phi", symbols=("Phi",), derivative="normal_pdf"),
    _f("normal_pdf", r"\phi", symbols=("phi",)),
    _f("mean", symbols=("mean",), brackets=("E", "mean")),  # each row's: a column
    _f("var", r"\mathrm{Var}", symbols=("Var",), brackets=("Var",)),
    _f("rms", r"\mathrm{RMS}", symbols=("RMS",), brackets=("RMS", "rms")),
    _f("concat", r"\operatorname{Concat}", words=("Concat", "concat")),
    _f("rowsum", r"\operatorname{rowsum}", words=("rowsum",)),
    _f("rowmax", r"\operatorname{rowmax}", words=("rowmax",)),
    _f("diag", r"\operatorname{diag}", words=("diag",)),
    _f("abs", r"\operatorname{abs}", words=("abs",)),  # |x|, as the claim reader reads it
)
#: The index language's reduction and its range, callable in an operation's equation.
INDEX_ONLY = frozenset({"sum", "range"})
#: The prefix of the key of an activation's derivative evaluated by its operation's
#: declared slope (``\\operatorname{ReLU^2}'(x)``).
_DERIVATIVE = "d/"
#: The activations' keys whose value is written out here (the others are evaluated by
#: their operation), with their derivatives' keys.
_ACTIVATION_DERIVATIVES = {"relu": "d_relu", "gelu": "d_gelu", "silu": "d_silu"}


def _activation_functions() -> list[Function]:
    """Each activation's function, under its declared names (registry order)."""
    out = []
    for key, cls in registry.activations().items():
        name = cls.name if cls.function_name is None else cls.function_name
        if not name:  # the identity: no function is written
            continue
        names = (name, *cls.function_aliases)
        derivative = _ACTIVATION_DERIVATIVES.get(key) or (
            _DERIVATIVE + key if callable(getattr(cls, "slope", None)) else None)
        out.append(Function(key, rf"\operatorname{{{name}}}", name, False, (), names,
                            tuple(n for n in names if n.isalpha()), False, derivative))
    return out


@dataclass(frozen=True)
class Table:
    """The functions by key and by each way of writing them (first claim wins)."""

    by_key: Mapping[str, Function]
    by_macro: Mapping[str, Function]
    by_word: Mapping[str, Function]
    by_bare: Mapping[str, Function]
    by_symbol: Mapping[str, Function]
    by_bracket: Mapping[str, Function]


@lru_cache(maxsize=8)
def _table(operations: tuple[type, ...]) -> Table:
    by_key: dict[str, Function] = {}
    ways: tuple[dict[str, Function], ...] = ({}, {}, {}, {}, {})
    for fn in (*FIXED, *_activation_functions()):
        by_key.setdefault(fn.key, fn)
        for names, into in zip((fn.macros, fn.words, fn.bare, fn.symbols, fn.brackets),
                               ways):
            for name in names:
                into.setdefault(name, fn)
    return Table(by_key, *ways)


def functions() -> Table:
    """The table as the registry has it now (an activation registered later is in it)."""
    return _table(tuple(registry.OPERATIONS.values()))


def index_functions() -> frozenset[str]:
    """The functions an operation's index equation may call (``exp``, ..., ``sum``)."""
    return frozenset({fn.key for fn in FIXED if fn.index} | INDEX_ONLY)


def printed(key: str) -> Function:
    """The function ``key`` an equation calls, to print it; an unknown one raises (a
    printer never guesses a name)."""
    fn = functions().by_key.get(key)
    if fn is None:
        raise ValueError(f"no function {key!r} in the function table")
    return fn


# -- values (the claim evaluator's) --------------------------------------------------
def _normal_pdf(x: arb) -> arb:
    return (-x * x / 2).exp() / (2 * arb.pi()).sqrt()


def _normal_cdf(x: arb) -> arb:
    return (1 + (x / arb(2).sqrt()).erf()) / 2


def _sigmoid(x: arb) -> arb:
    return 1 / (1 + (-x).exp())


#: Each fixed element-wise function's certified value (and the derivatives' keys').
VALUES: dict[str, Callable[[arb], arb]] = {
    "exp": lambda x: x.exp(), "log": lambda x: x.log(), "sqrt": lambda x: x.sqrt(),
    "tanh": lambda x: x.tanh(), "sin": lambda x: x.sin(), "cos": lambda x: x.cos(),
    "relu": lambda x: x.max(arb(0)), "erf": lambda x: x.erf(), "abs": abs,
    "sigmoid": _sigmoid, "silu": lambda x: x / (1 + (-x).exp()),
    "gelu": lambda x: x * (1 + (x / arb(2).sqrt()).erf()) / 2,
    "normal_cdf": _normal_cdf, "normal_pdf": _normal_pdf,
    "d_gelu": lambda x: _normal_cdf(x) + x * _normal_pdf(x),
    "d_silu": lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    "d_sigmoid": lambda x: _sigmoid(x) * (1 - _sigmoid(x)),
    "d_tanh": lambda x: 1 - x.tanh() * x.tanh(),
    "d_log": lambda x: 1 / x, "d_erf": lambda x: 2 * (-x * x).exp() / arb.pi().sqrt(),
}


def activation_of(key: str) -> tuple[type | None, bool]:
    """The registered activation a function key is evaluated by (None: none), and
    whether the key is its derivative (``\\operatorname{ReLU^2}'``: its declared
    slope) -- the claim evaluator applies the operation's own balls."""
    derivative = key.startswith(_DERIVATIVE)
    return registry.activations().get(key.removeprefix(_DERIVATIVE)), derivative
