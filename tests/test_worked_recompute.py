"""Every printed worked line survives a reader with a calculator.

The items of ``export --format json`` (worked.json) are recomputed here from their
printed literals with fractions and mpmath (tests/recompute.py, which knows nothing
of symformer): each expression, evaluated exactly and rounded to the digits its
result prints, gives that result.  The LaTeX, Markdown, text and MathML renderings
must show the same operands and results as the JSON items.
"""

from __future__ import annotations

import functools
import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recompute import check_item, decimals_of, evaluate
from test_engine_random import examples

from symformer import derive, load_example
from symformer.cli import main
from symformer.example.loader import example_from_dict
from symformer.latex import Options, build, export_files
from symformer.latex.blocks import Worked
from symformer.latex.markdown import to_markdown
from symformer.latex.outline import fragments
from symformer.latex.render import to_latex
from symformer.trace import trace_token
from symformer.worked import as_latex, as_text
from symformer.worked.build import worked_steps
from symformer.worked.model import Style
from symformer.worked.render_mathml import step_pieces
from symformer.worked.to_json import item_dict, plain

#: An optimiser lesson ([objective]: no token rows, no block) has no worked lines to follow
#: a token through; its numbers are its training run's stages (tests/test_optimizer_lesson.py).
NO_TOKENS = ("optimizer_lesson",)
EXAMPLES = sorted(p for p in (Path(__file__).parents[1] / "symformer" / "examples").glob(
    "*.toml") if "claims" not in p.stem and p.stem not in NO_TOKENS)
LITERAL = re.compile(r"\d+(?:\.\d+)?")
KEYS = {"stage", "row", "col", "symbol", "expression", "result", "operands"}


def as_mathml(step) -> str:
    """A worked line's MathML as the trace's page writes it (its pieces, in order)."""
    return "".join(step_pieces(step))


def worked_items(g, **options) -> list[dict]:
    data = json.loads(export_files(g, Options(**options), "json")["worked.json"])
    assert data["title"] == g.example.title
    return data["worked"]


@functools.cache
def builtin_items(block, token: int, decimals: int) -> tuple[dict, ...]:
    """The worked items of ``block`` (the built-in example, unmasked), rendered once,
    every line worked (``full``: the notes otherwise work the first of entries alike)."""
    return tuple(worked_items(block, decimals=decimals, token=token, full=True))


def check_all(items: list[dict], g=None) -> None:
    """Every line recomputes from what it prints; its operands are its literals, with
    their sources; one block prints the operands it reads from earlier stages at one
    precision (``g``, the derivation, tells an exact short decimal printed in full); a
    line that differs from the table says the table's value."""
    assert items
    for item in items:
        assert KEYS <= set(item) <= KEYS | {"exact"}
        check_item(item)
        check_operands(item)
        if "exact" in item:
            assert Fraction(item["exact"]) != Fraction(item["result"]), item
            assert decimals_of(item["exact"]) <= decimals_of(item["result"]), item
    check_one_precision(items, g)


def check_operands(item: dict) -> None:
    """The operands, in reading order, are the expression's printed numbers (a fraction
    1/4 is two literals), each with one source or none (a number of the formula)."""
    shown = [part.lstrip("-") for o in item["operands"] for part in o["value"].split("/")]
    assert shown == _literals(item["expression"]), item
    for o in item["operands"]:
        kinds = {"stage", "parameter", "worked"} & set(o)
        assert len(kinds) <= 1, o
        if "stage" in o:
            assert set(o) == {"value", "stage", "row", "col"}, o
        if "parameter" in o:
            assert set(o) == {"value", "parameter", "index"}, o


def significant_of(text: str) -> int | None:
    """The significant digits a printed decimal shows (None for a zero)."""
    digits = text.lstrip("-").replace(".", "").lstrip("0")
    return len(digits) or None


#: An exact short decimal prints in full with at most this many decimals more than its
#: block (issue 39: 5/16 is 0.3125 at 3 decimals, not 0.312).
SHORT_EXTRA = 2


def in_full(g, operand: dict, fewest: int) -> bool:
    """Whether a forward operand printed with more decimals than its block's ``fewest``
    is its entry's exact value printed in full: at most SHORT_EXTRA more decimals, and
    the entry's certified rounding at 40 decimals is that very decimal."""
    shown = decimals_of(operand["value"])
    if g is None or not fewest < shown <= fewest + SHORT_EXTRA:
        return False
    entry = g[operand["stage"]].values(decimals=40)[operand["row"]][operand["col"]]
    return Fraction(entry) == Fraction(operand["value"])


