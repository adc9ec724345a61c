"""Every run ends within a known bound, never with a traceback, and the commands agree.

Regression tests for the reproducers of the reliability issue (limits on numbers,
files, nesting, options and work; tracebacks; agreement between the commands).
Each bad input must end with exit status 2 and a one-line message naming the
culprit; the bounds are by design (refused before any work), never timed here.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from float_reference import float_forward
from hypothesis import given, settings
from hypothesis import strategies as st

from symformer.blocks.cost import estimate
from symformer.blocks.work import check_size, estimated_work, work_limit
from symformer.cli import main
from symformer.errors import InputError
from symformer.example import load_example
from symformer.example.literals import MAX_EXPONENT, MAX_LITERAL_LENGTH, exact_number
from symformer.example.loader import MAX_FILE_BYTES, builtin_text, parse_example

GOOD = builtin_text().rsplit("\n[loss]", 1)[0]  # the variants change shapes: no loss
ED = Path(__file__).resolve().parent.parent / "symformer" / "examples" / "encoder_decoder.toml"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the command line in-process: (status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def refused(capsys, *argv: str, culprit: str) -> str:
    """Run, expecting exit 2, one message naming ``culprit`` and no traceback."""
    status, _, err = run(capsys, *argv)
    assert status == 2, err
    assert culprit in err, err
    assert "Traceback" not in err and "internal error" not in err
    return err


def write(tmp_path: Path, text: str, name: str = "example.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def with_b2(first: str) -> str:
    """The built-in example with b_2[0] replaced by the TOML text ``first``."""
    text = GOOD.replace("b_2 = [0.1, 0.1, 0.1, 0.1]", f"b_2 = [{first}, 0.1, 0.1, 0.1]")
    assert text != GOOD
    return text


# -- numbers ------------------------------------------------------------------------
@pytest.mark.parametrize(("literal", "culprit"), [
    ('"1e99999999"', "the exponent of 1e99999999 is out of range"),
    ("1e99999999", "the exponent of 1e99999999 is out of range"),
    ('"0e99999999"', "the exponent of 0e99999999 is out of range"),
    ('"٣"', "'٣' is not a number"),
    ('"𝟙"', "'𝟙' is not a number"),
    ('"1e1_0"', "'1e1_0' is not a number"),
    ('"1_000"', "'1_000' is not a number"),
    ('"0.' + "1" * 5000 + '"', "more than the limit of 1,000"),
    ("0." + "1" * 5000, "more than the limit of 1,000"),
    ('"1/' + "9" * 5000 + '"', "more than the limit of 1,000"),
    ("9" * 5000, "is too long"),
])
def test_number_limits_are_checked_on_the_text(tmp_path, capsys, literal, culprit):
    err = refused(capsys, "derive", write(tmp_path, with_b2(literal)), culprit=culprit)
    assert "b_2[0]" in err or "line 54 (b_2)" in err
    assert len(err) < 400  # a 5,000-digit number is shortened in the message


def test_toml_underscores_between_digits_stay_valid():
    example = parse_example(with_b2("1_0.2_5"))
    assert example.layers[0].b_2[0] == Fraction(41, 4)


def _digits(low: int, high: int) -> st.SearchStrategy[str]:
    return st.text("0123456789", min_size=low, max_size=high)


_SIGN = st.sampled_from(["", "+", "-"])
#: The decimal literals [+-]?[0-9]{1,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,3})?, built
#: from their parts (three times faster to draw than st.from_regex of that pattern).
DECIMAL_LITERALS = st.builds(
    lambda sign, whole, point, exponent: sign + whole + point + exponent,
    _SIGN, _digits(1, 30), st.just("") | _digits(0, 30).map(lambda d: "." + d),
    st.just("") | st.builds(lambda e, sign, d: e + sign + d, st.sampled_from("eE"), _SIGN,
                            _digits(1, 3)))


@settings(max_examples=200, deadline=None)
@given(DECIMAL_LITERALS)
def test_decimal_literals_read_exactly(text):
    """Against Python's fractions module (an independent reader of the same text)."""
    assert re.fullmatch(r"[+-]?[0-9]{1,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,3})?", text)
    expected = Fraction(text)
    if expected and not Fraction(1, 10**100) <= abs(expected) <= 10**100:
        with pytest.raises(InputError, match="out of range"):
            exact_number(text, "x")
    else:
        assert exact_number(text, "x") == expected


