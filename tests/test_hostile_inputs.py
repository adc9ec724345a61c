"""One regression test per reproducer of the reliability issue (issue 14).

The reproducers (``tests/data/repro/``, copied from the issue's ``repro`` folder) are
inputs; each test states the behaviour the issue requires of them:

* bad input: exit status 2 with a message naming the culprit, no traceback;
* exact ties: decided (exit 0, the tie rounded half to even, as documented);
* inputs that hung: a run that ends within the bound (a SIGALRM timer, as the fuzzer's)
  with a result or a message naming the limit, the stage or the entry.

Every command runs in-process through ``symformer.cli.main`` (in a forked child, see
``tests/fuzz_mutations.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from fuzz_mutations import CLAIMS, Outcome, run_argv

from symformer.cli import main

REPRO = Path(__file__).parent / "data" / "repro"
ROOT = Path(__file__).resolve().parents[1]

#: Seconds a reproducer may run (the fuzzer's per-case bound).
BOUND = 20.0


def run(*argv: str, env: dict[str, str] | None = None) -> Outcome:
    """``symformer ARGV`` in-process, bounded; the outcome must be a clean ending."""
    args = [str(a) for a in argv]
    outcome = run_argv(args, env, bound=BOUND)
    command = "symformer " + " ".join(args)
    assert outcome.kind != "hang", f"{command}: still running after {BOUND:g} s"
    assert outcome.kind != "traceback", f"{command}: {outcome.traceback}"
    assert outcome.kind == "ok", f"{command}: {outcome.kind} {outcome.error}"
    return outcome


def assert_decided(outcome: Outcome, command: list[str]) -> None:
    """A result: exit 0; for ``prove`` on a finite mask, exit 1 where the only false
    facts are the expected ones (masked weights exp(-1e50)/... are not exactly 0, and
    "variance exactly 1" is false for eps > 0)."""
    if command[0] != "prove":
        assert outcome.status == 0, outcome.stderr
        return
    assert outcome.status in (0, 1), outcome.stderr
    false = [line for line in outcome.stdout.splitlines() if line.startswith("false")]
    expected = r"masked weights \(key after query\) are exactly 0|variance exactly 1$"
    assert all(re.search(expected, line) for line in false), outcome.stdout


def message(outcome: Outcome) -> str:
    """The last line of stderr: the error message."""
    lines = outcome.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def assert_refused(outcome: Outcome, *names: str) -> str:
    """Exit 2 with a one-line message on stderr that names every one of ``names``."""
    assert outcome.status == 2, f"status {outcome.status}, stderr: {outcome.stderr[-500:]}"
    text = message(outcome)
    assert text.startswith("symformer"), outcome.stderr
    for name in names:
        assert name in text, f"the message does not name {name!r}: {text}"
    return text


def names_an_entry(text: str) -> bool:
    """A stage entry (``layer1.add_norm1[0, 1]``, ``row 0``) or a file entry (``W_V[2][1]``)."""
    return bool(re.search(r"\w\[\d+(\]\[|, ?)\d+\]|\brow \d+", text))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("command", [["derive"], ["trace", "--token", "1", "--format", "html"]])
def test_ansi_token_is_refused_without_echoing_the_escapes(command):
    """Control characters in names are refused at load time (ansi_token.toml)."""
    outcome = run(*command, REPRO / "ansi_token.toml")
    text = assert_refused(outcome)
    assert re.search(r"title|token|vocab", text), text
    assert "\x1b" not in outcome.stdout + outcome.stderr
    assert "\x07" not in outcome.stdout + outcome.stderr


def test_newline_in_a_token_is_refused():
    """A newline in a name is a control character: refused (md_newline_token.toml)."""
    text = assert_refused(run("derive", REPRO / "md_newline_token.toml"))
    assert re.search(r"token|vocab", text), text


def test_claim_typed_minus_inf_in_a_finite_stage():
    """"-inf" typed where the stage is finite is wrong or bad input, never a TypeError
    (claims_neginf_typo.toml): exit 1 reporting the claim 'weights', or exit 2 naming it."""
    outcome = run("check", REPRO / "claims_neginf_typo.toml")
    assert outcome.status in (1, 2), outcome.stderr
    if outcome.status == 1:
        assert re.search(r"^weights -> .*wrong", outcome.stdout, re.M), outcome.stdout
    else:
        assert_refused(outcome, "weights")


def test_one_row_claim_then_a_wrong_digit():
    """A one-row claim before a claim with a wrong digit (claims_one_row_then_wrong.toml):
    the check ends with exit 1 and reports Q[1,0] = 1.59 wrong (the exact value is
    5/4 + sin(1)/4 + cos(1)/4 = 1.5954...)."""
    outcome = run("check", REPRO / "claims_one_row_then_wrong.toml")
    assert outcome.status == 1, outcome.stderr
    assert re.search(r"^input_row0 -> input, 2 decimals: 4 of 4 right", outcome.stdout, re.M)
    assert re.search(r"claimed 1\.59, correct 1\.60", outcome.stdout), outcome.stdout


@pytest.mark.parametrize("command", ["prove", "derive"])
def test_eps0_constant_row_is_an_error_naming_the_row(command):
    """eps = 0 and a constant row make LayerNorm 0/0 (eps0_zero_variance.toml): no
    "proved ... variance exactly 1", but exit 2 with a message that says the value is
    undefined and names the stage and row."""
    outcome = run(command, REPRO / "eps0_zero_variance.toml")
    assert not re.search(r"proved.*variance exactly 1", outcome.stdout), outcome.stdout
    text = assert_refused(outcome, "add_norm1")
    assert re.search(r"undefined|0/0|divi\w* by (zero|0)|zero variance", text, re.I), text
    assert names_an_entry(text), text


@pytest.mark.parametrize("name", ["tb_5000_digit_decimal", "tb_5000_digit_denominator",
                                  "tb_5000_digit_integer"])
def test_numbers_over_the_digit_limit_are_refused(name):
    """A number of 5,000 digits in b_2 (tb_5000_digit_*.toml): exit 2 naming b_2."""
    assert_refused(run("derive", REPRO / f"{name}.toml"), "b_2")


@pytest.mark.parametrize("name", ["hang_huge_exponent", "hang_zero_huge_exponent"])
def test_huge_exponents_are_refused_at_once(name):
    """"1e99999999" and "0e99999999" in b_2 (hang_*huge_exponent.toml): exit 2 naming
    b_2, before any work."""
    assert_refused(run("derive", REPRO / f"{name}.toml"), "b_2")


@pytest.mark.parametrize("value", ["1e99999999", "0e99999999"])
def test_huge_exponent_in_claims_is_refused(tmp_path, value):
    """The same exponents in a claims file: exit 2 naming the claim."""
    text = CLAIMS.read_text(encoding="utf-8")
    text = text.replace("[0.5, 1.5], [1.59", f'["{value}", 1.5], [1.59')
    claims = tmp_path / "claims.toml"
    claims.write_text(text, encoding="utf-8")
    assert_refused(run("check", claims), "Q")


def test_huge_exponent_in_mask_option_is_refused():
    """``--mask=-1e99999999`` (cli_tracebacks.sh): exit 2 naming --mask."""
    assert_refused(run("crosscheck", "--causal", "--mask=-1e99999999"), "--mask")


def test_huge_exponent_in_mask_key_is_refused(tmp_path):
    """``mask = "-1e99999999"`` in an example: exit 2 naming mask."""
    text = (REPRO / "mask_1e50_json_hang.toml").read_text(encoding="utf-8")
    example = tmp_path / "mask.toml"
    example.write_text(text.replace('"-1e50"', '"-1e99999999"'), encoding="utf-8")
    assert_refused(run("derive", example), "mask")


def test_unicode_digits_are_refused():
    """Numbers are ASCII only (unicode_digits.toml): exit 2 naming b_2."""
    assert_refused(run("derive", REPRO / "unicode_digits.toml"), "b_2")


@pytest.mark.parametrize("value", ["٣", "𝟙", "1e1_0", "１"])
def test_each_non_ascii_or_underscored_number_is_refused(tmp_path, value):
    """Each of unicode_digits.toml's numbers alone in b_2: exit 2 naming b_2."""
    text = (REPRO / "unicode_digits.toml").read_text(encoding="utf-8")
    text = re.sub(r"^b_2 = .*$", f'b_2 = ["{value}", 0.1, 0.1, 0.1]', text, flags=re.M)
    example = tmp_path / "digits.toml"
    example.write_text(text, encoding="utf-8")
    assert_refused(run("derive", example), "b_2")


