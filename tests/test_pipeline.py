"""A notebook gets exactly what the command line prints: ``symformer.prepare`` and the
public build and render calls give the bytes of ``derive``, ``backward`` and ``trace``,
and the same refusals with the same messages."""

from __future__ import annotations

import re

import pytest

from symformer import InputError, Request, load_example, prepare
from symformer.blocks.slices import Slice
from symformer.cli import main
from symformer.conventions import Convention
from symformer.documents import backward_text, derive_text, trace_document
from symformer.pipeline import Rendering
from symformer.trace import render


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name, argv, request_", [
    ("built-in", [], Request()),
    ("built-in", ["--causal", "--mask", "-1e9", "--stage", "layer1.head1.*"],
     Request(causal=True, conventions=Convention(mask="-1e9"),
             stages=("layer1.head1.*",))),
    ("gpt2_style", ["--positions", "0:2", "--heads", "1", "--dims", "0:3",
                    "--decimals", "4"],
     Request(slice=Slice(positions=(0, 1), heads=(1,), dims=(0, 1, 2)), reads="slice",
             rendering=Rendering(decimals=4))),
])
def test_derive_text_is_what_derive_prints(capsys, name, argv, request_):
    example = load_example(None if name == "built-in" else name)
    status, out, _ = cli(capsys, "derive", *([] if name == "built-in" else [name]), *argv)
    assert status == 0
    assert derive_text(prepare(example, request_)) == out


def test_the_slice_is_cut_and_said_in_the_header():
    # gpt2_style is causal with the -inf mask: positions 0 and 1 read tokens 0 and 1 only
    example = load_example("gpt2_style")
    p = prepare(example, Request(slice=Slice(positions=(0, 1)), reads="slice"))
    assert len(p.example.tokens) == 2 and len(example.tokens) > 2 and p.cut
    assert p.note == (f" (causal mask) (slice: positions 0:2; tokens 0 to 1 of "
                      f"{len(example.tokens)} derived)")
    assert {s.rows for s in p.shown if s.stage.kind != "next_token"} == {(0, 1)}


@pytest.mark.parametrize("name, argv, request_", [
    ("built-in", [], Request(command="backward", backward=True,
                             stages=("loss", "grad.*"))),
    ("built-in", ["--layer-norm", "unbiased", "--stage", "grad.layer1.W_*",
                  "--decimals", "5"],
     Request(command="backward", backward=True, conventions=Convention(
         layer_norm="unbiased"), stages=("grad.layer1.W_*",),
         rendering=Rendering(decimals=5))),
])
def test_backward_text_is_what_backward_prints(capsys, name, argv, request_):
    status, out, _ = cli(capsys, "backward", *argv)
    assert status == 0
    p = prepare(load_example(), request_)
    assert backward_text(p) == out
    if request_.conventions.layer_norm:
        assert "(--layer-norm unbiased: unbiased LayerNorm in place of" in out


@pytest.mark.parametrize("name, token, argv, request_, fmt", [
    ("built-in", "1", [], Request(command="trace", reads="token", token=1), "text"),
    ("built-in", "think", ["--backward", "--format", "markdown"],
     Request(command="trace", work={"backward": True}), "markdown"),
    ("gpt2_style", "1", ["--heads", "1"],
     Request(command="trace", reads="token", token=1, slice=Slice(heads=(1,))), "text"),
])
def test_trace_document_is_what_trace_prints(capsys, name, token, argv, request_, fmt):
    example = load_example(None if name == "built-in" else name)
    status, out, _ = cli(capsys, "trace", *([] if name == "built-in" else [name]),
                         "--token", token, *argv)
    assert status == 0
    p = prepare(example, request_)
    backward = "--backward" in argv
    assert render(trace_document(p, token, backward=backward), fmt) == out
    if name == "gpt2_style":  # causal, -inf: the token reads tokens 0 and 1 alone
        assert len(p.example.tokens) == 2 and len(example.tokens) == 3
        assert out.splitlines()[0].startswith(
            f"{example.title} (causal: tokens 0 to 1 of 3 derived, the later ones do not "
            f"reach this token) (heads 1): token ")


def test_a_refusal_is_the_command_lines_naming_the_api_option(capsys):
    status, _, err = cli(capsys, "derive", "--max-work", "10")
    assert status == 2
    with pytest.raises(InputError) as caught:
        prepare(load_example(), Request(max_work=10))
    # the same sentence, naming the option each reader uses (issue 32)
    api = str(caught.value)
    assert "max_work=N" in api and "--max-work" not in api
    assert err == f"symformer derive: error: {api.replace('max_work=N', '--max-work N')}\n"
    assert re.search(r"is estimated at [0-9,.]+( M)? operations \((about [0-9.]+ s|under a "
                     r"second) of CPU\), "
                     r"over the limit of 10 \(under a second\);", err)


def test_bad_slice_and_first_positions_are_refused():
    with pytest.raises(InputError, match=r"^--positions 9: the sentence has 4 tokens"):
        prepare(load_example(), Request(slice=Slice(positions=(9,)), reads="slice"))
    # the built-in example is not causal: a cut to the first positions is not exact
    with pytest.raises(InputError, match="needs a causal example with the -inf mask"):
        prepare(load_example(), Request(command="export", slice=Slice(positions=(0, 1)),
                                        reads="first"))
    with pytest.raises(InputError, match=r"takes the first positions, 0:K \(found 1\)"):
        prepare(load_example("gpt2_style"), Request(
            command="export", slice=Slice(positions=(1,)), reads="first"))


