"""``symformer fill``: placeholders filled with the right numbers, bad ones refused.

The numbers are compared with the independent float64 pass (tests/float_reference.py)
rounded with Python's decimal module, and with hand-derived closed forms.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from symformer.blocks import derive
from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.fill import fill
from tests.float_reference import float_forward

REF = float_forward(load_example(None))
G = derive(load_example(None))


def rounded(x: float, decimals: int) -> str:
    text = str(Decimal(float(x)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_EVEN))
    return text[1:] if text.startswith("-") and set(text[1:]) <= set("0.") else text


def far_from_tie(x: float, decimals: int) -> bool:
    scaled = abs(x) * 10 ** decimals
    return abs(scaled - int(scaled) - 0.5) > 1e-6


SAMPLE = r"""\documentclass{article}
\newcommand{\w}[1]{\textbf{#1}}% {#1} and {% are LaTeX, not placeholders
\begin{document}
\w{think} puts \VAR{ layer1.head1.weights[1,3] | percent(1) } of its attention on \w{understand}.
$\alpha_{1,3} = \VAR{ layer1.head1.weights["think", "understand"] | decimals(4) }$,
$x_{1,0} = \VAR{ input[1,0] | exact }$, $q = \VAR{ layer1.head1.Q[1] | bmatrix(3) }$.
\VAR{ layer1.head1.weights | table }
{{\em untouched}}
\end{document}
"""


def test_sample_latex_document(tmp_path):
    notes, out = tmp_path / "notes.tex", tmp_path / "filled.tex"
    notes.write_text(SAMPLE)
    assert main(["fill", str(notes), "--out", str(out), "--decimals", "2"]) == 0
    text = out.read_text()
    w = REF["layer1.head1.weights"]
    assert f"puts {rounded(100 * w[1, 3], 1)}\\% of" in text
    assert f"\\alpha_{{1,3}} = {rounded(w[1, 3], 4)}$" in text
    assert "x_{1,0} = 4 + \\sin 1$" in text  # the embedding 4 plus PE sin(1), by hand
    q = " & ".join(rounded(v, 3) for v in REF["layer1.head1.Q"][1])
    assert f"\\begin{{bmatrix}} {q} \\end{{bmatrix}}" in text
    rows = re.findall(r"^(\d)\\ \S+ & (.*) \\\\$", text, flags=re.M)
    assert [int(i) for i, _ in rows] == [0, 1, 2, 3]
    for i, cells in rows:
        assert cells == " & ".join(f"${rounded(v, 2)}$" for v in w[int(i)])
    # everything that is LaTeX stays as it was
    assert "\\newcommand{\\w}[1]{\\textbf{#1}}% {#1} and {% are LaTeX" in text
    assert "{{\\em untouched}}" in text
    assert "\\VAR" not in text


def test_markdown_uses_double_braces(tmp_path):
    notes, out = tmp_path / "post.md", tmp_path / "post.out.md"
    notes.write_text("Row: {{ layer1.add_norm1[1] }}\n\n{{ layer1.add_norm1.sum | table(1) }}\n")
    assert main(["fill", str(notes), "--out", str(out), "--decimals", "3"]) == 0
    lines = out.read_text().splitlines()
    y = REF["layer1.add_norm1"][1]
    assert lines[0] == "Row: (" + ", ".join(rounded(v, 3) for v in y) + ")"
    r = REF["layer1.add_norm1.sum"]
    assert lines[5] == "| 1 think | " + " | ".join(rounded(v, 1) for v in r[1]) + " |"


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["layer1.head1.weights", "layer1.head2.scores", "layer1.ffn.hidden",
                        "layer1.add_norm2", "output"]),
       st.integers(0, 3), st.integers(0, 5), st.integers(0, 6))
def test_random_entries_match_float64(name, i, j, decimals):
    x = REF[name]
    assume(j < x.shape[1] and far_from_tie(x[i, j], decimals))
    filled = fill(f"{{{{ {name}[{i},{j}] | decimals({decimals}) }}}}", G, "markdown")
    assert filled == rounded(x[i, j], decimals)


BAD = [
    (r"\VAR{ layer1.head9.weights[0,0] }", "unknown stage 'layer1.head9'"),
    (r"\VAR{ layer1.head1.weights[0,4] }", "column 4 is out of range"),
    (r"\VAR{ layer1.head1.weights[7] }", "row 7 is out of range"),
    (r"\VAR{ layer1.head1.weights['nobody', 0] }", "no row named 'nobody'"),
    (r"\VAR{ layer1.head1.weights[0,0] | roman }", "No filter named 'roman'"),
    (r"\VAR{ layer1.head1.weights[0,0] | percent(-1) }", "whole number of decimals"),
    (r"\VAR{ layer1.head1.weights | percent(1) }", "needs one entry"),
    (r"\VAR{ layer1.head1.weights[0,0] | table }", "needs a stage or a token's row"),
    (r"\VAR{ layer1.head1.weights }", "is a whole stage"),
    (r"\VAR{ layer1.head1.weights[0,,0] }", "unexpected ','"),
    (r"\VAR{ layer1.head1.weights[0,0].__class__ }", "a value has no attributes"),
    (r"\VAR{ nope[0,0] }", "unknown stage 'nope'"),
    (r"\VAR{ layer1 }", "layer1 is not a stage but a prefix of stage names: layer1."),
    (r"\VAR{ layer1.head1[0] }", "layer1.head1 is not a stage but a prefix"),
    (r"\VAR{ layer1.head1.weights[0,0] | exact(2) }", "| exact takes no number"),
    (r"\VAR{ layer1.head1.weights[0,0] | decimals(1, 2) }", "takes one number"),
    (r"\VAR{ layer1.head1.weights[0,0] | decimals | percent }", "one format per value"),
    (r"\VAR{ layer1.head1.weights[0,0,0] }", "expected ']'"),
    (r"\VAR{ layer1.head1.weights[0,0] ", "never closed"),
    (r"\BLOCK{ for i in range(3) } \VAR{ i }", "never closed with endfor"),
    (r"\BLOCK{ endfor }", "endfor without a for"),
    (r"\BLOCK{ for input in [0] }\VAR{ input }\BLOCK{ endfor }", "hides the stages"),
    (r"\BLOCK{ for i in [0] }\VAR{ i | decimals }\BLOCK{ endfor }", "found 0"),
    (r"\BLOCK{ for i in ['a'] }\VAR{ input[0, 0] | decimals(i) }\BLOCK{ endfor }",
     "whole number of decimals"),
    (r"\BLOCK{ for i in [0] }\VAR{ input[k, 0] }\BLOCK{ endfor }",
     "unknown loop variable 'k'"),
    (r"\BLOCK{ set x = 1 }", "unknown statement 'set'"),
]


@pytest.mark.parametrize("placeholder, message", BAD)
def test_bad_placeholder_names_the_line_and_writes_nothing(tmp_path, capsys, placeholder,
                                                            message):
    notes, out = tmp_path / "notes.tex", tmp_path / "out.tex"
    notes.write_text(f"line one\n\\VAR{{ input[0,0] }} fine\n{placeholder}\nlast\n")
    out.write_text("old")
    assert main(["fill", str(notes), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"symformer fill: error: {notes}:3: ")
    assert message in err[0]
    assert out.read_text() == "old"


def test_unknown_suffix_needs_format(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("{{ input[0,0] }}")
    assert main(["fill", str(notes), "--out", str(tmp_path / "o")]) == 2
    assert "--format" in capsys.readouterr().err
    assert main(["fill", str(notes), "--format", "markdown", "--out",
                 str(tmp_path / "o")]) == 0
    assert (tmp_path / "o").read_text() == rounded(REF["input"][0, 0], 3)


def test_loops_comments_and_literals(tmp_path):
    """The rest of the language: loops over lists and ranges, loop variables as
    indices and places, comments, literals and whitespace control."""
    w = REF["layer1.head1.weights"]
    text = ("{# a comment with {{ placeholders }} #}"
            "{% for i in range(2) %}{% for j in range(i, 3) -%}\n"
            "  {{ i }}{{ j }}={{ layer1.head1.weights[i, j] | decimals(j) }};\n"
            "{%- endfor %}{% endfor %}|"
            "{% for t in ['think', 'understand'] %}{{ t }}:"
            "{{ layer1.head1.weights[t, 0] | percent(1) }} {% endfor %}|"
            '{{ "{{" }}{{ 7 }}{% for n in [] %}never{% endfor %}')
    expected = "".join(f"{i}{j}={rounded(w[i, j], j)};" for i in range(2)
                       for j in range(i, 3))
    names = G["layer1.head1.weights"].rows
    shares = "".join(f"{t}:{rounded(100 * w[names.index(t), 0], 1)}% "
                     for t in ("think", "understand"))
    assert fill(text, G, "markdown") == f"{expected}|{shares}|{{{{7"
    latex = (r"\COMMENT{ not {{ this }}\BLOCK{ for i in [0, 1] }\VAR{ input[i, 0] | exact }; "
             r"\BLOCK{ endfor }")
    # a comment ends at the first }; input[0,0] is the embedding's 1 plus sin 0
    assert REF["input"][0, 0] == 1
    assert fill(latex, G, "latex") == r"}1; 4 + \sin 1; "


def test_a_prefix_of_stage_names_is_not_a_stage():
    with pytest.raises(InputError) as caught:
        fill("{{ layer1.add_norm1[0] }} {{ layer1.ffn | table }}", G, "markdown")
    below = [s.name for s in G if s.name.startswith("layer1.ffn.")]
    assert str(caught.value) == (f"NOTES:1: layer1.ffn is not a stage but a prefix of "
                                 f"stage names: {', '.join(below[:8])}"
                                 + (", ..." if len(below) > 8 else ""))


@settings(max_examples=40, deadline=None)
@given(st.integers(-5, 5), st.integers(-5, 8),
       st.lists(st.one_of(st.integers(-9, 9), st.sampled_from(["think", "a b", "x'y"])),
                max_size=5),
       st.lists(st.integers(0, 3), min_size=1, max_size=3))
def test_loops_run_like_python(a, b, items, rows):
    """A loop's variable takes Python's range and list values, in order, and indexes
    entries like a literal (checked against the float64 reference)."""
    literal = ", ".join(repr(x) if isinstance(x, str) else str(x) for x in items)
    text = (f"{{% for i in range({a}, {b}) %}}{{{{ i }}}},{{% endfor %}}|"
            f"{{% for x in [{literal}] %}}{{{{ x }}}};{{% endfor %}}|")
    expected = "".join(f"{i}," for i in range(a, b)) + "|" + "".join(f"{x};" for x in items)
    w = REF["layer1.head1.weights"]
    assume(all(far_from_tie(w[i, j], 4) for i in rows for j in range(4)))
    text += (f"{{% for i in {rows} %}}{{% for j in range(4) %}}{{{{ layer1.head1.weights"
             f"[i, j] | decimals(4) }}}} {{% endfor %}}{{% endfor %}}")
    expected += "|" + "".join(f"{rounded(w[i, j], 4)} " for i in rows for j in range(4))
    assert fill(text, G, "markdown") == expected