@pytest.mark.parametrize("argv", [
    ["derive", REPRO / "tb_deep_nesting.toml"],
    ["check", REPRO / "tb_deep_nesting_claims.toml"],
], ids=["example", "claims"])
def test_deep_nesting_is_refused(argv):
    """1,000 nested arrays (tb_deep_nesting*.toml): exit 2 with a message about the
    nesting, not a RecursionError."""
    text = assert_refused(run(*argv))
    assert re.search(r"nest|deep|depth", text, re.I), text


# --------------------------------------------------------------------------- decoder


@pytest.mark.parametrize("command", [
    ["derive"], ["prove"], ["trace", "--token", "0"], ["crosscheck"], ["generate"],
])
def test_decoder_eps0_constant_row(command):
    """eps = 0 and constant decoder embeddings (tb_decoder_eps0_constant.toml): the 0/0
    is an error naming the stage and row, exit 2, in every command."""
    text = assert_refused(run(*command, REPRO / "tb_decoder_eps0_constant.toml"))
    assert re.search(r"undefined|0/0|divi\w* by (zero|0)|zero variance", text, re.I), text
    assert names_an_entry(text), text


@pytest.mark.parametrize("command", [
    ["derive"], ["prove"], ["trace", "--token", "0"], ["crosscheck"], ["generate"],
])
def test_decoder_large_entry(command):
    """A 1e30 entry in a cross-attention W_K (tb_decoder_large_entry.toml, inside the
    documented range): a result (crosscheck may report float errors: exit 1), or a
    message naming the stage and entry where precision ran out."""
    outcome = run(*command, REPRO / "tb_decoder_large_entry.toml")
    allowed = (0, 1, 2) if command == ["crosscheck"] else (0, 2)
    assert outcome.status in allowed, outcome.stderr
    if outcome.status == 2:
        assert names_an_entry(message(outcome)), outcome.stderr