def test_without_derivation_the_conventions_are_applied_and_work_checked():
    p = prepare(load_example(), Request(command="prove", causal=True, derive=False,
                                        conventions=Convention(norm="pre")))
    assert p.derivation is None and p.example.causal
    assert {layer.norm for layer in p.example.layers} == {"pre"}
    assert p.note == " (--norm pre: pre-norm in place of the example's post-norm)"


# -- the commands that build their own output from the prepared request ---------------
def test_check_text_and_json_are_what_check_prints(capsys):
    """``check``: the claims judged by one library call (verify.judging.judge), reported
    by documents.check_text / check_json, with the command's exit status."""
    import json

    from symformer.documents import check_json, check_text
    from symformer.example.loader import packaged_files
    from symformer.verify.judging import judge

    claims_file = packaged_files()["post_claims"]
    status, out, _ = cli(capsys, "check", "post_claims")
    json_status, json_out, _ = cli(capsys, "check", "post_claims", "--json")
    judged = judge(prepare(load_example(), Request(command="check")), claims_file)
    assert status == json_status == judged.status == 1  # the post has wrong numbers
    assert check_text(judged.claims, judged.numbers, judged.equations) + "\n" == out
    document = check_json(judged.numbers, judged.equations)
    assert json.dumps(document, indent=1, ensure_ascii=False) + "\n" == json_out
    assert document["ok"] is False and out.splitlines()[-1].endswith("numbers correct")


@pytest.mark.parametrize("argv", [[], ["--dtype", "float32", "--causal"]])
def test_reference_text_is_what_crosscheck_prints(capsys, argv):
    """``crosscheck``: the NumPy reference's rows, tabled by documents.reference_text."""
    import numpy as np

    from symformer.documents import reference_text
    from symformer.verify.crosscheck import crosscheck

    status, out, _ = cli(capsys, "crosscheck", *argv)
    dtype = "float32" if argv else "float64"
    rows = crosscheck(load_example(), Convention(), causal=True if argv else None,
                      dtype=np.dtype(dtype).type, tol=1e-12)
    assert reference_text(rows, dtype, 1e-12, Convention()) + "\n" == out
    assert status == (0 if all(r.ok for r in rows) else 1)
    assert status == (1 if argv else 0)  # float32 keeps about 7 digits: over 1e-12


def test_generate_text_is_what_generate_prints(capsys):
    """``generate``: the steps of greedy decoding, tabled by documents.generate_text."""
    import json

    from symformer.blocks import generate
    from symformer.documents import generate_json, generate_text

    status, out, _ = cli(capsys, "generate", "gpt2_style", "--steps", "2")
    json_status, json_out, _ = cli(capsys, "generate", "gpt2_style", "--steps", "2",
                                   "--json")
    p = prepare(load_example("gpt2_style"), Request(command="generate", derive=False,
                                                    work={"steps": 2}))
    steps = generate(p.example, 2)
    assert status == json_status == 0
    assert generate_text(p, steps, 3) + "\n" == out
    assert json.dumps(generate_json(p, steps, 3), indent=1, ensure_ascii=False) + "\n" \
        == json_out
    assert out.startswith(f"{p.example.title}: P(next token | tokens so far), certified")


def test_train_text_is_what_train_prints(capsys):
    """``train``: each step's certified loss, written by documents.train_text."""
    from symformer.blocks.train import learning_rate, loss_value, options, train
    from symformer.documents import train_text

    status, out, _ = cli(capsys, "train", "--lr", "0.1", "--steps", "2",
                         "--stage", "step2.layer1.W_1")
    p = prepare(load_example(), Request(command="train", work={"steps": 2}))
    losses: list[str] = []
    training = train(p.derivation, learning_rate("0.1"), 2, "sgd",
                     lambda run, t: losses.append(loss_value(run, t, decimals=3)),
                     settings=options("sgd", where="--"))
    assert status == 0
    assert train_text(p, training, losses, 3, ["step2.layer1.W_1"]) == out
    assert out.splitlines()[0].endswith(": 2 steps, lr = 1/10 (sgd), mse loss")


def test_export_and_slides_with_default_options_are_what_the_commands_write(capsys, tmp_path):
    """One set of rendering options with one default (:class:`Rendering`): a notebook
    calling ``export_files(g, Options())`` or the slides with ``Options()`` gets the
    bytes ``symformer export`` and ``symformer slides`` write (3 decimals, token 1)."""
    from symformer.latex import Options, export_files
    from symformer.slides import Options as SlideOptions
    from symformer.slides import frames
    from symformer.slides.beamer import document

    assert Options().decimals == SlideOptions().decimals == Rendering().decimals == 3
    stages = ("layer1.head1.*",)
    assert main(["export", "--out", str(tmp_path / "notes"), "--quiet", "--stage",
                 *stages]) == 0
    assert main(["slides", "--out", str(tmp_path / "slides"), "--quiet", "--stage",
                 *stages]) == 0
    capsys.readouterr()
    g = prepare(load_example(), Request(command="export")).derivation
    files = export_files(g, Options(stages=stages))
    assert files and all((tmp_path / "notes" / name).read_text() == text
                         for name, text in files.items())
    options = SlideOptions(stages=stages)
    assert (tmp_path / "slides" / "slides.tex").read_text() == document(
        g, options, frames(g, options))
