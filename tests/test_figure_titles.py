"""Every figure file says what it shows (issue 39, item 7).

A standalone SVG, PNG or PDF figure carries a heading drawn above it that names the
quantity and where it sits (layer, head, token, position), plus its title in the
file's metadata; a TikZ figure its caption.  RoPE's figure draws every arrow long
enough for its rotation to be seen.
"""

from __future__ import annotations

import functools
import math
import re
from importlib import resources

import pytest

from symformer import derive, load_example, parse_example
from symformer.figures import Options, figure_files, figures
from symformer.figures.data import SHORTEST_ARROW, Rotations, heading


@functools.cache
def _derivation(name: str):
    if name == "builtin":
        return derive(load_example())
    text = (resources.files("symformer.examples") / f"{name}.toml").read_text("utf-8")
    return derive(parse_example(text, source=name))


#: The words a heading names its place with, by figure name.
WHERE = [(re.compile(r"head\d"), "Head"), (re.compile(r"token\d"), "token"),
         (re.compile(r"position\d"), "position")]


@pytest.mark.parametrize("name", ["builtin", "llama_style"])
def test_every_figure_has_a_heading_naming_its_place(name):
    chosen = figures(_derivation(name), Options())
    assert chosen
    for figure in chosen:
        text = heading(figure)
        assert 3 < len(text) <= 80, (figure.name, text)
        for pattern, word in WHERE:
            if pattern.search(figure.name):
                number = pattern.search(figure.name).group(0)[-1]
                assert word in text and number in text, (figure.name, text)


def test_svg_and_tikz_files_carry_their_titles():
    g = _derivation("builtin")
    headings = {f.name: heading(f) for f in figures(g, Options())}
    svg = figure_files(g, Options(), "svg", diagram=False)
    assert set(svg) == {f"{n}.svg" for n in headings}
    for path, data in svg.items():
        text = data.decode("utf-8")
        assert text.count("<title>") == 1
        # the heading is drawn: its words are text of the SVG besides its <title>
        drawn = re.sub(r"<title>.*?</title>", "", text, flags=re.S)
        words = re.findall(r"[A-Za-z]{4,}", headings[path.removesuffix(".svg")])
        assert words and all(w in drawn for w in words), path
    tikz = figure_files(g, Options(), "tikz", diagram=False)
    for path, text in tikz.items():
        if path != "main.tex":
            assert r"\caption{" in text, path


def test_rope_rotations_all_visible():
    g = _derivation("llama_style")
    rope = [f for f in figures(g, Options()) if isinstance(f, Rotations)]
    assert rope and rope[0].before
    r = rope[0]
    for pair, vectors in enumerate(r.before):
        lengths = [math.hypot(float(x), float(y)) for x, y in vectors]
        for m, length in enumerate(lengths):
            drawn = length * r.scale(pair, m)
            if length:
                # the longest reaches the circle; none is drawn shorter than the floor
                assert SHORTEST_ARROW - 1e-12 <= drawn <= 1 + 1e-12
                assert drawn == pytest.approx(max(length / max(lengths), SHORTEST_ARROW))
    assert r.lengthened() and f"drawn at {SHORTEST_ARROW}" in r.note()
