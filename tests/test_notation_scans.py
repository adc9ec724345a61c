"""Scans of every shipped example's notes (each with a loss): notation a reader never trips on.

The generated LaTeX (not compiled: fast) of the built-in block, llama_style, gpt2_style,
attention_only, course_module and encoder_decoder, each with its Backward part, is read
as text (issue 29):

* no ``\\partial L/\\partial x`` slash inside a displayed equation (a display fraction);
* no script set on a braced group that has a script of its own (``{\\sigma^2}^{(1)}``
  prints σ^{2(1)}, ``{h^{(2)}_{0}}^{3}`` prints h^{(2)}_0{}^3) and no ``{}^``;
* no constant as SymPy prints it (``8943/200000`` for 0.044715);
* the second sub-layer's normalisation statistics primed as its r′ and y′ are (μ′, σ′²),
  the decoder's third twice (μ″);
* GELU-tanh's derivative with its named inner ξ and the paper's 0.044715, and the
  RMSNorm rule's worked line in the displayed form (γ kept, the power 3/2).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import pytest

from symformer import derive, load_example, parse_example
from symformer.latex import Options, export_files

#: The [loss] each example ships without (the built-in one has its own).
LOSSES = {
    "llama_style": 'kind = "cross_entropy"\ntargets = ["cat", "sat", "the"]\n',
    "gpt2_style": 'kind = "cross_entropy"\ntargets = ["cat", "sat", "on"]\n',
    "attention_only": 'kind = "mse"\ntarget = [[1, 0, -1], [0, 1, 0], [-1, 0, 1]]\n',
    "course_module": 'kind = "mse"\ntarget = [[1, 0, -1, 0], [0, 1, 0, -1], [-1, 0, 1, 0], '
                     '[0, -1, 0, 1]]\n',
    "encoder_decoder": 'kind = "cross_entropy"\ntargets = ["je", "pense"]\n',
}
NAMES = ["builtin", *LOSSES]

DISPLAY = re.compile(r"\\begin\{(equation\*?|align\*?|gather\*?|multline\*?)\}(.*?)"
                     r"\\end\{\1\}|\\\[(.*?)\\\]", re.S)
SLASH = re.compile(r"\\partial L ?/ ?\\partial")
#: SymPy's rationals for a decimal constant: 8943/200000 (0.044715), 26829/200000.
SYMPY_CONSTANT = re.compile(r"\d{4,}\}?\s*/\s*\{?\d{5,}|"
                            r"\\frac\{\d{4,}(?:[^{}]|\{[^{}]*\})*\}\{\d{5,}\}")


def _example(name: str):
    if name == "builtin":
        return load_example()
    text = (resources.files("symformer.examples") / f"{name}.toml").read_text("utf-8")
    return parse_example(text + "\n[loss]\n" + LOSSES[name], source=f"{name}+loss")


@functools.cache
def tex_files(name: str) -> dict[str, str]:
    """Every .tex file of the example's notes with their Backward part, by path (once)."""
    files = export_files(derive(_example(name)), Options(decimals=3))
    return {k: v for k, v in files.items() if k.endswith(".tex")}


@pytest.fixture(params=NAMES)
def notes(request) -> tuple[str, dict[str, str]]:
    """(name, :func:`tex_files`)."""
    return request.param, tex_files(request.param)


def displayed(tex: str) -> list[str]:
    """The bodies of the displayed equations of a LaTeX source."""
    return [m.group(2) or m.group(3) or "" for m in DISPLAY.finditer(tex)]


def stacked(tex: str) -> list[int]:
    """Where a script is set on a bare brace group holding a script (or a prime) of its
    own, or on an empty group.  A command's argument (``\\tilde{\\sigma}^{(1)}``), a
    script's own group (``\\sum_{m = 0}^{n - 1}``) and ``\\right)_{m,j}`` are fine."""
    out, opened = [], []
    for k, char in enumerate(tex):
        if char not in "{}" or (k and tex[k - 1] == "\\"):
            continue
        if char == "{":
            opened.append(k)
            continue
        if not opened:
            continue
        start = opened.pop()
        if tex[k + 1:k + 2] not in ("^", "_"):
            continue
        inner = tex[start + 1:k]
        if not inner:
            out.append(start)
            continue
        before = tex[:start]
        if re.search(r"(\\[A-Za-z]+\*?|[\^_]|\})\s*$", before):
            continue  # a command's argument, a script's group, \frac's second argument
        depth = 0
        for c in inner:
            depth += {"{": 1, "}": -1}.get(c, 0)
            if depth == 0 and c in "^_'":
                out.append(start)
                break
    return out