def check_one_precision(items: list[dict], g=None) -> None:
    """Within one worked block (a stage's row), every operand read from an earlier
    stage shows the same number of decimals (an integer is a table of exact integers,
    printed as such: ``2``, not ``2.000``; an exact short decimal is printed in full,
    as its table prints it: :func:`in_full`); in the Backward part (the loss and the
    gradients), the same number of significant digits."""
    blocks: dict[tuple, list[tuple[int, dict]]] = {}
    for item in items:
        backward = item["stage"] == "loss" or item["stage"].startswith("grad.")
        for o in item["operands"]:
            if "stage" in o and "." in o["value"]:
                shown = significant_of(o["value"]) if backward else decimals_of(o["value"])
                if shown is not None:
                    blocks.setdefault((item["stage"], item["row"], backward), []).append(
                        (shown, o))
    for (stage, row, backward), shown in blocks.items():
        fewest = min(n for n, _ in shown)
        decimals = {n for n, o in shown if backward or not in_full(g, o, fewest)}
        assert len(decimals) == 1, ((stage, row), decimals)


def test_cli_writes_worked_json(tmp_path, block):
    assert main(["export", "--out", str(tmp_path), "--format", "json", "--token", "think",
                 "--decimals", "2", "--full"]) == 0  # --full: every stage worked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["equations.json", "worked.json"]
    data = json.loads((tmp_path / "worked.json").read_text(encoding="utf-8"))
    items = data["worked"]
    check_all(items, block)
    q = [i for i in items if i["stage"] == "layer1.head1.Q"]
    # q_0 = x_0/4 + x_1/4 for "think" (row 1): (4 + sin 1)/4 + (1 + cos 1)/4 = 1.5954...,
    # but from the printed 4.84 and 1.54 a reader gets exactly 1.595 (a tie), rounded
    # half to even at the block's 2 decimals: 1.60, the table's value (no note)
    assert [(i["row"], i["col"], i["symbol"], i["result"], i.get("exact")) for i in q] == [
        (1, 0, "q^(1)_0", "1.60", None), (1, 1, "q^(1)_1", "0.75", None)]
    sums = [i for i in items if i["stage"] == "layer1.head1.weights" and i["col"] is None]
    assert len(sums) == 2  # head 1's denominator, and again under the causal mask
    stages = {i["stage"] for i in items}
    assert {s.name for s in block if s.kind not in ("embeddings", "concat", "output")} <= stages


@pytest.mark.parametrize("token", [0, 1, 2, 3])
@pytest.mark.parametrize("decimals", [1, 2, 3])
def test_builtin_every_line_recomputes(block, token, decimals):
    check_all(list(builtin_items(block, token, decimals)), block)


def test_tie_lines_print_at_the_block_precision(block):
    """A line whose printed operands give exactly a tie (1.595 at 2 decimals) prints its
    result at the block's decimals, rounded half to even (check_item recomputes it so),
    and its exact note, if any, at the same decimals: never one decimal more."""
    ties = 0
    for token in range(4):
        for item in builtin_items(block, token, 2):
            value = evaluate(item["expression"])
            places = decimals_of(item["result"])
            if not isinstance(value, Fraction):
                continue
            if item.get("exact") is not None:
                assert decimals_of(item["exact"]) == places, item
            ties += item["stage"] == "layer1.head1.Q" and (value * 100).denominator == 2
    assert ties  # q_0 of "think": 4.84/4 + 1.54/4 = 1.595, printed 1.60


def test_softmax_chain_recomputes_from_what_it_prints(block):
    """e^{s_1} is rounded from the printed s_1 (e^{1.97} = 7.17, not e^{1.9723} = 7.19),
    and the weights from the printed exponentials and their printed sum."""
    items = [i for i in builtin_items(block, 1, 2) if i["stage"] == "layer1.head1.weights"][:6]
    exps = items[:4]
    assert [i["expression"] for i in exps][1] == "exp(1.97)"
    assert exps[1]["result"] == "7.17"
    assert exps[1]["operands"] == [{"value": "1.97", "stage": "layer1.head1.scores",
                                    "row": 1, "col": 1}]
    total = items[4]
    assert total["col"] is None and total["symbol"] == "Σ"
    assert total["expression"] == " + ".join(i["result"] for i in exps)
    assert [o["worked"] for o in total["operands"]] == [f"exp(s^(1)_{j})" for j in range(4)]
    assert items[5]["expression"] == f"{exps[0]['result']}/{total['result']}"
    # the sum is a line of its own, over the printed terms: 21.60 exactly, never a
    # chain that puts e^{1.66} + ... (21.61) and 5.26 + ... (21.60) on one line
    tex = to_latex(Worked(*_latex_steps(block["layer1.head1.weights"])))
    assert r"e^{s^{(1)}_{1}} &= e^{1.97} \approx 7.17" in tex
    assert r"\approx 5.26 + 7.17 + 5.64 + 3.53 = 21.60" in tex
    assert "e^{1.66} + e^{1.97}" not in tex


