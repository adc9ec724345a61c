"""A small, strict LaTeX-math grammar: an author's equation as a tree, never ``eval``.

:func:`parse_equations` reads the math of one ``equation``/``align``/``$$`` block into
:class:`Chain` objects: a left-hand side and one or more right-hand sides (``a = b =
c`` is the chain a = b, a = c; an ``align`` line starting ``&=`` continues the line
before).  The tokenizer and the recursive-descent parser are this module's own; a
macro or character outside the grammar is an :class:`InputError` naming it and its
column ("cannot read \\foo at column 12"), never a guess.

The grammar (docs/verify.md, "Equations"):

* numbers ``2``, ``0.5`` (read exactly), symbols: a letter, a Greek macro, an accent
  (``\\tilde\\sigma``, ``\\hat x``), ``\\mathrm{PE}``/``\\text{pos}``/``\\mathcal{L}``,
  each with a subscript (``q_{i,c}``, ``q_{ic}``, ``W_Q``), a superscript (``^{(1)}``,
  ``^2``, ``^\\top``, ``^T``) and primes;
* ``+ - \\cdot \\times \\odot /``, juxtaposition, ``\\frac{}{}``, ``^``, ``\\sqrt{}``,
  ``\\exp``, ``e^{}``, ``\\log``, ``\\ln``, ``\\tanh``, ``\\sin``, ``\\cos``, ``\\max``
  (``\\max(0, h)`` or ``\\max_j s_j``), ``\\operatorname{softmax}``,
  ``\\mathrm{ReLU}``;
* ``\\sum_{j=0}^{n-1}``, ``\\sum_{j=1}^{n}``, ``\\sum_{j}``, ``\\sum_{j,k}``;
* indicators ``\\mathbb{1}[\\cdot]``, ``\\mathbf{1}\\{\\cdot\\}``, ``[j \\le i]`` and
  ``\\delta_{jk}``;
* gradients ``\\frac{\\partial L}{\\partial x_{ij}}``, ``\\partial L/\\partial x_{ij}``
  and ``dK`` (a ``d`` written against a capital letter);
* layout, ignored: ``\\left \\right \\bigl \\Bigr`` ..., ``\\, \\! \\; \\quad``, ``&``,
  ``\\\\`` (a new line), ``\\begin{align}``/``\\end{align}`` (and equation, aligned,
  split), ``\\label{..}``, ``\\nonumber``, a final ``.`` or ``,``.

Input is bounded: :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH` nested groups.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from fractions import Fraction

from symformer.equations.functions import functions
from symformer.equations.tree import FONTS as _FONTS
from symformer.equations.tree import (  # the nodes (lm.Sym, ...): read from here too
    GREEK,
    Arguments,
    Binary,
    Call,
    Cases,
    Compare,
    Indicator,
    Matrix,
    Node,
    Num,
    Ones,
    Reduce,
    Subscripted,
    Sym,
    Token,
    Transpose,
    Unary,
)
from symformer.equations.tree import text_of as _text
from symformer.errors import InputError

#: The longest equation read (characters).
MAX_LENGTH = 20_000
#: The most digits of one number (a subscript, an exponent, a constant).
MAX_DIGITS = 100
_DIGITS = frozenset("0123456789")
#: The deepest nesting of groups, brackets and operators (counted per grammar level:
#: about three per parenthesis).
MAX_DEPTH = 150

#: The symbol ``\\ldots`` (``\\dots``, ``\\cdots``) reads as: a run of items (Concat's).
ELLIPSIS = "..."
#: Words set between two equations of one line (``, \\quad \\text{where} ...``).
_SEPARATORS = ("where", "with", "and", "for")
#: Macros that only set spacing or size.
_IGNORED = frozenset({",", "!", ";", ":", " ", "quad", "qquad", "left", "right", "bigl",
                      "bigr", "Bigl", "Bigr", "big", "Big", "bigg", "Bigg", "biggl", "biggr",
                      "Biggl", "Biggr", "middle", "displaystyle", "limits", "nonumber",
                      "notag", "textstyle", "scriptstyle", "scriptscriptstyle", "enspace",
                      "thinspace", "medspace", "thickspace", "negthinspace", "nolimits"})
#: Macros that set spacing with an argument (``\hspace{1em}``) or a label (``\tag{3}``):
#: skipped with their group.
_IGNORED_WITH_GROUP = frozenset({"hspace", "vspace", "tag", "phantom", "hphantom",
                                 "vphantom", "label"})
#: What separates a left-hand side from its right: ``=``, an update arrow (``\leftarrow``,
#: ``\gets``: the right-hand side reads the symbol's value before the update), ``:=``.
_ARROWS = ("\\leftarrow", "\\gets", "\\longleftarrow")
#: an approximate equality (GELU's tanh form): judged exactly, and when it fails the
#: relative tolerance within which it holds is named
_APPROX = ("\\approx", "\\simeq")
_EQUALS = ("=", ":=", "\\coloneqq", "\\triangleq", "\\doteq", *_ARROWS, *_APPROX)
_MATRICES = ("bmatrix", "pmatrix", "matrix", "Bmatrix")
_ENVIRONMENTS = frozenset({"equation", "equation*", "align", "align*", "aligned", "split",
                           "gather", "gather*"})
_ACCENTS = frozenset({"tilde", "hat", "bar", "widetilde", "widehat", "overline"})
#: Bold (and arrowed) letters: a token's whole row as a vector.
_BOLD = frozenset({"mathbf", "boldsymbol", "bm", "vec"})
_COMPARISONS = {"<": "<", ">": ">", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=",
                "lt": "<", "gt": ">", "ne": "!=", "neq": "!=", "=": "=="}
_OPEN = {"(": ")", "[": "]", "\\{": "\\}", "\\lbrace": "\\rbrace", "\\lbrack": "\\rbrack"}
#: A superscript saying where a symbol sits: its layer, head (``(1)``, ``(1,2)``).
_MARKER = re.compile(r"^\((\d+(?:,\d+)*)\)$")
_TRANSPOSE = frozenset({"T", "\\top", "\\intercal", "\\mathsf{T}", "\\mathrm{T}", "t"})


def fail(what: str, col: int) -> InputError:
    """The one-line error for what cannot be read at ``col``."""
    return InputError(f"cannot read {what} at column {col}")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` (comments after an unescaped ``%`` dropped)."""
    if len(text) > MAX_LENGTH:
        raise InputError(f"the equation is {len(text):,} characters long; at most "
                         f"{MAX_LENGTH:,} are read")
    out: list[Token] = []
    k, spaced = 0, False
    while k < len(text):
        c = text[k]
        col = k + 1
        if c in " \t\r\n~":
            spaced, k = True, k + 1
            continue
        if c == "%":  # a comment to the end of the line
            while k < len(text) and text[k] != "\n":
                k += 1
            continue
        if c in _DIGITS or (c == "." and k + 1 < len(text) and text[k + 1] in _DIGITS):
            end = k
            while end < len(text) and text[end] in _DIGITS:
                end += 1
            if end < len(text) - 1 and text[end] == "." and text[end + 1] in _DIGITS:
                end += 1
                while end < len(text) and text[end] in _DIGITS:
                    end += 1
            if end - k > MAX_DIGITS:
                raise InputError(f"cannot read the number at column {col}: "
                                 f"{end - k:,} digits (at most {MAX_DIGITS} are read)")
            out.append(Token("num", text[k:end], col, spaced))
            k = end
        elif c.isascii() and c.isalpha():
            out.append(Token("letter", c, col, spaced))
            k += 1
        elif c == "\\":
            end = k + 1
            while end < len(text) and text[end].isascii() and text[end].isalpha():
                end += 1
            if end == k + 1:
                end = min(k + 2, len(text))
            out.append(Token("macro", text[k:end], col, spaced))
            k = end
        elif c == ":" and k + 1 < len(text) and text[k + 1] == "=":
            out.append(Token("char", ":=", col, spaced))
            k += 2
        elif c in "+-*/^_{}()[]=<>',&|.!:;":
            out.append(Token("char", c, col, spaced))
            k += 1
        elif c == "\u2212":
            out.append(Token("char", "-", col, spaced))
            k += 1
        else:
            raise fail(_character(c), col)
        spaced = False
    return out