def test_exponent_and_length_limits_are_the_documented_ones():
    assert exact_number(f"0e{MAX_EXPONENT}", "x") == 0
    with pytest.raises(InputError, match="exponent"):
        exact_number(f"0e{MAX_EXPONENT + 1}", "x")
    longest = "1." + "0" * (MAX_LITERAL_LENGTH - 3) + "1"
    assert len(longest) == MAX_LITERAL_LENGTH
    assert exact_number(longest, "x") == 1 + Fraction(1, 10 ** (MAX_LITERAL_LENGTH - 2))
    with pytest.raises(InputError, match="characters"):
        exact_number(longest + "0", "x")


def test_huge_numbers_in_claims_and_masks_are_refused_at_once(tmp_path, capsys):
    claims = write(tmp_path, '[[claim]]\nstage = "input"\ndecimals = 2\n'
                             'values = [["1e99999999", 1, 3, 3]]\nrows = [0]\n', "claims.toml")
    refused(capsys, "check", claims, culprit="the exponent of 1e99999999")
    refused(capsys, "crosscheck", "--mask=-1e99999999", culprit="the exponent of -1e99999999")
    refused(capsys, "derive", "--causal", "--mask", "-0e99999999", culprit="exponent")


def test_an_entry_of_1e99_is_derived_not_hung(tmp_path, capsys):
    """W_V[2][1] = -1e99: every stage is derived (once more precision than the first
    tries, not an exact proof, was what the ball needed); V checked with Decimal."""
    text = GOOD.replace("W_V = [[0, 0.25], [0.25, 0], [0.25, 0], [0, 0.5]]",
                        "W_V = [[0, 0.25], [0.25, 0], [0.25, -1e99], [0, 0.5]]")
    assert text != GOOD
    path = write(tmp_path, text)
    status, out, err = run(capsys, "derive", path)
    assert status == 0, err
    status, out, err = run(capsys, "derive", path, "--json", "--digits", "100",
                           "--stage", "layer1.head1.V")
    assert status == 0, err
    value = json.loads(out)["stages"]["layer1.head1.V"]["values"][0][1]
    # input row 0 is "I" = (1, 0, 3, 2) plus PE(0) = (0, 1, 0, 1): V[0,1] = 0.25 + 3(-1e99 + 0.5)
    with localcontext() as ctx:
        ctx.prec = 100
        expected = +(Decimal("0.25") + 3 * (Decimal("-1e99") + Decimal("0.5")))
    assert Decimal(value) == expected


# -- files and nesting --------------------------------------------------------------
def test_special_files_are_refused_before_reading(tmp_path, capsys):
    if os.path.exists("/dev/zero"):
        refused(capsys, "derive", "/dev/zero", culprit="/dev/zero: is not a regular file")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # opening must not wait for a writer
    refused(capsys, "derive", str(fifo), culprit="is not a regular file")
    refused(capsys, "check", str(fifo), culprit="is not a regular file")
    refused(capsys, "derive", str(tmp_path), culprit="is a directory")


def test_files_over_the_size_limit_are_refused(tmp_path, capsys):
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * MAX_FILE_BYTES)
    refused(capsys, "derive", str(big), culprit="larger than the limit of 8 MiB")
    refused(capsys, "check", str(big), culprit="larger than the limit of 8 MiB")


def test_deep_nesting_is_refused(tmp_path, capsys):
    deep = "[" * 1000 + "]" * 1000
    refused(capsys, "derive", write(tmp_path, f"description = {deep}\n" + GOOD),
            culprit="nested more than 32 levels deep")
    claims = write(tmp_path, f'title = {deep}\n[[claim]]\nstage = "input"\ndecimals = 2\n'
                             f'values = [[1, 1, 3, 3]]\n', "claims.toml")
    refused(capsys, "check", claims, culprit="nested more than 32 levels deep")
    shallow = "[" * 40 + "]" * 40  # parses, but deeper than the documented limit
    refused(capsys, "derive", write(tmp_path, f"description = {shallow}\n" + GOOD),
            culprit="nested more than 32 levels deep")