def test_a_tie_from_the_printed_operands_prints_the_tie_and_the_exact_value(block):
    """q_1 of "think" is (sin(1/100) + 2 + cos(1/100))/4 = 0.75248...; from the
    3-decimal inputs 0.010 and 3.000 (what the table shows) a reader gets exactly
    0.7525, a tie, rounded half to even at the block's 3 decimals: 0.752, which is
    also the exact value's rounding, so the line needs no note."""
    q = next(s for s in trace_token(block, 1, decimals=3).steps if s.stage == "layer1.head1.Q")
    line = as_text(q.entries[1].worked)
    assert "0.010·0.25 + 3.000·0.25 ≈ 0.752" in line and "exact" not in line
    (item,) = q.entries[1].worked.items
    shown = item_dict(item)
    check_item(shown)
    assert (shown["result"], shown.get("exact")) == ("0.752", None)


def test_operands_are_the_numbers_the_tables_print(block):
    """Every operand read from an earlier stage is that stage's table entry as printed
    (same decimals), and every weight operand is the example file's exact weight."""
    from symformer.latex.numbers import weight
    from symformer.latex.tables import stage_values

    items = builtin_items(block, 1, 2)
    stages = {s.name for s in block}  # the forward stages (the backward's have no table)
    checked = 0
    for item in items:
        if item["stage"] not in stages:
            continue
        op = block[item["stage"]].op
        for o in item["operands"]:
            if "stage" in o:
                table = stage_values(block[o["stage"]], 2)  # as the table prints it
                assert o["value"] == table[o["row"]][o["col"]]
                checked += 1
            if "parameter" in o and o["parameter"].startswith("W"):
                k, j = o["index"]
                assert Fraction(o["value"]) == Fraction(str(op.W[k, j])), (item, o)
                assert o["value"] == weight(op.W[k, j])
                checked += 1
    assert checked > 100


def test_a_line_that_differs_from_its_table_names_the_exact_value(block):
    """The reader's path: u_2 of "think" is 1.60·1.23 + 0.75·0.65 = 2.4555 ≈ 2.46 from
    the printed q and k, while the exact entry rounds to 2.45."""
    items = builtin_items(block, 1, 2)
    (u2,) = [i for i in items if i["stage"] == "layer1.head1.raw_scores" and i["col"] == 2]
    assert u2["expression"] == "1.60*1.23 + 0.75*0.65"
    assert (u2["result"], u2["exact"]) == ("2.46", "2.45")
    assert u2["exact"] == block["layer1.head1.raw_scores"].values(decimals=2)[1][2]
    tex = to_latex(Worked(*_latex_steps(block["layer1.head1.raw_scores"])))
    assert r"\approx 2.46\ (\text{exact: } {2.45})" in tex


def _latex_steps(stage):
    from symformer.latex.worked import worked_example

    worked = worked_example(stage, 1)
    return worked.steps, worked.items


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_shipped_examples_recompute(path):
    assert EXAMPLES
    example = load_example(path)
    g = derive(example)
    check_all(worked_items(g, decimals=2, token=len(example.tokens) - 1), g)
    check_all(worked_items(g, decimals=3, token=1, exact=True), g)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(examples(), st.booleans(), st.integers(1, 4), st.booleans(), st.data())
def test_random_examples_recompute(data, causal, decimals, exact, draw):
    example = example_from_dict(data, "random")
    g = derive(example, causal=causal)
    token = draw.draw(st.integers(0, len(example.tokens) - 1))
    check_all(worked_items(g, decimals=decimals, token=token, exact=exact), g)


def _literals(expression: str) -> list[str]:
    return LITERAL.findall(expression)