def _character(c: str) -> str:
    """A character outside the grammar as a message names it: ``'²' (SUPERSCRIPT TWO:
    write ^{2})``; a Unicode digit (``١``, ``１``, ``𝟙``) is never read as a number."""
    name = unicodedata.name(c, f"U+{ord(c):04X}")
    if "SUPERSCRIPT" in name and unicodedata.digit(c, None) is not None:
        return f"{c!r} ({name}: write ^{{{unicodedata.digit(c)}}})"
    if "SUBSCRIPT" in name and unicodedata.digit(c, None) is not None:
        return f"{c!r} ({name}: write _{{{unicodedata.digit(c)}}})"
    if unicodedata.digit(c, None) is not None or unicodedata.numeric(c, None) is not None:
        return f"{c!r} ({name}: only the digits 0-9 are read)"
    return repr(c)


# -- a block's lines (the nodes: symformer.equations.tree) ----------------------------
@dataclass(frozen=True)
class Chain:
    """One line of a derivation: ``lhs = rhs[0] = rhs[1] ...`` (``line``: 1-based,
    within the block)."""

    lhs: Node
    rhs: tuple[Node, ...]
    line: int = 1
    #: written with an update arrow (``\\theta \\leftarrow \\theta - \\eta g``)
    update: bool = False
    #: written with ``\\approx`` (or ``\\simeq``): an approximation
    approx: bool = False