# -- options ------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "culprit"), [
    (["derive", "--decimals", "5000"], "--decimals: must be from 0 to 100"),
    (["derive", "--json", "--digits", "5000"], "--digits: must be from 1 to 100"),
    (["trace", "--token", "1", "--decimals", "100000"], "--decimals: must be from 0 to 100"),
    (["export", "--out", "unused", "--decimals", "100000"], "--decimals: must be from 0 to"),
    (["generate", "--decimals", "٣"], "--decimals: expected a whole number"),
    (["generate", "--steps", "100000"], "--steps: must be from 1 to 1000"),
    (["derive", "--exact=100000"], "--exact-max-ops: must be from 1 to 400"),
    (["derive", "--exact", "100000"], "--exact takes no number"),
    (["derive", "--max-work", "-1"], "--max-work: expected a whole number"),
    (["derive", "--max-work", "1e9"], "--max-work: expected a whole number"),
    (["trace", "--token", "9" * 5000], "--token: position 99999999999999999999..."),
    (["export", "--out", "unused", "--token", "9" * 5000], "is out of range"),
    (["crosscheck", "--tol", "nan"], "--tol: must be a finite number >= 0"),
    (["crosscheck", "--tol", "-1"], "--tol: must be a finite number >= 0"),
    (["crosscheck", "--tol", "inf"], "--tol: must be a finite number >= 0"),
])
def test_option_limits(capsys, argv, culprit):
    with pytest.raises(SystemExit) as stop:  # argparse's own exit 2, with the usage line
        status = main(argv)
        raise SystemExit(status)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert culprit in err and "Traceback" not in err


def test_exact_takes_its_size_only_with_an_equals_sign(capsys):
    status, out, _ = run(capsys, "derive", "--exact=20", "--stage", "input")
    assert status == 0 and "sin(1) + 4" in out
    status, out, _ = run(capsys, "derive", "--exact", "--exact-max-ops", "20", "--stage",
                         "input")
    assert status == 0 and "sin(1) + 4" in out
    status, out, err = run(capsys, "derive", "--exact", "encoder_decoder", "--stage", "input")
    assert status == 0, err  # the file is not swallowed as --exact's value


@pytest.mark.parametrize("value", ["abc", "", "1e9", "-1", "1.5"])
def test_bad_work_limit_in_the_environment(capsys, monkeypatch, value):
    monkeypatch.setenv("SYMFORMER_MAX_WORK", value)
    refused(capsys, "derive", "--stage", "input", culprit=f"SYMFORMER_MAX_WORK={value!r}")


def test_zero_means_no_limit_on_the_command_line_and_in_the_environment(monkeypatch, capsys):
    example = load_example()
    huge = 10**15
    check_size(example, 0, huge)  # --max-work 0: no limit
    monkeypatch.setenv("SYMFORMER_MAX_WORK", "0")
    assert work_limit(None) == 0
    check_size(example, None, huge)
    assert run(capsys, "derive", "--stage", "input")[0] == 0
    monkeypatch.delenv("SYMFORMER_MAX_WORK")
    assert run(capsys, "derive", "--max-work", "0", "--stage", "input")[0] == 0
    with pytest.raises(InputError, match=r"over the limit of 5 M \(about 10 s\)"):
        check_size(example, None, huge)


