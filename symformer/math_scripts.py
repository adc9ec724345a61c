"""Scripts on a symbol, set as a textbook sets them: never one script stacked on another.

A symbol may carry a power of its own (``\\sigma^2``, ``\\sigma'^2``), a superscript
saying where it sits (``(1)``: layer 1) and an entry's subscript (``i``).  TeX stacks a
second superscript after a braced group (``{\\sigma^2}^{(1)}`` prints σ^{2(1)}), so a
located power is written with its base in parentheses and the power outside:
``(\\sigma^{(1)}_{i})^{2}``, as Prince and Bishop write (σ^{(1)})².  A gradient
``\\partial L/\\partial X`` takes the scripts on X (the quantity it differentiates).

In a displayed equation a derivative is a display fraction, ``\\frac{\\partial
L}{\\partial x}`` (:func:`display`); inline text keeps the slash.
"""

from __future__ import annotations

import re

#: How a gradient's symbol starts (``symformer.blocks.backward`` writes the first).
GRADIENT_PREFIXES = (r"\partial L/\partial ", r"\partial L / \partial ")
TEXT_GRADIENT = "∂L/∂"
#: A power a symbol ends with: ``^2``, ``^{2}``, ``^{3/2}`` (never a location ``^{(1)}``).
_POWER = re.compile(r"\^(\d|\{\d+(?:/\d+)?\})$")
_TEXT_POWER = re.compile(r"[²³]$")
#: The form :func:`located` gives a powered symbol: ``(base^{(w)})^{p}``.
_LOCATED_POWER = re.compile(r"^\((.*)\)\^\{([^{}]*)\}$", re.S)
_TEXT_LOCATED_POWER = re.compile(r"^\((.*)\)([²³])$", re.S)
#: A symbol that ends in a script of its own (``E^{\text{lookup}}``, ``W_{Q}``).
_ENDS_IN_SCRIPT = re.compile(r"[\^_](\{(?:[^{}]|\{[^{}]*\})*\}|\\[A-Za-z]+|[^\\{}])$")


def _prefix(latex: str) -> tuple[str, str]:
    for prefix in GRADIENT_PREFIXES:
        if latex.startswith(prefix):
            return prefix, latex[len(prefix):]
    return "", latex


def _top_level(latex: str, k: int) -> bool:
    """True when position ``k`` of ``latex`` is outside every brace group."""
    depth = 0
    for char in latex[:k]:
        depth += {"{": 1, "}": -1}.get(char, 0)
    return depth == 0


def split_power(latex: str) -> tuple[str, str, str]:
    """(gradient prefix, base, power) of a symbol: ``\\sigma'^2`` -> ("", ``\\sigma'``,
    "2"); ``\\partial L/\\partial \\sigma^2`` -> (prefix, ``\\sigma``, "2"); no power: "" ."""
    prefix, rest = _prefix(latex)
    m = _POWER.search(rest)
    if m and _top_level(rest, m.start()):
        return prefix, rest[:m.start()], m.group(1).strip("{}")
    return prefix, rest, ""


def _brace(latex: str) -> str:
    """``latex`` ready to take a superscript: braced only when it ends in a script of
    its own (a tied table's mark; ``W_{Q}`` takes one directly)."""
    m = _ENDS_IN_SCRIPT.search(latex)
    return f"{{{latex}}}" if m and m.group(0).startswith("^") else latex


def located(latex: str, where: str) -> str:
    """The symbol with its location superscript: ``q^{(2)}``, ``(\\sigma^{(1)})^{2}``,
    ``\\partial L/\\partial (\\sigma^{(1)})^{2}``."""
    prefix, base, power = split_power(latex)
    if power:
        return f"{prefix}({base}^{{({where})}})^{{{power}}}"
    return f"{prefix}{_brace(base)}^{{({where})}}"


def located_text(text: str, where: str) -> str:
    """:func:`located` in text: ``q^(2)``, ``(σ^(1))²``, ``∂L/∂(σ^(1))²``."""
    prefix = TEXT_GRADIENT if text.startswith(TEXT_GRADIENT) else ""
    rest = text[len(prefix):]
    m = _TEXT_POWER.search(rest)
    if m:
        return f"{prefix}({rest[:m.start()]}^({where})){m.group(0)}"
    return f"{text}^({where})"


def subscripted(latex: str, sub: str, is_located: bool) -> str:
    """An entry: the symbol with subscript ``sub`` (``i,j``), the subscript inside a
    located power's parentheses: ``(\\sigma^{(1)}_{i})^{2}``; an unlocated power stacks
    with it (``\\sigma^2_{i}``: σ with 2 over i)."""
    prefix, rest = _prefix(latex)
    if is_located:
        m = _LOCATED_POWER.match(rest)
        if m:
            return f"{prefix}({m.group(1)}_{{{sub}}})^{{{m.group(2)}}}"
        return f"{latex}_{{{sub}}}"
    prefix, base, power = split_power(latex)
    if power:
        return f"{latex}_{{{sub}}}"
    m = _ENDS_IN_SCRIPT.search(base)  # a subscript after a superscript stacks with it
    ends_in_subscript = m is not None and m.group(0).startswith("_")
    return f"{prefix}{{{base}}}_{{{sub}}}" if ends_in_subscript else f"{prefix}{base}_{{{sub}}}"


def subscripted_text(text: str, sub: str, is_located: bool) -> str:
    """:func:`subscripted` in text (``sub`` as printed: ``0`` or ``(i,j)``)."""
    prefix = TEXT_GRADIENT if text.startswith(TEXT_GRADIENT) else ""
    m = _TEXT_LOCATED_POWER.match(text[len(prefix):]) if is_located else None
    if m:
        return f"{prefix}({m.group(1)}_{sub}){m.group(2)}"
    return f"{text}_{sub}"


def powered(latex: str, power: str) -> str:
    """A symbol (an entry) raised to ``power``: ``h_{0}^{3}``, but a symbol with a
    superscript (or a prime) already in parentheses first:
    ``\\left(h^{(2)}_{0}\\right)^{3}``."""
    if "^" in latex or "'" in latex:
        return rf"\left({latex}\right)^{{{power}}}"
    return f"{latex}^{{{power}}}"


def display(latex: str) -> str:
    """A symbol (an entry) as a displayed equation sets it: each ``\\partial L/\\partial
    X`` as ``\\frac{\\partial L}{\\partial X}``, X running to the end of the group the
    derivative stands in (``\\left(\\partial L/\\partial W_{Q}\\right)_{0}`` keeps its
    bracket and subscript outside)."""
    for prefix in GRADIENT_PREFIXES:
        start = latex.find(prefix)
        while start >= 0:
            end = _group_end(latex, start + len(prefix))
            operand = latex[start + len(prefix):end]
            frac = rf"\frac{{\partial L}}{{\partial {operand}}}"
            latex = latex[:start] + frac + latex[end:]
            start = latex.find(prefix, start + len(frac))
    return latex


def _group_end(latex: str, k: int) -> int:
    """The end of the group that position ``k`` stands in: the index of the ``}`` or
    ``\\right`` closing it, or the end of ``latex``."""
    depth = 0
    while k < len(latex):
        if latex.startswith(r"\left", k):
            depth += 1
            k += 5
            continue
        if latex.startswith(r"\right", k):
            if depth == 0:
                return k
            depth -= 1
            k += 6
            continue
        char = latex[k]
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return k
            depth -= 1
        k += 1
    return k