# -- the parser -----------------------------------------------------------------------
class Parser:
    """Recursive descent over the tokens of one block (see the module doc)."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.k = 0
        self.depth = 0
        self.in_cases = False  # inside a case distinction, & ends a value

    # helpers
    def peek(self, ahead: int = 0) -> Token | None:
        k = self.k + ahead
        return self.tokens[k] if k < len(self.tokens) else None

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise InputError("cannot read the equation: it ends too early")
        self.k += 1
        return t

    def at(self, *texts: str) -> bool:
        t = self.peek()
        return t is not None and t.text in texts and t.kind in ("char", "macro")

    def expect(self, text: str) -> Token:
        t = self.peek()
        if t is None:
            raise InputError(f"cannot read the equation: expected {text} at the end")
        if t.text != text:
            raise fail(f"{t.text} (expected {text})", t.col)
        self.k += 1
        return t

    def skip_layout(self) -> None:
        while True:
            t = self.peek()
            if t is None:
                return
            if t.kind == "macro" and t.text[1:] in _IGNORED:
                self.k += 1
            elif t.kind == "macro" and t.text[1:] in _IGNORED_WITH_GROUP \
                    and t.text != "\\label":
                self.k += 1
                self.raw_group()
            elif t.kind == "macro" and t.text in ("\\mathopen", "\\mathclose"):
                self.k += 1
                if self.raw_group():
                    raise fail(f"{t.text} with content", t.col)
            elif t.kind == "macro" and t.text in ("\\begin", "\\end", "\\label"):
                if t.text != "\\label" and _text(self.peek_group(1)) in (
                        "cases", "array", *_MATRICES):
                    return
                self.k += 1
                name = self.raw_group()
                if t.text != "\\label" and _text(name) not in _ENVIRONMENTS:
                    raise fail(f"\\begin{{{_text(name)}}}", t.col)
            elif t.kind == "char" and t.text == "&" and not self.in_cases:
                self.k += 1
            else:
                return

    def enter(self, col: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InputError(f"cannot read the equation: nested more than {MAX_DEPTH} "
                             f"deep at column {col}")

    def raw_group(self) -> tuple[Token, ...]:
        """The tokens of ``{...}`` (balanced) or of one token."""
        self.skip_layout()
        t = self.next()
        if t.text != "{" or t.kind != "char":
            return (t,)
        out, level = [], 1
        while True:
            u = self.next()
            if u.kind == "char" and u.text == "{":
                level += 1
                if level > MAX_DEPTH:
                    raise InputError(f"cannot read the equation: nested more than "
                                     f"{MAX_DEPTH} deep at column {u.col}")
            elif u.kind == "char" and u.text == "}":
                level -= 1
                if level == 0:
                    return tuple(out)
            out.append(u)

    # the grammar
    def block(self) -> list[Chain]:
        """Every line of the block as a chain."""
        chains: list[Chain] = []
        line = 1
        while True:
            self.skip_layout()
            if self.peek() is None:
                break
            if self.at("\\\\"):
                self.k += 1
                line += 1
                continue
            if self.label():
                continue
            update = approx = False
            if self.at(*_EQUALS):  # `&= ...` continues the line before
                if not chains:
                    raise fail("= (no left-hand side before it)", self.peek().col)
                lhs, rhs = chains[-1].lhs, []
            else:
                lhs, rhs = self.expression(), []
            while True:
                self.skip_layout()
                if not self.at(*_EQUALS):
                    break
                update = update or self.at(*_ARROWS)
                approx = approx or self.at(*_APPROX)
                self.k += 1
                rhs.append(self.expression())
            self.skip_layout()
            separated = self.at(".", ",")
            if separated:
                self.k += 1
                self.skip_layout()
            separated = self.separator_word() or separated
            t = self.peek()
            if t is not None and not self.at("\\\\") and not separated:
                raise fail(t.text, t.col)
            if not rhs:
                raise InputError(f"cannot read line {line} of the equation: no '='")
            chains.append(Chain(lhs, tuple(rhs), line, update, approx))
            if t is not None and not self.at("\\\\"):  # `, \quad RMS(x) = ...`: one more
                line += 1
        if not chains:
            raise InputError("cannot read the equation: it is empty")
        return chains

    def label(self) -> bool:
        """A text label before the equation (``\\text{ADAM:}``, ``\\textbf{Update}:``):
        skipped."""
        t = self.peek()
        if t is None or t.text not in ("\\text", "\\textbf", "\\textit", "\\mathrm",
                                       "\\mathbf", "\\textrm", "\\textsc"):
            return False
        said = _text(self.peek_group(1)).strip()
        saved = self.k
        self.k += 1
        self.raw_group()
        if said.endswith(":") and len(said) > 1:
            return True
        self.skip_layout()
        if said and said.replace(" ", "").isalnum() and self.at(":"):
            self.k += 1
            return True
        self.k = saved
        return False

    def separator_word(self) -> bool:
        """``\\text{where}`` (with, and, for) between two equations of one line: taken."""
        t = self.peek()
        if t is None or t.text not in ("\\text", "\\mathrm", "\\textrm") \
                or _text(self.peek_group(1)).strip() not in _SEPARATORS:
            return False
        self.k += 1
        self.raw_group()
        self.skip_layout()
        return True

    def expression(self) -> Node:
        """Terms joined by + and -."""
        self.skip_layout()
        t = self.peek()
        col = t.col if t else 0
        self.enter(col)
        if self.at("-"):
            self.k += 1
            node: Node = Unary(self.term(), col=col)
        else:
            if self.at("+"):
                self.k += 1
            node = self.term()
        terms: list[tuple[str, Node]] = [("+", node)]
        while True:
            self.skip_layout()
            if self.at("+", "-"):
                op = self.next().text
                terms.append((op, self.term()))
            else:
                break
        self.depth -= 1
        return _sum_tree(terms, col)

    def term(self) -> Node:
        """Products joined by ⊙, which binds less tightly than a product written or
        juxtaposed (``\\mathrm{SiLU}(xW) \\odot xV`` is SiLU(xW) ⊙ (xV))."""
        self.skip_layout()
        t = self.peek()
        col = t.col if t else 0
        node = self.product()
        while True:
            self.skip_layout()
            if self.at("\\odot", "\\circ"):
                self.k += 1
                node = Binary("odot", node, self.product(), col=col)
            else:
                return node

    def product(self) -> Node:
        """Factors joined by products (written or juxtaposed) and /."""
        self.skip_layout()
        t = self.peek()
        col = t.col if t else 0
        self.enter(col)
        if self.at("-"):  # a sign inside a product: \cdot -x
            self.k += 1
            node: Node = Unary(self.factor(), col=col)
        else:
            node = self.factor()
        while True:
            self.skip_layout()
            if self.at("\\cdot", "\\times", "*"):
                self.k += 1
                node = Binary("*", node, self.factor(), col=col)
            elif self.at("\\otimes"):  # u ⊗ v: the outer (Kronecker) product
                self.k += 1
                node = Binary("otimes", node, self.factor(), col=col)
            elif self.at("/") or (self.at(".") and (u := self.peek(1)) is not None
                                  and u.text == "/" and not u.spaced):  # ./ entry by entry
                self.k += 1 if self.at("/") else 2
                node = Binary("/", node, self.factor(), col=col)
            elif self.starts_factor():
                node = Binary("jux", node, self.factor(), col=col)
            else:
                break
        self.depth -= 1
        return node

    def starts_factor(self) -> bool:
        t = self.peek()
        if t is None:
            return False
        if t.kind in ("num", "letter"):
            return True
        if t.kind == "char":
            return t.text in "([{|"
        if t.text in ("\\text", "\\mathrm", "\\textrm") \
                and _text(self.peek_group(1)).strip() in _SEPARATORS:
            return False
        if t.text in _EQUALS:
            return False
        return t.text not in ("\\\\", "\\cdot", "\\times", "\\odot", "\\circ", "\\right",
                              "\\otimes", "\\rvert",
                              "\\}", "\\rbrace", "\\rbrack", "\\le", "\\leq", "\\ge",
                              "\\geq", "\\lt", "\\gt", "\\ne", "\\neq", "\\end")

    def factor(self) -> Node:
        """An atom with its scripts; ``^`` binds tighter than products."""
        self.skip_layout()
        t = self.peek()
        grouped = t is not None and t.kind == "char" and t.text in "({"
        node = self.atom()
        while True:
            if self.at("^"):
                t = self.next()
                sup = self.raw_group()
                if grouped and isinstance(node, Sym) and _MARKER.match(_text(sup)):
                    # {\sigma^2}^{(1)}: layer 1's σ², the superscript marks where
                    node = Sym(node.base, node.sub, (*(node.sup or ()), *sup), node.primes,
                               node.grad, node.bold, col=node.col)
                    continue
                if grouped and isinstance(node, Sym) and node.sup and _text(sup) == "2" \
                        and _MARKER.match(_text(node.sup)) \
                        and node.base.rstrip(")").rpartition("(")[2] == "sigma":
                    # (\sigma^{(1)}_{i})^{2}: layer 1's σ² (export's form, \hat{\sigma}
                    # too: an unbiased variance), one symbol
                    node = Sym(node.base, node.sub, (*sup, *node.sup), node.primes,
                               node.grad, node.bold, col=node.col)
                    continue
                if _text(sup) in _TRANSPOSE:
                    node = Transpose(node, _text(sup), col=t.col)
                else:
                    node = Binary("pow", node, self.sub_expression(sup, t.col), col=t.col)
            elif self.at("_") and (grouped or not isinstance(node, Sym)):
                t = self.next()
                node = Subscripted(node, self.raw_group(), col=t.col)
            else:
                return node

    def sub_expression(self, tokens: tuple[Token, ...], col: int) -> Node:
        """A script's tokens as an expression."""
        inner = Parser(list(tokens))
        inner.depth = self.depth
        node = inner.expression()
        inner.skip_layout()
        rest = inner.peek()
        if rest is not None:
            raise fail(rest.text, rest.col)
        if not tokens:
            raise fail("an empty group", col)
        return node

    def group_expression(self) -> Node:
        """``{expr}`` or a single factor."""
        self.skip_layout()
        t = self.peek()
        if t is not None and t.kind == "char" and t.text == "{":
            return self.sub_expression(self.raw_group(), t.col)
        return self.factor()

    def atom(self) -> Node:  # noqa: C901 (one dispatch over the grammar's atoms)
        self.skip_layout()
        t = self.peek()
        if t is None:
            raise InputError("cannot read the equation: it ends too early")
        if t.kind == "num":
            self.k += 1
            return Num(Fraction(t.text), t.text if "." in t.text else "", col=t.col)
        if t.kind == "char" and t.text == "{":
            return self.sub_expression(self.raw_group(), t.col)
        if t.kind == "char" and t.text == "(":
            self.k += 1
            self.enter(t.col)
            node = self.expression()
            self.skip_layout()
            items = [node]
            while self.at(","):  # (Q, K, V): a name's arguments on a left-hand side
                self.k += 1
                items.append(self.expression())
                self.skip_layout()
            self.expect(")")
            self.depth -= 1
            if len(items) > 1:
                return Arguments(tuple(items), col=t.col)
            if isinstance(node, Binary) and node.op == "jux":
                node = replace(node, grouped=True)
            return node
        if t.kind == "char" and t.text == "[":
            self.k += 1
            if self.vector_ahead():  # [a, b]: a row of entries
                items = [self.expression()]
                while self.at(","):
                    self.k += 1
                    items.append(self.expression())
                    self.skip_layout()
                self.expect("]")
                return Matrix((tuple(items),), col=t.col)
            inner = self.condition("]", grouping=True)
            return Indicator(inner, col=t.col) if isinstance(inner, Compare) else inner
        if (t.kind == "char" and t.text == "|") or t.text == "\\lvert":
            return self.absolute(t)
        if t.kind == "letter":
            if t.text == "d" and (u := self.peek(1)) is not None and not u.spaced \
                    and (u.kind == "letter" or u.text[1:] in GREEK or u.text[1:] in _ACCENTS
                         or u.text[1:] in _BOLD):
                self.k += 1  # dK, d\alpha, dx: the gradient of K, α, x
                sym = self.symbol()
                return Sym(sym.base, sym.sub, sym.sup, sym.primes, True, col=t.col)
            word = self.bare_word()
            if word is not None:
                return word
            if t.text == "E" and (u := self.peek(1)) is not None and u.text == "[" \
                    and not u.spaced:  # E[x]: the expectation over the row
                self.k += 1
                return self.statistic(functions().by_bracket["E"].key, t)
            if t.text == "e" and self.at_euler():
                self.k += 1
                self.expect("^")
                return Call("exp", (self.sub_expression(self.raw_group(), t.col),), col=t.col)
            return self.symbol()
        if t.kind == "macro":
            return self.macro_atom(t)
        raise fail(t.text, t.col)

    def group_followed_by(self, ahead: int, text: str) -> bool:
        """Is the group starting ``ahead`` tokens on followed by ``text`` (a prime, ``[``)?"""
        saved = self.k
        self.k += ahead
        try:
            self.raw_group()
            return self.at(text)
        except InputError:
            return False
        finally:
            self.k = saved

    def statistic(self, name: str, t: Token) -> Node:
        """``E[x]``: each row's mean (``var``, ``rms`` likewise), after its name."""
        self.expect("[")
        inner = self.expression()
        self.skip_layout()
        self.expect("]")
        return Call(name, (inner,), col=t.col)

    def bare_word(self) -> Node | None:
        """A function name written without its backslash, ``sin(x)``, ``exp(x)``,
        ``max(0, x)``: letters standing together before ``(`` (or ``\\left(``)."""
        end = self.k
        while end < len(self.tokens) and self.tokens[end].kind == "letter" and (
                end == self.k or not self.tokens[end].spaced):
            end += 1
        word = "".join(u.text for u in self.tokens[self.k:end])
        after = self.tokens[end] if end < len(self.tokens) else None
        fn = functions().by_bare.get(word)
        name = fn.key if fn is not None else None
        if name is None or after is None or after.text not in ("(", "\\left", "^"):
            return None
        t = self.tokens[self.k]
        self.k = end
        if name == "max":
            return self.reduction("max", t)
        if name == "softmax":
            return Call(name, (self.argument(t),), col=t.col)
        if name == "sqrt":
            return Call("sqrt", (self.argument(t),), col=t.col)
        return self.function(name, t)

    def absolute(self, t: Token) -> Node:
        """``|x|`` (``\\lvert x \\rvert``): the absolute value, entry by entry (ALiBi's
        ``m |i - j|``); ``|V|`` of a bare symbol: the vocabulary's size."""
        close = "|" if t.text == "|" else "\\rvert"
        level, end = 0, self.k + 1
        while end < len(self.tokens):
            u = self.tokens[end]
            if u.kind == "char" and u.text in "([{":
                level += 1
            elif u.kind == "char" and u.text in ")]}":
                level -= 1
            elif u.text == close and level == 0:
                break
            end += 1
        else:
            raise fail(f"{t.text} without its closing {close}", t.col)
        inner = self.sub_expression(tuple(self.tokens[self.k + 1:end]), t.col)
        self.k = end + 1
        if isinstance(inner, Sym) and not (inner.sub or inner.sup or inner.grad
                                           or inner.primes):
            return Sym(f"|{inner.base}|", col=t.col)
        return Call("abs", (inner,), col=t.col)

    def at_euler(self) -> bool:
        """``e^{...}`` with no subscript: Euler's number to a power."""
        u = self.peek(1)
        return u is not None and u.text == "^"

    def macro_atom(self, t: Token) -> Node:  # noqa: C901
        name = t.text[1:]
        if name in ("frac", "dfrac", "tfrac"):
            self.k += 1
            return self.fraction(t)
        if name == "sqrt":
            self.k += 1
            self.skip_layout()
            if self.at("["):
                raise fail("\\sqrt[...] (only square roots)", t.col)
            return Call("sqrt", (self.group_expression(),), col=t.col)
        macro = functions().by_macro.get(name)
        if macro is not None and (u := self.peek(1)) is not None and u.text == "'":
            self.k += 2  # \tanh'(x): the derivative, applied to what follows
            return Sym(macro.key, primes=1, col=t.col)
        if macro is not None:
            self.k += 1
            return self.function(macro.key, t)
        if name in ("sum", "max"):
            self.k += 1
            return self.reduction(name, t)
        if name in ("ldots", "dots", "cdots"):  # only inside Concat(..): its items' run
            self.k += 1
            return Sym(ELLIPSIS, col=t.col)
        if name == "infty":
            self.k += 1
            return Sym("infty", col=t.col)
        if name == "partial":
            return self.slash_derivative(t)
        if name == "nabla":
            return self.nabla(t)
        if name in ("mathbb", "mathbf", "bm", "boldsymbol") and _text(self.peek_group(1)) == "1" \
                and self.ones_ahead():
            self.k += 1
            self.raw_group()
            return self.ones(t)
        if name in ("mathbb", "mathbf", "bm") and _text(self.peek_group(1)) in ("1", "I"):
            self.k += 1
            self.raw_group()
            return self.indicator(t)
        if name in ("operatorname", "mathrm", "text", "mathbb") and \
                _text(self.peek_group(1)) in functions().by_bracket \
                and self.group_followed_by(1, "["):  # \mathrm{Var}[x]: each row's
            self.k += 1
            return self.statistic(functions().by_bracket[_text(self.raw_group())].key, t)
        if name in ("operatorname", "mathrm", "text") and \
                _text(self.peek_group(1)) in functions().by_word \
                and self.group_followed_by(1, "'"):
            return self.symbol()  # \mathrm{GELU}'(x): its derivative (or a definition)
        if name in ("operatorname", "mathrm", "text") and \
                _text(self.peek_group(1)) in functions().by_word:
            self.k += 1
            fn = functions().by_word[_text(self.raw_group())].key
            if fn == "max":
                return self.reduction("max", t)
            if fn == "concat":  # Concat(head_1, ..., head_h): side by side
                arg = self.argument(t)
                return Call(fn, arg.items if isinstance(arg, Arguments) else (arg,),
                            col=t.col)
            return Call(fn, (self.argument(t),), col=t.col)
        if name == "mathrm" and _text(self.peek_group(1)) == "d":
            self.k += 1
            self.raw_group()
            sym = self.symbol()
            return Sym(sym.base, sym.sub, sym.sup, sym.primes, True, col=t.col)
        if name == "delta" and self.peek(1) is not None and self.peek(1).text == "_":
            return self.symbol()  # δ_{jk}: Kronecker's unless bound (decided on binding)
        if name in GREEK or name in _ACCENTS or name in _FONTS or name in _BOLD \
                or name == "langle":
            return self.symbol()
        if name in ("{", "lbrace") and self.begins(1, ("array", "cases")):
            self.k += 1
            return self.cases(t, closing=True)
        if name == "begin" and self.begins(0, ("cases",)):
            return self.cases(t, closing=False)
        if name == "begin" and self.begins(0, _MATRICES):
            return self.matrix(t)
        if name in ("{", "lbrace"):
            self.k += 1
            return Indicator(self.condition(_OPEN[t.text]), col=t.col)
        raise fail(t.text, t.col)

    def vector_ahead(self) -> bool:
        """Does the bracket just opened hold a comma at its own level (``[a, b]``)?"""
        level = 0
        for u in self.tokens[self.k:]:
            if u.kind == "char" and u.text in "([{":
                level += 1
            elif u.kind == "char" and u.text in ")}":
                level -= 1
            elif u.kind == "char" and u.text == "]":
                if level == 0:
                    return False
                level -= 1
            elif u.kind == "char" and u.text == "," and level == 0:
                return True
        return False

    def matrix(self, t: Token) -> Node:
        """``\\begin{bmatrix} a & b \\\\ c & d \\end{bmatrix}`` (pmatrix, matrix): its
        entries, row by row."""
        self.k += 1  # \begin
        self.raw_group()
        rows: list[list[Node]] = [[]]
        outer, self.in_cases = self.in_cases, True  # & separates entries
        while True:
            self.skip_layout()
            if self.at("\\end"):
                self.k += 1
                self.raw_group()
                break
            if self.at("&"):
                self.k += 1
                continue
            if self.at("\\\\"):
                self.k += 1
                rows.append([])
                continue
            if self.peek() is None:
                raise fail("a matrix without \\end", t.col)
            rows[-1].append(self.expression())
        self.in_cases = outer
        rows = [r for r in rows if r]
        if not rows or len({len(r) for r in rows}) != 1:
            raise fail("a matrix whose rows differ in length", t.col)
        return Matrix(tuple(tuple(r) for r in rows), col=t.col)

    def begins(self, ahead: int, names: tuple[str, ...]) -> bool:
        """Is the token ``ahead`` on a ``\\begin{NAME}`` of one of ``names``?"""
        t = self.peek(ahead)
        return t is not None and t.text == "\\begin" and _text(self.peek_group(ahead + 1)) \
            in names

    def cases(self, t: Token, closing: bool) -> Node:
        """``\\left\\{ \\begin{array}{ll} a, & \\mathrm{if}\\ c \\\\ b, &
        \\mathrm{otherwise} \\end{array} \\right.`` (or ``\\begin{cases}``)."""
        self.k += 1  # \begin
        name = _text(self.raw_group())
        if name == "array":
            self.raw_group()  # the column spec {ll}
        rows: list[tuple[Node, Node | None]] = []
        outer, self.in_cases = self.in_cases, True
        while True:
            self.skip_layout()
            if self.at("\\end"):
                self.k += 1
                self.raw_group()
                break
            value = self.expression()
            self.skip_layout()
            if self.at(","):
                self.k += 1
                self.skip_layout()
            if self.at("&"):
                self.k += 1
            self.skip_layout()
            word = self.peek()
            if word is not None and word.text in ("\\mathrm", "\\text", "\\textrm"):
                self.k += 1
                said = _text(self.raw_group()).strip()
                self.skip_layout()
                if said in ("otherwise", "else"):
                    rows.append((value, None))
                elif said == "if":
                    rows.append((value, self.condition_until()))
                else:
                    raise fail(f"{word.text}{{{said}}} in a case", word.col)
            else:
                rows.append((value, self.condition_until()))
            self.skip_layout()
            if self.at("\\\\"):
                self.k += 1
        self.in_cases = outer
        if closing:
            self.skip_layout()
            if self.at("."):
                self.k += 1
        if not rows:
            raise fail("an empty case distinction", t.col)
        return Cases(tuple(rows), col=t.col)

    def condition_until(self) -> Node:
        """A case's condition, up to ``\\\\`` or ``\\end``."""
        operands = [self.expression()]
        ops = []
        while True:
            self.skip_layout()
            u = self.peek()
            key = u.text.lstrip("\\") if u is not None else ""
            if u is None or key not in _COMPARISONS:
                break
            self.k += 1
            ops.append(_COMPARISONS[key])
            operands.append(self.expression())
        if not ops:
            raise fail("a case without a condition", operands[0].col)
        return Compare(tuple(ops), tuple(operands), col=operands[0].col)

    def peek_group(self, ahead: int) -> tuple[Token, ...]:
        """The tokens of the group starting ``ahead`` tokens on (without consuming)."""
        saved = self.k
        self.k += ahead
        try:
            return self.raw_group()
        except InputError:
            return ()
        finally:
            self.k = saved

    def fraction(self, t: Token) -> Node:
        num = self.raw_group()
        den = self.raw_group()
        if num and num[0].text == "\\partial" and _text(num[1:]) == "L":
            return self.derivative(num, den, t.col)
        if _text(num) in ("d", "\\partial") and len(den) >= 2 \
                and den[0].text in ("d", "\\partial"):
            return self.function_derivative(den, t)
        if num and den and num[0].text == den[0].text == "\\partial":
            return _jacobian(num, den, t.col)
        return Binary("/", self.sub_expression(num, t.col), self.sub_expression(den, t.col),
                      col=t.col)

    def function_derivative(self, den: tuple[Token, ...], t: Token) -> Node:
        """``\\frac{d}{dx}\\mathrm{GELU}(x)``: the derivative of a named function at its
        argument (as ``\\mathrm{GELU}'(x)``); of anything else, refused."""
        variable = _text(den[1:])
        self.skip_layout()
        first = self.peek()
        written = _text(self.peek_group(1)) if first is not None and first.text in (
            "\\mathrm", "\\operatorname", "\\text") else \
            first.text.lstrip("\\") if first is not None else ""
        node = self.factor()
        inner = node
        if isinstance(node, Binary) and node.op == "jux" and isinstance(node.left, Sym):
            name, args = node.left.base, node.right  # a symbol applied: sigma(x)
        elif isinstance(node, Call) and len(node.args) == 1:
            name, args = written or node.name, node.args[0]  # as written: GELU
        else:
            raise fail("d/d" + variable + " of an expression (only of a named function: "
                       "\\frac{d}{dx}\\mathrm{GELU}(x))", t.col)
        if not (isinstance(args, Sym) and args.base == variable and not args.sub):
            raise fail(f"d/d{variable} of a function of another variable", inner.col)
        return Binary("jux", Sym(name, primes=1, col=t.col), args, col=t.col)

    def derivative(self, num: tuple[Token, ...], den: tuple[Token, ...], col: int
                   ) -> Node:
        """∂L/∂x: the gradient array of x (the numerator must be the loss L)."""
        top = Parser(list(num[1:])).symbol()
        if top.base != "L" or top.sub or top.sup:
            raise fail(f"\\partial {top.show()} (only derivatives of the loss L)", col)
        if not den or den[0].text != "\\partial":
            raise fail("a derivative without \\partial below", col)
        inner = Parser(list(den[1:]))
        node = inner.wrt()
        inner.skip_layout()
        if inner.peek() is not None:
            raise fail(inner.peek().text, inner.peek().col)
        return _gradient(node, col)

    def nabla(self, t: Token) -> Node:
        """``\\nabla_W L``, ``\\nabla_{\\theta} f(\\theta)``: the gradient of the loss
        (``L``, ``\\mathcal{L}``, ``f``, ``J``, with or without its arguments) with
        respect to the symbol below."""
        self.k += 1
        self.skip_layout()
        if not self.at("_"):
            raise fail("\\nabla without the symbol below it (\\nabla_W L)", t.col)
        self.k += 1
        inner = Parser(list(self.raw_group()))
        wrt = inner.wrt()
        inner.skip_layout()
        if inner.peek() is not None:
            raise fail(inner.peek().text, inner.peek().col)
        self.skip_layout()
        loss = self.peek()
        if loss is None or not (loss.text in ("L", "f", "J") or (
                loss.text in ("\\mathcal", "\\ell") )):
            raise fail("\\nabla_W of something other than the loss (\\nabla_W L)", t.col)
        self.symbol()  # L, \mathcal{L}, f_t
        self.skip_layout()
        if self.at("("):  # f(\theta): its argument, the symbol differentiated
            self.atom()
        return _gradient(wrt, t.col)

    def slash_derivative(self, t: Token) -> Node:
        """``\\partial L/\\partial x_{ij}``."""
        self.k += 1
        top = self.symbol()
        if top.base != "L" or top.sub or top.sup:
            raise fail(f"\\partial {top.show()} (only derivatives of the loss L)", t.col)
        self.skip_layout()
        self.expect("/")
        self.skip_layout()
        self.expect("\\partial")
        return _gradient(self.wrt(), t.col)

    def wrt(self) -> Node:
        """What a derivative is taken with respect to: a symbol, or a weight in
        parentheses with the entry's subscript, ``\\left(W_{2}\\right)_{m,j}`` (returned
        with ``grad`` set by the caller)."""
        self.skip_layout()
        if not self.at("("):
            return self.symbol()
        self.k += 1
        sym = self.symbol()
        self.skip_layout()
        self.expect(")")
        if not self.at("_"):
            return sym
        t = self.next()
        return Subscripted(sym, self.raw_group(), col=t.col)

    def argument(self, t: Token) -> Node:
        """A function's argument: ``(..)``, ``{..}``, or the next factor (``\\exp x``)."""
        self.skip_layout()
        if self.peek() is None:
            raise fail(f"{t.text} without an argument", t.col)
        if self.at("("):  # f(x)_{ij}: the subscript is the value's entry
            return self.atom()
        return self.factor()

    def function(self, name: str, t: Token) -> Node:
        """``\\tanh x``, ``\\tanh(x)``; ``\\tanh^{2} x`` is (tanh x)^2 (a positive whole
        power: ``\\sin^{-1}`` is not read)."""
        self.skip_layout()
        power = None
        if self.at("^"):
            u = self.next()
            power = self.raw_group()
            if not (len(power) == 1 and power[0].kind == "num"
                    and power[0].text.isdigit() and int(power[0].text) > 0):
                raise fail(f"{t.text}^{{{_text(power)}}} (only a positive whole power, "
                           f"\\tanh^{{2}} x)", u.col)
        node: Node = Call(name, (self.argument(t),), col=t.col)
        if power is not None:
            node = Binary("pow", node, Num(Fraction(power[0].text), col=power[0].col),
                          col=t.col)
        return node

    def reduction(self, name: str, t: Token) -> Node:
        """``\\sum_{j=0}^{n-1} body``, ``\\sum_j``, ``\\max_j``; ``\\max(a, b)``."""
        self.skip_layout()
        if name == "max" and self.at("("):
            self.k += 1
            args = [self.expression()]
            while self.at(","):
                self.k += 1
                args.append(self.expression())
            self.expect(")")
            return Call("max", tuple(args), col=t.col)
        if not self.at("_"):
            raise fail(f"\\{name} without an index below it", t.col)
        self.k += 1
        below = self.raw_group()
        low = high = None
        indices: list[str]
        eq = [k for k, u in enumerate(below) if u.text == "="]
        member = [k for k, u in enumerate(below) if u.text == "\\in"]
        if member:
            indices = _index_names(below[:member[0]], t.col)
            low, high = self.set_below(below[member[0] + 1:], t)
        elif any(u.text.lstrip("\\") in _COMPARISONS and u.text != "=" for u in below):
            indices, low, high = self.range_below(below, t)
        elif eq:
            names, low_tokens = below[:eq[0]], below[eq[0] + 1:]
            indices = _index_names(names, t.col)
            low = self.sub_expression(low_tokens, t.col)
        else:
            indices = _index_names(below, t.col)
        self.skip_layout()
        if self.at("^") and high is None:
            self.k += 1
            high = self.sub_expression(self.raw_group(), t.col)
        body = self.term()
        return Reduce(name, tuple(indices), low, high, body, col=t.col)

    def set_below(self, tokens: tuple[Token, ...], t: Token) -> tuple[Node, Node]:
        """``j \\in \\{1, \\ldots, n\\}`` (``\\{0, 1, \\dots, n-1\\}``), ``j \\in [n]``
        (1 to n): the first and last members."""
        inner = [u for u in tokens if not (u.kind == "macro" and u.text[1:] in _IGNORED)]
        if len(inner) >= 2 and inner[0].text == "[" and inner[-1].text == "]":
            return Num(Fraction(1), col=t.col), self.sub_expression(tuple(inner[1:-1]), t.col)
        if len(inner) < 2 or inner[0].text not in ("\\{", "\\lbrace") \
                or inner[-1].text not in ("\\}", "\\rbrace"):
            raise fail("the set under a sum (write j \\in \\{1, \\ldots, n\\})", t.col)
        items: list[list[Token]] = [[]]
        for u in inner[1:-1]:
            if u.kind == "char" and u.text == ",":
                items.append([])
            else:
                items[-1].append(u)
        items = [i for i in items if not (len(i) == 1 and i[0].text in
                                          ("\\ldots", "\\dots", "\\cdots"))]
        if len(items) < 2 or any(not i for i in items):
            raise fail("the set under a sum (write j \\in \\{1, \\ldots, n\\})", t.col)
        return (self.sub_expression(tuple(items[0]), t.col),
                self.sub_expression(tuple(items[-1]), t.col))

    def range_below(self, below: tuple[Token, ...], t: Token
                    ) -> tuple[list[str], Node | None, Node | None]:
        """``\\sum_{j \\le i}``, ``\\max_{1 \\le j \\le n}``, ``\\sum_{j < i}``: the index (the
        one plain letter compared) and its limits (a strict bound moved by one)."""
        inner = Parser(list(below))
        cond = inner.condition(None)
        if not isinstance(cond, Compare):
            raise fail("the range under a sum", t.col)
        letters = [k for k, o in enumerate(cond.operands) if isinstance(o, Sym)
                   and len(o.base) == 1 and not (o.sub or o.sup or o.grad)]
        if not letters or any(op in ("==", "!=") for op in cond.ops):
            raise fail("the range under a sum (write \\sum_{j \\le i})", t.col)
        at = letters[0] if len(cond.operands) == 2 else next(
            (k for k in letters if 0 < k < len(cond.operands) - 1), letters[0])
        index = cond.operands[at].base
        low = high = None
        one = Num(Fraction(1), col=t.col)
        for k, op in enumerate(cond.ops):
            left, right = cond.operands[k], cond.operands[k + 1]
            if k + 1 == at:      # bound <op> j
                bound, op = left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
            elif k == at:        # j <op> bound
                bound = right
            else:
                continue
            if op == "<":
                high = Binary("-", bound, one, col=t.col)
            elif op == "<=":
                high = bound
            elif op == ">":
                low = Binary("+", bound, one, col=t.col)
            else:
                low = bound
        return [index], low, high

    def ones_ahead(self) -> bool:
        """After ``\\mathbf{1}``: a vector of ones, not an indicator -- no bracket follows
        and a subscript holds no comparison (``\\mathbf{1}_n``, not ``\\mathbb{1}_{i=j}``)."""
        saved = self.k
        try:
            self.k += 1
            self.raw_group()
            self.skip_layout()
            u = self.peek()
            if u is not None and u.text in _OPEN:
                return False
            if u is not None and u.text == "_":
                self.k += 1
                sub = self.raw_group()
                return not any(v.text == "=" or v.text.lstrip("\\") in _COMPARISONS
                               or v.text in _OPEN for v in sub)
            return True
        except InputError:
            return False
        finally:
            self.k = saved

    def ones(self, t: Token) -> Node:
        """``\\mathbf{1}`` after its name, with its length as a subscript if written."""
        if self.at("_"):
            self.k += 1
            return Ones(self.sub_expression(self.raw_group(), t.col), col=t.col)
        return Ones(col=t.col)

    def indicator(self, t: Token) -> Node:
        self.skip_layout()
        if self.at("_"):
            self.k += 1
            tokens = list(self.raw_group())
            if tokens and tokens[0].text in ("\\{", "\\lbrace"):
                tokens = tokens[1:-1] if tokens[-1].text in ("\\}", "\\rbrace") else tokens
            inner = Parser(tokens)
            cond = inner.condition(None)
            return Indicator(cond, col=t.col)
        u = self.peek()
        if u is None or u.text not in _OPEN:
            raise fail(f"{t.text} without [condition]", t.col)
        self.k += 1
        return Indicator(self.condition(_OPEN[u.text]), col=t.col)

    def condition(self, close: str | None, grouping: bool = False) -> Node:
        """``a <= b < c`` up to ``close``."""
        self.enter(self.peek().col if self.peek() else 0)
        operands = [self.expression()]
        ops = []
        while True:
            self.skip_layout()
            t = self.peek()
            if t is None or (close is not None and t.text == close):
                break
            key = t.text.lstrip("\\")
            if key not in _COMPARISONS:
                raise fail(f"{t.text} in a condition", t.col)
            self.k += 1
            ops.append(_COMPARISONS[key])
            operands.append(self.expression())
        if close is not None:
            self.expect(close)
        if not ops and grouping:
            self.depth -= 1
            return operands[0]
        if not ops:
            raise fail("a bracket without a comparison ([j \\le i])",
                       operands[0].col)
        self.depth -= 1
        return Compare(tuple(ops), tuple(operands), col=operands[0].col)

    def symbol(self) -> Sym:
        """A symbol's base, then its scripts and primes in any order."""
        self.skip_layout()
        t = self.next()
        bold = t.kind == "macro" and (t.text[1:] in _BOLD or (
            t.text[1:] in _ACCENTS and any(u is not None and u.text[1:] in _BOLD
                                           for u in (self.peek(), self.peek(1)))))
        base = self.base(t)
        sub = sup = None
        primes = 0
        while True:
            if self.at("_") and sub is None:
                self.k += 1
                sub = self.raw_group()
            elif self.at("^") and sup is None:
                self.k += 1
                sup = self.raw_group()
                while sup and sup[0].text == "\\prime":
                    primes += 1
                    sup = sup[1:] or None
            elif self.at("'"):
                self.k += 1
                primes += 1
            else:
                if bold and len(base) == 2 and base[0] == "d" and base[1].isalpha():
                    # \mathbf{dO}, \mathbf{dV}: FlashAttention's bold gradients
                    return Sym(base[1], sub, sup, primes, True, bold, col=t.col)
                return Sym(base, sub, sup, primes, bold=bold, col=t.col)

    def base(self, t: Token) -> str:
        if t.kind == "letter":
            return t.text
        if t.kind == "macro":
            name = t.text[1:]
            if name in GREEK:
                return name
            if name == "langle":  # \langle x^2 \rangle: a mean square, one symbol
                inner = []
                while not self.at("\\rangle"):
                    inner.append(self.next())
                    if len(inner) > 20:
                        raise fail("\\langle without \\rangle", t.col)
                self.k += 1
                return f"<{_text(tuple(inner))}>"
            if name in _ACCENTS:
                group = self.raw_group()
                if not group:
                    raise fail(f"{t.text} without a symbol", t.col)
                inner = Parser(list(group))
                inner.k = 1  # \hat{\mathbf{v}}: the accent over a bold letter
                return f"{name}({inner.base(group[0])})"
            if name in _FONTS or name in _BOLD:
                text = _text(self.raw_group())
                if not text.replace("_", "").isalnum() and text not in functions().by_word:
                    raise fail(f"{t.text}{{{text}}}", t.col)
                return text  # a function's name too, \operatorname{ReLU^2}'
        raise fail(t.text, t.col)