def _scientific(literal: str) -> tuple[str, int] | None:
    """(mantissa, exponent) of an unsigned printed decimal that is nonzero and below
    10^-4, with the printed digits (``0.00002859``: ("2.859", -5)); else None."""
    if "." not in literal or not 0 < Fraction(literal) < Fraction(1, 10 ** 4):
        return None
    fraction = literal.split(".")[1]
    digits = fraction.lstrip("0")
    return digits[0] + ("." + digits[1:] if digits[1:] else ""), len(digits) - len(fraction) - 1


def latex_form(literal: str) -> str:
    """How LaTeX sets an unsigned printed decimal (issue 39): as printed, or, nonzero
    below 10^-4, in scientific notation with the printed digits (``0.00002859`` is
    ``2.859 \\times 10^{-5}``, ``0.000001`` is ``10^{-6}``)."""
    small = _scientific(literal)
    if small is None:
        return literal
    mantissa, exponent = small
    return f"10^{{{exponent}}}" if mantissa == "1" else rf"{mantissa} \times 10^{{{exponent}}}"


def mathml_form(literal: str) -> str:
    """How MathML sets an unsigned printed decimal: ``<mn>`` or, below 10^-4, the
    mantissa times a power of ten (as :func:`latex_form`)."""
    small = _scientific(literal)
    if small is None:
        return f"<mn>{literal}</mn>"
    mantissa, exponent = small
    power = f"<msup><mn>10</mn><mrow><mo>\u2212</mo><mn>{-exponent}</mn></mrow></msup>"
    return power if mantissa == "1" else f"<mn>{mantissa}</mn><mo>\u00d7</mo>{power}"


def test_latex_form_by_hand():
    assert latex_form("0.000001") == "10^{-6}"
    assert latex_form("0.00002859") == r"2.859 \times 10^{-5}"
    assert latex_form("0.0001") == "0.0001" and latex_form("1.5") == "1.5"
    assert mathml_form("0.000001") == "<msup><mn>10</mn><mrow><mo>\u2212</mo><mn>6</mn>" \
        "</mrow></msup>"
    assert mathml_form("0.5") == "<mn>0.5</mn>"


def test_renderings_show_the_json_operands_and_results(block):
    """The LaTeX and Markdown fragments, the text and the MathML of every step print the
    operands and results that worked.json lists."""
    outline = build(block, Options(decimals=2, token=1, full=True))  # every line
    seen = 0
    for fragment in fragments(outline):
        worked = [b for b in fragment.blocks if isinstance(b, Worked)]
        if not worked:
            continue
        tex, markdown = to_latex(fragment), to_markdown(fragment)
        for item in worked[0].items:
            shown = item_dict(item)
            for text in (tex, markdown):
                assert latex_form(shown["result"].lstrip("-")) in text
                for literal in _literals(shown["expression"]):
                    assert latex_form(literal) in text, (fragment.name, literal)
            seen += 1
    assert seen > 100
    for stage in block:
        for step in worked_steps(stage, 1, Style(2)).steps:
            text, tex, mathml = as_text(step), as_latex(step), as_mathml(step)
            for item in step.items:
                assert item.result.text.lstrip("-") in text
                assert mathml_form(item.result.text.lstrip("-")) in mathml
                for literal in _literals(plain(item.expression)):
                    assert literal in text and latex_form(literal) in tex
                    assert mathml_form(literal) in mathml, (stage.name, literal)


def test_products_of_numbers_show_their_sign(block):
    """2 · 0.000 must never print as 20.000: every product of two numbers has a sign."""
    step = worked_steps(block["layer1.ffn.output"], 1, Style(3)).steps[0]
    tex, text, mathml = as_latex(step), as_text(step), as_mathml(step)
    assert re.search(r"0\.000 \\cdot 0\.4", tex)
    assert "0.000·0.4" in text
    assert "<mn>0.000</mn><mo>·</mo><mn>0.4</mn>" in mathml
    assert "</mn><mn>" not in mathml


def test_subtraction_and_sums_in_written_order(block):
    variance = worked_steps(block["layer1.add_norm1.variance"], 1, Style(2)).steps[0]
    assert r"\left(r_{0} - \mu\right)^{2}" in as_latex(variance)
    assert "<mo>\u2212</mo>" in as_mathml(variance)
    assert "-1 + n" not in json.dumps([s.general[0].text for s in
                                       trace_token(block, 1).steps if s.general])