def _random_example(n: int, d: int, heads: int, layers: int, seed: int = 1) -> str:
    """A random example with dyadic weights (cheap to parse, costly to prove)."""
    r = random.Random(seed)
    values = ["-1", "-0.5", "0.25", "0.5", "1"]

    def m(a: int, b: int) -> str:
        return "[" + ", ".join("[" + ", ".join(r.choice(values) for _ in range(b)) + "]"
                               for _ in range(a)) + "]"

    def v(b: int) -> str:
        return "[" + ", ".join(r.choice(values) for _ in range(b)) + "]"

    dk = d // heads
    vocab = ", ".join(f'"w{i}"' for i in range(n))
    out = [f"vocab = [{vocab}]", f"tokens = [{vocab}]", f"embeddings = {m(n, d)}"]
    for _ in range(layers):
        out += ["[[layer]]", f"W_1 = {m(d, d)}", f"b_1 = {v(d)}", f"W_2 = {m(d, d)}",
                f"b_2 = {v(d)}"]
        for _ in range(heads):
            out += ["[[layer.head]]", f"W_Q = {m(d, dk)}", f"W_K = {m(d, dk)}",
                    f"W_V = {m(d, dk)}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(("argv", "n"), [(["prove"], 16), (["trace", "--token", "0"], 32)])
def test_the_work_limit_covers_what_each_command_does(tmp_path, capsys, argv, n):
    """A forward pass well within the limit; prove's proofs and trace's formulas are
    not: they are refused before any derivation, with the way to raise the limit."""
    path = write(tmp_path, _random_example(n, 16, 4, 2))
    assert estimated_work(load_example(path)) < 5_000_000 // 20
    err = refused(capsys, *argv, path, culprit=f"`symformer {argv[0]}` on this example")
    assert "--max-work N" in err and "(0: no limit)" in err


def test_generate_costs_a_forward_pass_per_step(capsys):
    limit = str(estimate("generate", load_example(ED), steps=4))
    assert run(capsys, "generate", "--steps", "2", "--max-work", limit)[0] == 0
    refused(capsys, "generate", "--steps", "6", "--max-work", limit,
            culprit="`symformer generate` on this example")


# -- tracebacks ---------------------------------------------------------------------
def test_claim_with_fewer_rows_is_not_used_as_a_printed_table(tmp_path, capsys):
    claims = write(tmp_path, """
[[claim]]
name = "input_row0"
stage = "input"
decimals = 2
values = [1.0, 1.0, 3.0, 3.0]

[[claim]]
name = "Q"
stage = "layer1.head1.Q"
decimals = 2
values = [[0.5, 1.5], [1.59, 0.75], [0.37, 1.5], [0.54, 1.51]]
""", "claims.toml")
    status, out, err = run(capsys, "check", claims)
    assert status == 1 and "Traceback" not in err
    assert "q^(1)_0 of 'think' (position 1): claimed 1.59, correct 1.60" in out
    assert "11 of 12 numbers correct" in out


def test_minus_inf_in_a_finite_stage_is_refused(tmp_path, capsys):
    claims = write(tmp_path, """
[[claim]]
name = "weights"
stage = "layer1.head1.weights"
decimals = 3
values = [["-inf", 0.265, 0.158, 0.365], [0.243, 0.332, 0.262, 0.163],
          [0.208, 0.255, 0.153, 0.383], [0.212, 0.267, 0.16, 0.361]]
""", "claims.toml")
    refused(capsys, "check", claims,
            culprit="values[0][0] is '-inf', but layer1.head1.weights has finite entries")


def test_a_huge_cross_attention_key_gives_no_traceback(tmp_path, capsys):
    text = ED.read_text(encoding="utf-8")
    lines = text.splitlines()
    cross = lines.index(next(x for x in lines if x.startswith("[[decoder.layer.cross_head]]")))
    assert lines[cross + 2].startswith("W_K = [[")
    lines[cross + 2] = re.sub(r"\[\[[^,]*,", "[[1e30,", lines[cross + 2], count=1)
    assert "1e30" in lines[cross + 2]
    path = write(tmp_path, "\n".join(lines) + "\n")
    for argv in (["derive"], ["generate", "--steps", "1"],
                 ["export", "--out", str(tmp_path / "out"), "--format", "markdown"]):
        status, _, err = run(capsys, *argv[:1], path, *argv[1:])
        assert status in (0, 2) and "Traceback" not in err and "internal error" not in err
        if status == 2:
            assert "too large to print" in err


def test_zero_variance_decoder_with_eps_0_gives_no_traceback(tmp_path, capsys):
    """eps = 0 and constant decoder rows: LayerNorm is 0/0 there; an error, not a crash."""
    text = ED.read_text(encoding="utf-8").replace('eps = "1e-6"', "eps = 0", 1)
    start = text.index("embeddings = [", text.index("[decoder]"))
    end = text.index("]\n", text.index("# </s>", start)) + 2
    text = (text[:start] + "embeddings = " + str([[1, 1, 1, 1]] * 5) + "\n"
            + 'positional_encoding = "none"\n' + text[end:])
    path = write(tmp_path, text)
    for command in ("derive", "generate", "crosscheck"):
        status, _, err = run(capsys, command, path)
        assert status in (1, 2) and "Traceback" not in err and "internal error" not in err


def test_reader_rounding_covers_every_decoder_stage(capsys):
    status, out, err = run(capsys, "derive", "--reader-rounding", "--decimals", "2",
                           "encoder_decoder", "--json")
    assert status == 0, err
    stages = json.loads(out)["stages"]
    probabilities = [[Fraction(v) for v in row] for row in stages["probabilities"]["values"]]
    # reader-rounded probabilities are each rounded to 2 decimals, rows sum to about 1
    assert all(abs(sum(row) - 1) <= Fraction(len(row), 200) for row in probabilities)
    assert "next_token" in stages


def test_an_unexpected_exception_is_one_line_unless_debugging(capsys, monkeypatch):
    import symformer.cli.derive as derive_command

    def broken(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(derive_command, "run", broken)
    monkeypatch.delenv("SYMFORMER_DEBUG")
    status, _, err = run(capsys, "derive")
    assert status == 2 and "Traceback" not in err
    assert err.strip() == ("symformer derive: internal error: ZeroDivisionError: division by "
                           "zero (please report it with the command line; SYMFORMER_DEBUG=1 "
                           "shows the traceback)")

    def deep(args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(derive_command, "run", deep)
    status, _, err = run(capsys, "derive")
    assert status == 2 and "nested too deeply" in err
    monkeypatch.setenv("SYMFORMER_DEBUG", "1")
    with pytest.raises(RecursionError):
        main(["derive"])


# -- the commands agree -------------------------------------------------------------
def _causal_claims(tmp_path: Path) -> str:
    """The masked weights of head 1 at 3 decimals, from the independent float reference."""
    weights = float_forward(load_example(), causal=True)["layer1.head1.weights"]
    rows = ", ".join("[" + ", ".join(f"{w:.3f}" for w in row) + "]" for row in weights)
    return write(tmp_path, f'[[claim]]\nstage = "layer1.head1.weights"\ndecimals = 3\n'
                           f'values = [{rows}]\n', "claims.toml")


def test_check_follows_the_examples_causal_setting(tmp_path, capsys):
    claims = _causal_claims(tmp_path)
    example = write(tmp_path, GOOD.replace("causal = false", "causal = true"))
    assert np.count_nonzero(float_forward(load_example(), causal=True)
                            ["layer1.head1.weights"]) == 10
    status, out, err = run(capsys, "check", claims, example)  # positional example
    assert status == 0, out + err
    assert run(capsys, "check", claims, "--example", example)[0] == 0
    assert run(capsys, "check", claims)[0] == 1  # the built-in example is not causal
    assert run(capsys, "check", claims, "--causal")[0] == 0
    refused(capsys, "check", claims, example, "--example", "encoder_decoder",
            culprit="two examples given")


def test_mask_takes_a_negative_number_without_equals(capsys):
    argv = ["derive", "--causal", "--json", "--digits", "20", "--stage", "layer1.head1.weights"]
    spaced = run(capsys, *argv, "--mask", "-1e9")
    joined = run(capsys, *argv, "--mask=-1e9")
    assert spaced[0] == joined[0] == 0 and spaced[1] == joined[1]
    weights = json.loads(spaced[1])["stages"]["layer1.head1.weights"]["values"]
    assert weights[0][1] != "0"  # exp(-1e9 + ...) > 0: the mask is finite
    assert 0 < Decimal(weights[0][1]) < Decimal("1e-400000000")  # about exp(-1e9 / sqrt 2)
    assert run(capsys, "crosscheck", "--causal", "--mask", "-1e9")[0] == 0


def help_text(capsys, command: str) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command",
                         ["derive", "export", "trace", "check", "prove", "crosscheck",
                          "generate"])
def test_every_deriving_command_has_the_conventions(capsys, command):
    text = help_text(capsys, command)
    for option in ("--mask", "--layer-norm", "--norm", "--max-work", "--example"):
        assert option in text, option


@pytest.mark.parametrize("command", ["derive", "export", "trace", "generate"])
def test_one_default_number_of_decimals(capsys, command):
    assert "(default 3, at most 100)" in " ".join(help_text(capsys, command).split())


def test_help_texts(capsys):
    assert "floating-point type" in help_text(capsys, "crosscheck")
    assert "packaged encoder_decoder example" in " ".join(help_text(capsys, "generate").split())
    trace = help_text(capsys, "trace")
    assert "--token export \\\n      --layer-norm whole_matrix" in trace


def test_export_of_a_one_token_example(tmp_path, capsys):
    text = GOOD.replace('tokens = ["I", "think", "I", "understand"]', 'tokens = ["think"]')
    assert text != GOOD
    path = write(tmp_path, text)
    status, _, err = run(capsys, "export", path, "--out", str(tmp_path / "out"),
                         "--format", "markdown")
    assert status == 0, err
    assert "think" in (tmp_path / "out" / "main.md").read_text(encoding="utf-8")


def test_prove_states_the_last_token_fact_only_where_it_is_a_theorem(tmp_path, capsys,
                                                                    builtin_prove_json):
    first = GOOD.index("[[layer]]")
    two = GOOD.replace("causal = false", "causal = true") + "\n" + GOOD[first:]
    path = write(tmp_path, two)
    status, out, err = run(capsys, "prove", path, "--json")
    assert status == 0, err
    fact = next(f for f in json.loads(out)["facts"] if f["name"] == "last_token_unchanged")
    assert fact["status"] == "proved"
    assert "first block (layer1.add_norm2)" in fact["statement"]
    # the float reference agrees that layer 2 does change the last row (not a theorem)
    plain = float_forward(load_example(path), causal=False)["output"][-1]
    masked = float_forward(load_example(path), causal=True)["output"][-1]
    assert not np.allclose(plain, masked)
    status, out = builtin_prove_json
    fact = next(f for f in json.loads(out)["facts"] if f["name"] == "last_token_unchanged")
    assert fact["statement"] == "the last token's output is unchanged by the causal mask"


# -- --json honours --decimals; exp(-1e9)-small digits are bounded (issue 20, item 9) --
MASKED_FIRST_QUERY = ["backward", "--causal", "--mask", "-1e9", "--stage",
                      "grad.layer1.head2.scores"]


def test_backward_json_rounds_to_the_decimals_given(capsys):
    """A gradient of about e^(-10^9) (the causal first query under a -1e9 mask) took
    2 min with --json: the JSON now has the --decimals of the table, the same numbers."""
    status, out, err = run(capsys, *MASKED_FIRST_QUERY, "--json", "--decimals", "6")
    assert status == 0, err
    values = json.loads(out)["stages"]["grad.layer1.head2.scores"]["values"]
    assert all(re.fullmatch(r"-?\d+\.\d{6}", v) for row in values for v in row), values
    status, table, _ = run(capsys, *MASKED_FIRST_QUERY, "--decimals", "6")
    rows = [line.split()[2:] for line in table.splitlines() if re.match(r"\d+ ", line)]
    assert rows == values
    assert values[0] == ["0.000000"] * 4  # the first query's row: exp(-1e9)-small or 0


def test_json_takes_decimals_or_digits_not_both(capsys):
    refused(capsys, "derive", "--json", "--decimals", "2", "--digits", "5",
            culprit="--decimals and --digits")


def test_significant_digits_of_an_exp_minus_a_billion_gradient_are_bounded(capsys):
    """Significant digits of e^(-10^9)-small gradients: digits where the mask's share
    is enclosed apart, else the certified enclosure, never minutes of proofs."""
    start = time.process_time()
    status, out, err = run(capsys, *MASKED_FIRST_QUERY, "--json", "--digits", "6")
    assert status == 0, err
    assert time.process_time() - start < 30  # was minutes: a bound, not a benchmark
    values = json.loads(out)["stages"]["grad.layer1.head2.scores"]["values"]
    # log10(e^(-1e9)) = -434294481.9: a masked key's gradient is e^(-1e9) times a
    # moderate factor (the weights and gradients of the unmasked keys)
    for v in values[0][1:]:
        mantissa, exponent = re.fullmatch(r"(-?[1-9](?:\.\d+)?)e(-\d+)", v).groups()
        assert -434294490 < int(exponent) < -434294475, v
    low, high = values[0][0].rstrip("?").split("..")  # undecided: an enclosure of 0
    assert low.startswith("-") and not high.startswith("-")
    assert int(high.split("e")[1]) < -19000  # within 2^-65536 of 0