#: A sum of more terms than this is built as a balanced tree (its depth the logarithm of
#: its length: a flat sum of 5,000 terms is not nested 5,000 deep).
_FLAT = 32


def _sum_tree(terms: list[tuple[str, Node]], col: int) -> Node:
    """``a + b - c ...`` as a tree: left to right for a short sum, balanced (each
    subtracted term negated) for a long one."""
    if len(terms) <= _FLAT:
        node = terms[0][1]
        for op, term in terms[1:]:
            node = Binary(op, node, term, col=col)
        return node
    items = [terms[0][1]] + [t if op == "+" else Unary(t, col=t.col) for op, t in terms[1:]]
    while len(items) > 1:
        items = [Binary("+", items[k], items[k + 1], col=col) if k + 1 < len(items)
                 else items[k] for k in range(0, len(items), 2)]
    return items[0]


def _jacobian(num: tuple[Token, ...], den: tuple[Token, ...], col: int) -> Node:
    """``\\frac{\\partial p_j}{\\partial s_k}``: an entry of a Jacobian stage (a softmax
    row's), the symbol ``∂p/∂s`` with the two indices ``j,k``; only as a left-hand side
    (anywhere else it names no stage)."""
    top, bottom = Parser(list(num[1:])).symbol(), Parser(list(den[1:])).symbol()
    if not top.sub or not bottom.sub:
        raise fail("a derivative without the entries' indices (\\partial p_j/\\partial "
                   "s_k)", col)
    comma = (Token("char", ",", col),)

    def separated(sub: tuple[Token, ...]) -> tuple[Token, ...]:
        """``ij`` as ``i,j`` (a Jacobian's indices are single letters)."""
        inner = tuple(t for t in sub if t.text not in "{}")
        if len(inner) > 1 and all(t.kind == "letter" for t in inner):
            return tuple(x for t in inner for x in (t, *comma))[:-1]
        return sub

    return Sym(f"d{top.base}/d{bottom.base}", (*separated(top.sub), *comma,
                                              *separated(bottom.sub)), col=col)