def test_gelu_tanh_lines_are_the_textbook_formula():
    """GELU-tanh's worked lines substitute h into (h/2)(1 + tanh(sqrt(2/pi)(h + 0.044715
    h^3))), not SymPy's normal form (8943 h^3 + 200000 h)/200000, and a reader's
    float64 recomputation of the textbook formula lands on the printed result."""
    import math

    g = derive(load_example("gpt2_style"))
    items = [i for i in worked_items(g, decimals=3, token=2, full=True)
             if i["stage"].endswith("ffn.activation")]
    assert len(items) == 8
    number = r"\(?(-?\d+\.\d+)\)?"
    shape = re.compile(rf"^\({number}/2\)\*\(1 \+ tanh\(sqrt\(2/pi\)\*\({number} \+ "
                       rf"0\.044715\*{number}\*\*3\)\)\)$")
    for item in items:
        m = shape.match(item["expression"])
        assert m, item["expression"]
        assert len(set(m.groups())) == 1  # the same printed h, three times
        h = float(m.group(1))
        textbook = 0.5 * h * (1 + math.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        assert abs(textbook - float(item["result"])) < 0.0005 + 1e-12
        check_item(item)
    text = "\n".join(as_text(s) for s in worked_steps(
        g["layer1.ffn.activation"], 2, Style(3)).steps)
    latex = "\n".join(as_latex(s) for s in worked_steps(
        g["layer1.ffn.activation"], 2, Style(3)).steps)
    assert "8943" not in text + latex and "200000" not in text + latex
    assert r"\tanh" in latex and r"\sqrt{\frac{2}{\pi}}" in latex and "0.044715" in latex


def test_an_exact_zero_over_a_root_is_equal_not_approximate():
    """Printed operands summing to exactly 0, over a root or times an exponential, make
    the line's value exactly 0 (``=``), while a root alone stays irrational (None) and
    0 / 0 is no value."""
    from fractions import Fraction as F

    from symformer.worked.evaluate import exact_value
    from symformer.worked.model import Add, Div, Func, Mul, Num, Pow

    def num(text: str) -> Num:
        return Num(text, F(text))

    root = Pow(Add((num("1.00000"), num("0.000001"))), num("0.5"))
    zero = Add((num("-0.01508"), num("0.01508")))
    assert exact_value(Div(zero, root)) == 0
    assert exact_value(Mul((zero, Func("exp", (num("2.5"),))))) == 0
    assert exact_value(Div(num("1"), root)) is None
    assert exact_value(Mul((num("2"), Func("exp", (num("1"),))))) is None
    assert exact_value(Div(zero, Add((num("1"), num("-1"))))) is None


def _tiny_q_items(first: str, second: str) -> tuple[object, list[dict]]:
    """attention_only with the embeddings ``first`` and ``second``: its derivation and
    the worked items of head 1's query row of position 1 at 2 decimals."""
    from importlib import resources

    from symformer import parse_example

    text = (resources.files("symformer.examples") / "attention_only.toml").read_text("utf-8")
    text = re.sub(r"embeddings = \[.*?\n\]", f'embeddings = [\n    ["{first}", 0, "{first}"],\n'
                  f'    [0, "{second}", 0],\n    ["{first}", "{first}", "{first}"],\n]',
                  text, count=1, flags=re.S)
    g = derive(parse_example(text))
    items = [i for i in worked_items(g, decimals=2, token=1)
             if i["stage"] == "layer1.head1.Q"]
    assert items
    check_all(items, g)
    return g, items


def test_operands_that_would_all_print_as_zero_show_two_significant_digits():
    """attention_only with embeddings of 3/20000 = 0.00015 (5 decimals: too long to
    print in full at 2): at 2 decimals every input prints as 0.00, so a line would read
    0.00 · 1 + 0.00 · 1; the block prints its operands with more decimals, so that
    each nonzero one shows two significant digits (0.00015: exact, in full, next to
    the exact zeros at the block's 4 decimals), and recomputes."""
    _, items = _tiny_q_items("3/20000", "3/20000")
    shown = {o["value"] for i in items for o in i["operands"] if "stage" in o}
    assert "0.00015" in shown
    assert all(significant_of(v) == 2 for v in shown if Fraction(v))


def test_exact_short_operands_print_in_full():
    """With embeddings of 1/10000 and 2/10000 (exact with 4 decimals, at most 2 more
    than the table's 2) the table prints 0.0002 in full and the line reads it: the
    exact value, from which the line's result is exact (issue 39, item 6)."""
    _, items = _tiny_q_items("1/10000", "2/10000")
    shown = {o["value"] for i in items for o in i["operands"] if "stage" in o}
    assert "0.0002" in shown
    assert all(Fraction(i["result"]) in (0, Fraction(2, 10000)) for i in items)