# --------------------------------------------------------------------------- bounded runs


@pytest.mark.parametrize("command", [["derive"], ["trace", "--token", "2"], ["prove"]])
def test_one_entry_1e99_ends(command):
    """W_V[2][1] = -1e99 (hang_one_entry_1e99.toml, inside the documented range): the
    run ends within the bound, with the values or a message naming the stage and entry."""
    outcome = run(*command, REPRO / "hang_one_entry_1e99.toml")
    assert outcome.status in (0, 2), outcome.stderr
    if outcome.status == 2:
        assert names_an_entry(message(outcome)), outcome.stderr


@pytest.mark.parametrize("command", [["derive"], ["derive", "--json"], ["prove"],
                                     ["trace", "--token", "3"]])
def test_mask_1e50_ends(command):
    """mask = "-1e50", causal (mask_1e50_json_hang.toml): every command ends with a result."""
    assert_decided(run(*command, REPRO / "mask_1e50_json_hang.toml"), command)


@pytest.mark.parametrize("command", [["derive", "--stage", "input"], ["prove"],
                                     ["trace", "--token", "0"]])
def test_big_example_within_max_work_is_bounded(command):
    """48 tokens x d_model 48 x 6 heads x 4 layers that pass --max-work
    (big48_within_max_work.toml): the work limit covers every command, so each ends in
    the bound with a result or refuses with exit 2 naming the work limit."""
    outcome = run(*command, REPRO / "big48_within_max_work.toml")
    assert outcome.status in (0, 2), outcome.stderr
    if outcome.status == 2:
        assert re.search(r"max-work|MAX_WORK|operations", message(outcome)), outcome.stderr


# --------------------------------------------------------------------------- ties


def half_even(value: Fraction, decimals: int) -> str:
    """The documented rounding (half to even), by Python's decimal module."""
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return str(exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN))


def test_tie_in_a_mean_is_decided():
    """layer1.add_norm1.mean[0,0] = 25/16 exactly (tie_mean_undecided.toml): decided,
    printed 1.562 at 3 decimals (half to even)."""
    outcome = run("derive", REPRO / "tie_mean_undecided.toml", "--stage",
                  "layer1.add_norm1.mean", "--decimals", "3")
    assert outcome.status == 0, outcome.stderr
    assert half_even(Fraction(25, 16), 3) == "1.562"
    assert re.findall(r"-?\d+\.\d{3}", outcome.stdout)[:2] == ["1.562", "1.562"], outcome.stdout