def _gradient(node: Node, col: int) -> Node:
    """∂L/∂ of a symbol (or of a parenthesised symbol's entry)."""
    if isinstance(node, Subscripted):
        sym = node.operand
        return Subscripted(Sym(sym.base, sym.sub, sym.sup, sym.primes, True, col=col),
                           node.sub, col=node.col)
    return Sym(node.base, node.sub, node.sup, node.primes, True, col=col)


def _index_names(tokens: tuple[Token, ...], col: int) -> list[str]:
    """``j`` or ``j,k`` or ``jk`` below a sum: the index letters."""
    names: list[str] = []
    word = ""
    for t in tokens:
        if t.kind == "letter":
            word += t.text
        elif t.kind == "char" and t.text == ",":
            names.append(word)
            word = ""
        elif t.kind == "macro" and t.text[1:] in GREEK:
            word += t.text[1:]
        elif t.kind == "char" and t.text == "'" and word:  # \sum_{j'}: j' of its own
            word += "'"
        else:
            raise fail(f"{t.text} in the index of a sum", t.col)
    names.append(word)
    if any(not n for n in names):
        raise fail("a sum without an index", col)
    if len(names) == 1 and len(names[0]) > 1 and names[0].isalpha() and \
            all(c.isalpha() and c.islower() for c in names[0]) and len(names[0]) <= 3:
        return list(names[0]) if len(names[0]) == 2 else names
    return names


