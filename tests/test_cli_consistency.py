"""The commands agree with each other and with their docs (issue 20, items 6, 10, 12).

* train never states what was not proved (an undecided comparison is not "equal");
  ``train --write DIR`` is refused before training, naming --write;
* an invalid ``[loss]`` is refused alike by every command (checked at load);
* shipped claims files load by name from any folder;
* every command offers the same normalisation choices, and a header says what a
  convention replaced;
* ``--side`` lists its choices; ``prove`` labels the unmasked copy of a causal
  example's facts; the docs say what the code does (RoPE's angle, [[layer]] keys,
  limits, plurals).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import symformer.cli.train as train_cli
import symformer.documents.train as train_document
from symformer.cli import main
from symformer.example.loader import _CONVENTION_KEYS, packaged_examples

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _help(capsys, command: str) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


# -- item 6: never state what was not proved ------------------------------------------

def test_an_undecided_loss_comparison_claims_no_equality(monkeypatch):
    """``train --lr 1e100 --steps 3``: the enclosures of two losses overlap up to the
    precision ceiling; that says nothing about their order, and is not an equality."""
    signs = {1: 1, 2: None, 3: 0}
    monkeypatch.setattr(train_document, "change", lambda training, t: signs[t])
    losses = ["1.000", "2.000", "2.001", "2.001"]
    text = train_document.report(SimpleNamespace(precision=300), 3, losses, 3)
    lines = text.splitlines()
    assert lines[0] == "step 1: the loss does not decrease (it increases)"
    assert lines[1].startswith("step 2: could not decide whether the loss decreased")
    assert "overlap" in lines[1] and "4096 bits" in lines[1]
    assert "equal" not in lines[1]
    assert lines[2] == "step 3: the loss does not decrease (exactly equal)"


def test_the_ceiling_named_is_the_one_used(monkeypatch):
    monkeypatch.setattr(train_document, "change", lambda training, t: None)
    report = train_document.report(SimpleNamespace(precision=5000), 1, ["1.5", "1.5"], 1)
    assert "up to 5000 bits" in report


def test_printed_certified_losses_decide_what_the_balls_did_not(monkeypatch):
    """The reproducer printed 9.5e114, then 4.0e401: certified roundings that far apart
    decide the order even when the comparison of the balls did not."""
    monkeypatch.setattr(train_document, "change", lambda training, t: None)
    losses = ["2.024", "9534834448088467.991", "403312813775592987850782.731", "0.500"]
    lines = train_document.report(SimpleNamespace(precision=300), 3, losses, 3).splitlines()
    assert lines == [f"step {t}: the loss does not decrease (it increases; decided from "
                     f"the certified losses printed above)" for t in (1, 2)]
    monkeypatch.setattr(train_document, "change", lambda training, t: None)
    assert train_document.report(SimpleNamespace(precision=300), 1, ["2.024", "2.020"], 3) \
        == "the loss decreases at every step (certified)"


@pytest.mark.parametrize(("before", "after", "decimals", "sign"), [
    ("1.000", "1.002", 3, None),   # within two units of the last place: either order
    ("1.000", "1.003", 3, 1),      # exact values in [0.9995, 1.0005] and [1.0025, 1.0035]
    ("1.003", "1.000", 3, -1),
    ("12", "15", 0, 1),
    ("1.2e-3", "5e-3", 4, 1),
    ("-1.40e-19724..1.40e-19724?", "2.000", 3, None),  # an undecided range: no claim
    ("1.000", "inf", 3, None),
])
def test_printed_order(before, after, decimals, sign):
    assert train_document.printed_order(before, after, decimals) == sign


# -- item 10: train --write is checked first, and named -------------------------------

def test_train_write_to_a_directory_is_refused_before_training(tmp_path, monkeypatch,
                                                               capsys):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --write")

    monkeypatch.setattr(train_cli, "train", no_training)
    assert main(["train", "--lr", "0.1", "--write", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory; --write needs a regular file" in err
    assert "--out" not in err and err.count("\n") == 1


def test_one_file_is_one_file(tmp_path, capsys):
    assert main(["export", "--stage", "input", "--format", "markdown", "--out",
                 str(tmp_path / "j")]) == 0  # main.md alone
    assert f"wrote 1 file to {tmp_path / 'j'}\n" in capsys.readouterr().out


# -- item 12: an invalid [loss] is refused by every command ---------------------------

def _gpt2_with_targets(tmp_path: Path, targets: list[str]) -> Path:
    text = packaged_examples()["gpt2_style"].read_text(encoding="utf-8")
    path = tmp_path / "lm.toml"
    path.write_text(text + "\n[loss]\nkind = \"cross_entropy\"\ntargets = "
                    + json.dumps(targets) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("argv", [["derive"], ["derive", "--list"], ["trace", "--token", "0"],
                                  ["export", "--stage", "input", "--out", "OUT"],
                                  ["backward"], ["prove"]])
def test_targets_one_short_are_refused_by_every_command(argv, tmp_path, capsys):
    """gpt2_style has 3 tokens ("the cat sat") and an [lm_head]: one target per token."""
    path = _gpt2_with_targets(tmp_path, ["cat", "sat"])
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main([argv[0], str(path), *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert "loss: targets has 2 entries, expected 3 (one target token per row of the " \
           "probabilities" in err, err
    assert not (tmp_path / "out").exists()


def test_a_target_outside_the_vocabulary_is_refused_at_load(tmp_path, capsys):
    path = _gpt2_with_targets(tmp_path, ["cat", "sat", "dog"])
    assert main(["derive", str(path)]) == 2
    assert "targets entry 2 'dog' is not in the vocabulary" in capsys.readouterr().err


def test_valid_language_model_targets_load(tmp_path, capsys):
    path = _gpt2_with_targets(tmp_path, ["cat", "sat", "on"])
    assert main(["derive", str(path), "--stage", "loss"]) == 0
    assert "loss  (1x1)" in capsys.readouterr().out


# -- item 12: shipped claims files load by name from any folder -----------------------

@pytest.mark.parametrize("name", ["post_claims", "post_claims.toml"])
def test_shipped_claims_load_by_name_from_any_folder(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", name]) == 1  # some of the post's numbers are wrong
    assert "115 of 136 numbers correct" in capsys.readouterr().out  # as the README says
    assert "symformer check post_claims" in README


def test_an_unknown_claims_name_lists_the_shipped_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "post_claim"]) == 2
    assert capsys.readouterr().err == (
        "symformer check: error: post_claim: no such file (shipped claims, by name: "
        "illustrated_self_attention, post_claims, scaled_identity_attention)\n")


def test_a_file_in_the_folder_wins_over_a_shipped_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "post_claims").write_text("[[claim]]\nname = \"x\"\n")
    assert main(["check", "post_claims"]) == 2
    assert "post_claims" in capsys.readouterr().err


# -- item 12: the same conventions everywhere -----------------------------------------

CONVENTION_COMMANDS = ["derive", "backward", "trace", "export", "slides", "figures", "fill",
                       "check", "prove", "crosscheck", "generate", "train"]


@pytest.mark.parametrize("command", CONVENTION_COMMANDS)
def test_every_command_offers_every_normalisation(command, capsys):
    text = _help(capsys, command)
    assert "--layer-norm {biased,unbiased,whole_matrix,rms}" in text
    assert "--norm {post,pre,none}" in text


@pytest.mark.parametrize("argv", [
    ["export", "--stage", "input", "--layer-norm", "whole_matrix", "--out", "OUT"],
    ["export", "--stage", "layer1.add_norm1", "--layer-norm", "rms", "--norm", "pre",
     "--out", "OUT"],
    ["trace", "--token", "1", "--layer-norm", "rms"],
    ["derive", "--layer-norm", "whole_matrix", "--norm", "none", "--stage", "output"],
])
def test_the_choices_run(argv, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(argv) == 0, capsys.readouterr().err


def test_a_replaced_normalisation_is_said_in_the_header(capsys):
    assert main(["derive", "llama_style", "--layer-norm", "biased", "--stage", "output"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "--layer-norm biased: biased LayerNorm in place of the example's RMSNorm" in header
    assert main(["derive", "llama_style", "--layer-norm", "rms", "--stage", "output"]) == 0
    assert "in place of" not in capsys.readouterr().out.splitlines()[0]  # nothing replaced
    assert main(["derive", "--norm", "none", "--mask", "-1e9", "--stage", "input"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "--norm none: no normalisation in place of the example's post-norm" in header
    assert "--mask -1e9 in place of the example's -inf" in header


def test_trace_and_backward_headers_say_it_too(capsys):
    assert main(["trace", "--token", "1", "--layer-norm", "rms"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("I think I understand (--layer-norm rms: RMSNorm in place of "
                            "the example's biased LayerNorm): token 'think'"), first
    assert main(["backward", "--norm", "pre", "--stage", "loss"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "(--norm pre: pre-norm in place of the example's post-norm): backward" in first


def _floats(capsys, argv: list[str]) -> list[list[float]]:
    assert main([*argv, "--json", "--digits", "20"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return [[float(v) for v in row] for row in doc["stages"]["output"]["values"]]


def test_layer_norm_option_equals_the_file_setting_everywhere(tmp_path, capsys):
    """--layer-norm biased on llama_style (RMSNorm in every block and the final norm)
    gives what the file with layer_norm = "biased" gives: every norm is replaced."""
    text = packaged_examples()["llama_style"].read_text(encoding="utf-8")
    setting = re.compile(r'^layer_norm = "rms"$', re.M)
    assert len(setting.findall(text)) == 1  # one top-level default, no [[layer]] own
    biased = tmp_path / "biased.toml"
    biased.write_text(setting.sub('layer_norm = "biased"', text))
    by_option = _floats(capsys, ["derive", "llama_style", "--layer-norm", "biased",
                                 "--stage", "output"])
    by_file = _floats(capsys, ["derive", str(biased), "--stage", "output"])
    own = _floats(capsys, ["derive", "llama_style", "--stage", "output"])
    assert by_option == by_file and by_option != own
    # a biased LayerNorm's output rows (gamma = 1, beta = 0 here) have mean 0
    assert all(abs(sum(row)) < 1e-12 for row in by_option)


# -- item 12: --side, prove's labels, trace's help -------------------------------------

def test_side_lists_its_choices(capsys):
    assert "--side {encoder,decoder}" in _help(capsys, "trace")


def test_trace_help_does_not_say_a_line_may_differ(capsys):
    text = _help(capsys, "trace")
    assert "may differ" not in text and "gives its printed result" in text


def test_prove_labels_the_unmasked_copy_of_a_causal_example(tmp_path, capsys):
    text = packaged_examples()["attention_only"].read_text(encoding="utf-8")
    causal = tmp_path / "causal.toml"
    causal.write_text("causal = true\n" + text if "causal" not in text else text)
    assert main(["prove", str(causal)]) == 0
    statements = [line for line in capsys.readouterr().out.splitlines()
                  if not line.startswith(" ")]
    assert len(statements) == len(set(statements))  # no fact printed twice
    sums = [s for s in statements if "sums to exactly 1" in s]
    assert len(sums) == 2 and "(unmasked)" in sums[0] and "(causal)" in sums[1], sums


# -- item 12: the docs -----------------------------------------------------------------

def test_readme_layer_conventions_are_the_schemas(tmp_path, capsys):
    row = next(line for line in README.splitlines() if line.startswith("| `[[layer]]`"))
    listed = set(re.findall(r"`(\w+)`", row.split("block's own conventions")[1]))
    top_only = {"causal", "mask", "positional_encoding"}
    assert listed == set(_CONVENTION_KEYS) | top_only
    for key, value in [("causal", "true"), ("mask", '"-1e9"'),
                       ("positional_encoding", '"none"')]:
        text = (ROOT / "symformer/example/builtin.toml").read_text(encoding="utf-8")
        path = tmp_path / f"{key}.toml"
        path.write_text(text.replace("[[layer]]\n", f"[[layer]]\n{key} = {value}\n", 1))
        assert main(["derive", str(path), "--stage", "input"]) == 2
        assert f"unknown key '{key}'" in capsys.readouterr().err
    blocks = (ROOT / "docs/blocks.md").read_text(encoding="utf-8")
    assert "`causal`,\n`mask` and `positional_encoding` concern the whole model" in blocks


def test_the_docs_state_ropes_angle_and_it_holds(capsys):
    """docs/blocks.md: pair l at position pos turns by pos theta_l, theta_l =
    base^(-2l/d_k); "half" pairs (x_l, x_{l+d_k/2}).  Checked on llama_style's first
    head by rotating its Q by hand."""
    blocks = (ROOT / "docs/blocks.md").read_text(encoding="utf-8")
    assert "θ_l = base^(−2l/d_k)" in blocks and "(x_l, x_l+d_k/2)" in blocks
    assert main(["derive", "llama_style", "--json", "--digits", "20", "--stage",
                 "layer1.head1.Q", "--stage", "layer1.head1.Q_rot"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    q = [[float(v) for v in row] for row in stages["layer1.head1.Q"]["values"]]
    rot = [[float(v) for v in row] for row in stages["layer1.head1.Q_rot"]["values"]]
    d = len(q[0])
    for m, row in enumerate(q):
        for i in range(d // 2):
            angle = m * 10000 ** (-2 * i / d)
            a, b = row[i], row[i + d // 2]
            assert math.isclose(rot[m][i], a * math.cos(angle) - b * math.sin(angle),
                                abs_tol=1e-12)
            assert math.isclose(rot[m][i + d // 2], a * math.sin(angle) + b * math.cos(angle),
                                abs_tol=1e-12)


def test_readme_limits_and_test_requirements():
    limits = README[README.index("## Limits"):]
    assert "train: 1 to 50" in limits.split("| `--steps N` |")[1].splitlines()[0]
    assert train_cli.MAX_STEPS == 50
    assert "`npm`;" not in README and "the `katex` package" in README
    for doc in ("docs/backward.md", "docs/export.md"):
        assert "[lm_head]" in (ROOT / doc).read_text(encoding="utf-8"), doc


def test_the_help_names_every_shipped_example(capsys):
    """`symformer --help` lists every example that ships by name (post_claims is a
    claims file, not an example)."""
    from pathlib import Path

    import symformer

    shipped = {p.stem for p in (Path(symformer.__file__).parent / "examples").glob("*.toml")}
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    missing = sorted(name for name in shipped - {"post_claims"} if name not in text)
    assert not missing, f"symformer --help does not name {missing}"