def test_tie_in_a_variance_is_decided():
    """layer1.add_norm1.variance = 3/16 in both rows (tie_two_tokens.toml): decided,
    printed 0.188 at 3 decimals (half to even)."""
    outcome = run("derive", REPRO / "tie_two_tokens.toml", "--stage",
                  "layer1.add_norm1.variance", "--decimals", "3")
    assert outcome.status == 0, outcome.stderr
    expected = half_even(Fraction(3, 16), 3)
    assert re.findall(r"-?\d+\.\d{3}", outcome.stdout) == [expected, expected], outcome.stdout


def test_claims_on_a_tie_are_both_right():
    """0.188 and 0.187 are both within half a unit of 0.1875 (tie_claims.toml): exit 0."""
    outcome = run("check", REPRO / "tie_claims.toml", "--example", REPRO / "tie_two_tokens.toml")
    assert outcome.status == 0, outcome.stdout + outcome.stderr


@pytest.mark.parametrize("command", [["derive"], ["prove"], ["trace", "--token", "3"]])
def test_mask_1e100_is_decided(command):
    """mask = "-1e100", causal (mask_1e100_undecided.toml): every rounding is decided."""
    assert_decided(run(*command, REPRO / "mask_1e100_undecided.toml"), command)


# --------------------------------------------------------------------------- text


def test_latex_ligatures_are_broken(tmp_path):
    """Token names that T1 ligatures would change (latex_ligatures.toml) print as typed:
    no fragment holds them raw (--, ?`, !`, ``, '' and ,, would be ligatures)."""
    outcome = run("export", REPRO / "latex_ligatures.toml", "--out", tmp_path / "out")
    assert outcome.status == 0, outcome.stderr
    sources = {p: p.read_text(encoding="utf-8") for p in (tmp_path / "out").rglob("*.tex")}
    assert sources
    for path, text in sources.items():
        for raw in ("a--b", "?`x!`", "``q''", ",,low"):
            assert raw not in text, f"{path.name} holds {raw!r} raw"


@pytest.mark.skipif(not shutil.which("pdflatex"), reason="needs pdflatex")
def test_long_token_compiles(tmp_path):
    """A 1,000-character token (latex_long_token_1000.toml): export --pdf succeeds."""
    outcome = run("export", REPRO / "latex_long_token_1000.toml", "--out", tmp_path / "out",
                  "--pdf")
    assert outcome.status == 0, outcome.stderr
    assert (tmp_path / "out" / "main.pdf").stat().st_size > 0


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("value", ["abc", "", "-5"])
def test_bad_max_work_variable_is_refused(value):
    """SYMFORMER_MAX_WORK=abc, empty or negative (cli_tracebacks.sh): exit 2 naming it."""
    assert_refused(run("derive", "--stage", "input", env={"SYMFORMER_MAX_WORK": value}),
                   "SYMFORMER_MAX_WORK")


def test_max_work_variable_1e9():
    """SYMFORMER_MAX_WORK=1e9: accepted as 10^9 or refused naming it; no traceback."""
    outcome = run("derive", "--stage", "input", env={"SYMFORMER_MAX_WORK": "1e9"})
    assert outcome.status in (0, 2)
    if outcome.status == 2:
        assert_refused(outcome, "SYMFORMER_MAX_WORK")


def test_max_work_zero_means_the_same_as_option_and_variable():
    """``--max-work 0`` and ``SYMFORMER_MAX_WORK=0`` mean the same thing."""
    option = run("derive", "--max-work", "0", "--stage", "input")
    variable = run("derive", "--stage", "input", env={"SYMFORMER_MAX_WORK": "0"})
    assert option.status == variable.status, (option.stderr, variable.stderr)


def test_negative_max_work_option_is_refused():
    assert_refused(run("derive", "--max-work", "-1", "--stage", "input"), "--max-work")