def parse_equations(text: str) -> list[Chain]:
    """Every line of a block of LaTeX math (without its ``$$``; ``\\begin{align}`` and
    its ``&``, ``\\\\`` read) as a chain."""
    stripped = text.strip()
    for open_, close in (("$$", "$$"), ("\\[", "\\]"), ("$", "$")):
        if stripped.startswith(open_) and stripped.endswith(close) and len(stripped) > 1:
            stripped = stripped[len(open_):len(stripped) - len(close)]
            break
    if "$" in stripped:
        raise fail("$", text.index("$") + 1)
    try:
        return Parser(tokenize(stripped)).block()
    except RecursionError:
        raise InputError(f"cannot read the equation: nested more than {MAX_DEPTH} "
                         f"deep") from None


def split_indices(sub: tuple[Token, ...], axes: int) -> list[Node]:
    """A symbol's subscript as index expressions: ``i,c`` (comma-separated, each an
    expression in which a run of letters is one name, ``pos``), or ``ic`` (as many
    letters as ``axes``), or one expression (``2i+1``)."""
    if len(sub) > 2 and sub[0].text == "(" and sub[-1].text == ")" and not any(
            t.text in "()" for t in sub[1:-1]):
        sub = sub[1:-1]  # PE_{(pos,2i)}
    primed: list[Token] = []
    for t in sub:  # s_{ij'}: j' is one index
        if t.kind == "char" and t.text == "'" and primed and primed[-1].kind == "letter":
            last = primed.pop()
            primed.append(Token("letter", last.text + "'", last.col, last.spaced))
        else:
            primed.append(t)
    sub = tuple(primed)
    parts: list[list[Token]] = [[]]
    level = 0
    for t in sub:
        if t.kind == "char" and t.text in "({[":
            level += 1
        elif t.kind == "char" and t.text in ")}]":
            level -= 1
        if t.kind == "char" and t.text == "," and level == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    if len(parts) == 1 and axes > 1 and len(parts[0]) == axes and \
            all(t.kind in ("letter", "num") for t in parts[0]):
        return [_one(t) for t in parts[0]]
    return [_index_expression(p) for p in parts]