def test_the_scans_find_what_they_look_for():
    """The scanners themselves, on the forms issue 29 found (a scan that cannot fail
    proves nothing)."""
    assert stacked(r"\sqrt{{\sigma^2}^{(1)} + \varepsilon}") and stacked(r"\frac{{h_{0}}^{3}}{2}")
    assert stacked(r"x{}^3") and stacked(r"{\delta^{(y)}}_{i}")
    assert not stacked(r"\sum_{m = 0}^{n - 1} \tilde{\sigma}^{(1)} \left(W_{Q}^{(1)}\right)_{m,j}"
                       r" (\sigma^{(1)}_{i})^{2} \left(h^{(2)}_{0}\right)^{3} \sigma'^2_{i}")
    assert displayed("$a$ \\begin{align*} \\partial L/\\partial x \\end{align*}") == [
        " \\partial L/\\partial x "]
    assert SYMPY_CONSTANT.search(r"\frac{8943 h^{3}}{200000}")
    assert SYMPY_CONSTANT.search("26829/200000") and not SYMPY_CONSTANT.search("10000^{2i/d}")


def test_displayed_derivatives_are_fractions(notes):
    name, files = notes
    found = [(path, body[max(0, m.start() - 30):m.end() + 30])
             for path, tex in files.items() for body in displayed(tex)
             for m in SLASH.finditer(body)]
    assert not found, (name, len(found), found[:3])
    assert any(r"\frac{\partial L}{\partial" in tex for tex in files.values())


def test_no_stacked_scripts(notes):
    name, files = notes
    found = [(path, tex[max(0, k - 20):k + 40]) for path, tex in files.items()
             for k in stacked(tex)]
    assert not found, (name, len(found), found[:3])


def test_no_sympy_printed_constants(notes):
    name, files = notes
    found = [(path, m.group()) for path, tex in files.items()
             for m in SYMPY_CONSTANT.finditer(tex)]
    assert not found, (name, found[:3])


def test_second_norm_statistics_are_primed(notes):
    name, files = notes
    # the second norm's statistics wherever they are shown: worked (their equation) or,
    # repeating the first norm's rule, as their table
    equations = {path: tex for path, tex in files.items()
                 if path.endswith(("-equation.tex", "-table.tex"))}
    second = [tex for path, tex in equations.items()
              if re.search(r"(add_norm|-norm)2-(variance|std)-(equation|table)", path)]
    if name == "llama_style":  # RMSNorm: its mean square and rms
        second = [tex for path, tex in equations.items()
                  if re.search(r"-norm2-(mean_square|std)-(equation|table)", path)]
    if name == "attention_only":  # no normalisation
        assert not second
        return
    assert second, name
    for tex in second:
        # (a decoder's barred: \\bar{\\sigma}'^2, issue 39)
        assert re.search(r"\\mu\}?'|\\sigma\}?'\^2|\\tilde\{\\sigma\}\}?'|\\rangle'|"
                         r"\\mathrm\{rms\}'", tex), tex
        assert not re.search(r"\\mu\}?(?!')[_^ ]|\\sigma\}?\^2", tex.split("=", 1)[1]), tex
    if name == "encoder_decoder":
        third = equations["fragments/decoder-layer1-add_norm3-variance-table.tex"]
        assert r"\bar{\sigma}''^2" in third  # the decoder's, barred (issue 39)
        assert r"\bar{\mu}''" in equations[
            "fragments/grad-decoder-layer1-add_norm3-mean-equation.tex"]
    table = files["main.tex"]  # the notation table has its own row for them
    if name in ("builtin", "gpt2_style", "course_module", "encoder_decoder"):
        assert "Mean (second sub-layer)" in table and "Variance (second sub-layer)" in table


def test_gelu_tanh_derivative_in_textbook_form():
    files = tex_files("gpt2_style")  # its FFN's activation is GELU-tanh
    # the backward part works the last layer first (layer 1 repeats its rule)
    equation = files["fragments/grad-layer2-ffn-hidden-equation.tex"]
    assert r"\xi_{i,j} &= \sqrt{ \frac{2}{\pi} }" in equation and "0.044715" in equation
    assert r"\tanh^{2} \xi_{i,j}" in equation
    worked = files["fragments/grad-layer2-ffn-hidden-worked.tex"]
    assert r"\xi_{0} &= \sqrt{\frac{2}{\pi}}" in worked and r"3 \cdot 0.044715" in worked


def test_rms_norm_rule_worked_as_displayed():
    files = tex_files("llama_style")  # RMSNorm
    # worked first at the final norm (the layers' norms repeat its rule)
    equation = files["fragments/grad-final_norm-mean_square-equation.tex"]
    worked = files["fragments/grad-final_norm-mean_square-worked.tex"]
    # the final norm's symbols are hatted (issue 39: not the first sub-layer's y, gamma)
    assert r"\hat{\gamma}_{j}" in equation and "^{3/2}" in equation
    assert r"\hat{\gamma}_{0} \frac{\partial L}{\partial \hat{y}_{0}} r'^{(2)}_{0}" in worked
    assert r"+ 10^{-6}\right)^{3/2}}" in worked and "1.5" not in worked  # ε: issue 39