@pytest.mark.parametrize("argv,option", [
    (["trace", "--token", "1", "--decimals", "100000"], "--decimals"),
    (["export", "--out", "{tmp}/x", "--decimals", "100000"], "--decimals"),
    (["derive", "--json", "--digits", "100000"], "--digits"),
    (["derive", "--decimals", "100000"], "--decimals"),
], ids=["trace-decimals", "export-decimals", "derive-digits", "derive-decimals"])
def test_decimals_and_digits_beyond_the_limit_are_refused(tmp_path, argv, option):
    """--decimals 100000 and --digits 100000 (cli_tracebacks.sh): exit 2 naming the option."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert_refused(run(*argv), option)


@pytest.mark.parametrize("argv,option", [
    (["derive", "--decimals", "5000"], "--decimals"),
    (["derive", "--json", "--digits", "5000"], "--digits"),
], ids=["decimals", "digits"])
def test_5000_decimals_or_digits(argv, option):
    """--decimals 5000, --digits 5000 (cli_tracebacks.sh): the values, or a refusal
    naming the option; within the bound, no traceback."""
    outcome = run(*argv)
    assert outcome.status in (0, 2)
    if outcome.status == 2:
        assert_refused(outcome, option)


def test_exact_with_a_huge_size_limit_ends():
    """``derive --exact 100000`` (cli_tracebacks.sh): ends within the bound, with the
    closed forms or a refusal naming --exact."""
    outcome = run("derive", "--exact", "100000")
    assert outcome.status in (0, 2)
    if outcome.status == 2:
        assert_refused(outcome, "--exact")


# --------------------------------------------------------------------------- files


def _kind(path: Path) -> int:
    return stat.S_IFMT(path.lstat().st_mode)


@pytest.mark.parametrize("node", ["fifo", "symlink", "chardev"])
def test_out_onto_a_special_file_is_refused(tmp_path, node):
    """``trace --out`` onto a FIFO, a symlink or a device node (fs_chardev_replaced.sh):
    exit 2 naming the path; the node is left as it was."""
    target = tmp_path / node
    if node == "fifo":
        os.mkfifo(target)
    elif node == "symlink":  # as `--out /dev/stdout` would be
        target.symlink_to(os.devnull)
    else:
        try:
            os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs privileges")
    before = _kind(target)
    outcome = run("trace", "--token", "1", "--out", target)
    assert_refused(outcome, str(target))
    assert _kind(target) == before


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_written_files_follow_the_umask(tmp_path, umask_022):
    """Files written by trace --out and export get the umask's mode (0644 under 022)."""
    page = tmp_path / "think.html"
    assert run("trace", "--token", "1", "--format", "html", "--out", page).status == 0
    assert stat.S_IMODE(page.stat().st_mode) == 0o644
    assert run("export", "--out", tmp_path / "notes", "--format", "markdown").status == 0
    assert run("export", "--out", tmp_path / "tex").status == 0
    written = [p for p in (tmp_path / "notes").rglob("*") if p.is_file()]
    written += [p for p in (tmp_path / "tex").rglob("*") if p.is_file()]
    assert written
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {oct(0o644)}
    dirs = [p for p in (tmp_path / "tex").rglob("*") if p.is_dir()] + [tmp_path / "tex"]
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in dirs} == {oct(0o755)}


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_killed_export_leaves_old_or_new_and_no_temporary_files(tmp_path, monkeypatch):
    """SIGKILL during an export (fs_sigkill_leftovers.sh), sent by this test to the
    process it started: the folder is wholly the old export or wholly the new one, and
    nothing else is left in or next to it."""
    # the smallest shipped export that writes several files: the folder's fate is the
    # point, not the example
    command = [sys.executable, "-m", "symformer", "export", "attention_only", "--out"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for decimals in ("2", "5"):  # the whole folders, written in this process
        assert main(["export", "attention_only", "--out", str(tmp_path / f"ref{decimals}"),
                     "--decimals", decimals, "--quiet"]) == 0
    old, new = _tree(tmp_path / f"ref{2}"), _tree(tmp_path / f"ref{5}")
    assert old != new
    for attempt in range(2):  # at the first write, and a little after it
        work = tmp_path / f"attempt{attempt}"
        work.mkdir()
        shutil.copytree(tmp_path / "ref2", work / "k")
        listing = sorted(os.listdir(work)), sorted(os.listdir(work / "k"))
        process = subprocess.Popen([*command, str(work / "k"), "--decimals", "5"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill at the first sign of writing (a change next to or in the folder), or,
        # on later attempts, a little after it
        while process.poll() is None:
            if (sorted(os.listdir(work)), sorted(os.listdir(work / "k"))) != listing:
                time.sleep(0.004 * attempt)
                break
            time.sleep(0.0005)  # leave the cores to the export (and to other tests)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert sorted(os.listdir(work)) == ["k"], os.listdir(work)
        assert _tree(work / "k") in (old, new), f"attempt {attempt}: a mix of old and new"
        assert not [p for p in (work / "k").rglob("*") if p.name.startswith(".")]