def _one(t: Token) -> Node:
    return Num(Fraction(t.text), col=t.col) if t.kind == "num" else Sym(t.text, col=t.col)


def _index_expression(tokens: list[Token]) -> Node:
    """An index expression; adjacent letters (``pos``) join into one name."""
    merged: list[Token] = []
    for t in tokens:
        if t.kind == "letter" and merged and merged[-1].kind == "letter" and not t.spaced:
            last = merged.pop()
            merged.append(Token("letter", last.text + t.text, last.col, last.spaced))
        else:
            merged.append(t)
    if not merged:
        raise InputError("cannot read an empty subscript")
    parser = _IndexParser(merged)
    node = parser.expression()
    parser.skip_layout()
    if parser.peek() is not None:
        raise fail(parser.peek().text, parser.peek().col)
    return node


class _IndexParser(Parser):
    """Index expressions: a letter token may be a several-letter name."""

    def symbol(self) -> Sym:
        t = self.peek()
        if t is not None and t.kind == "letter" and len(t.text) > 1:
            self.k += 1
            return Sym(t.text, col=t.col)
        return super().symbol()

    def atom(self) -> Node:
        t = self.peek()
        if t is not None and t.kind == "letter":
            return self.symbol()
        return super().atom()


def juxtaposed(node: Node, top: bool = True) -> list[Node]:
    """The factors of a product written side by side (``a b c``), left to right; a
    product in parentheses is one factor (``\\sigma(xW)``: σ of xW)."""
    if isinstance(node, Binary) and node.op == "jux" and (top or not node.grouped):
        return juxtaposed(node.left, False) + juxtaposed(node.right, False)
    return [node]
