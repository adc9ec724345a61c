"""``symformer export``: the derivation as LaTeX fragments and a document, or Markdown."""

from __future__ import annotations

import argparse

from symformer.cli._common import (
    MAX_STEPS,
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    bounded_int,
    load,
    plural,
    request,
    token_text,
)
from symformer.cli._progress import Progress
from symformer.cli._slice import add_slice_arguments, slice_of
from symformer.files import output_directory, write_files
from symformer.pipeline import prepare

ORDER = 30

EPILOG = """\
examples:
  symformer export --out notes                     # main.tex + fragments/*.tex
  symformer export --out notes --pdf               # ... and compile notes/main.pdf
  symformer export --out notes --figures --pdf     # ... with a Figures part (TikZ, pgfplots)
  symformer export --out notes --token think --decimals 3
  symformer export --out notes --stage 'layer1.head1.*' --exact
  symformer export my_example.toml --out blog --format markdown   # blog/main.md
  symformer export --out work --format json   # work/worked.json, work/equations.json
  symformer export gpt2_style --out pt --format torch   # pt/model.py (PyTorch)
  symformer export --out book --format values   # LaTeX macros, MyST role, Quarto shortcode
  symformer export symformer/examples/encoder_decoder.toml --out ed --pdf
  symformer export symformer/examples/encoder_decoder.toml --out ed --steps 3
  symformer export symformer/examples/encoder_decoder.toml --out ed --target-token '<s>'
  symformer export gpt2.toml --out notes --positions 0:4 --heads 1   # a causal model's slice

With a [decoder] table the document has two parts, Encoder and Decoder: masked
self-attention, cross-attention (target tokens down, source tokens across), the
three Add & Norm sub-layers, the FFN, then logits, probabilities and the exact next
token (a tie is reported as a tie). --steps N adds the table of next-token
probabilities per greedy step (as `symformer generate` prints it).

Every stage gets an equation, a table (booktabs) and a worked example for one
token, each in its own fragment (fragments/layer1-head1-Q-table.tex, ...), which
you can \\input on its own (preamble: amsmath, amssymb, booktabs, xcolor with the
table option, graphicx). The output directory is created if needed and never
cleared; the new files appear all at once (see docs/export.md).
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` sub-command."""
    p = sub.add_parser("export", help="write LaTeX, Markdown or worked.json for the derivation",
                       description="Write every stage of the derivation as LaTeX fragments "
                                   "and a standalone document (or one Markdown file).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    add_decimals_argument(p)
    p.add_argument("--token", default=None, type=token_text, metavar="TOKEN",
                   help="worked examples for this token: a position or the word itself (its "
                        "first occurrence); default: position 1, the second token (the "
                        "last one when the sentence has one token)")
    p.add_argument("--target-token", type=token_text, metavar="TOKEN",
                   help="the decoder's worked examples follow this target token: a position "
                        "or the word (default: the last target position)")
    p.add_argument("--steps", type=bounded_int(0, MAX_STEPS), default=0, metavar="N",
                   help=f"add a greedy-generation section of N steps (needs an [lm_head] or a "
                        f"[decoder] with W_vocab; default 0: none; at most {MAX_STEPS})")
    p.add_argument("--stage", action="append", metavar="GLOB",
                   help="only stages matching this name or glob (repeatable)")
    p.add_argument("--exact", action="store_true",
                   help="print short closed forms (4 + \\sin 1) instead of decimals")
    p.add_argument("--full", action="store_true",
                   help="work every stage in full (default: a head or layer computed as "
                        "one before shows its tables under one sentence)")
    add_convention_arguments(p, causal_help="derive with the causal mask in every layer")
    p.add_argument("--format", choices=("latex", "markdown", "json", "torch", "values"),
                   default="latex",
                   help="latex: main.tex and fragments/ (default); markdown: main.md; "
                        "json: worked.json, every worked line's operands and results, and "
                        "equations.json, every shown equation in a checkable plain form; "
                        "torch: model.py, a standalone PyTorch module (float64 weights); "
                        "values: every value as LaTeX macros, a values file, a MyST role "
                        "and a Quarto shortcode (docs/values.md)")
    p.add_argument("--heat", action="store_true",
                   help="colour the attention weights' cells as the PDF does (Markdown "
                        "only; drawn by KaTeX and MathJax with \\colorbox; default: plain "
                        "tables, no HTML)")
    p.add_argument("--pdf", action="store_true",
                   help="also compile main.pdf with pdflatex (LaTeX format only)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (shown only on a terminal anyway)")
    p.add_argument("--figures", action="store_true",
                   help="add a Figures part: the TikZ/PGFPlots figures of `symformer "
                        "figures` in figures/*.tex (LaTeX format only; needs pgfplots)")
    add_slice_arguments(p, dims=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer export``."""
    from symformer.errors import InputError
    from symformer.latex import NotesOptions, export_files, resolve_token
    from symformer.latex.compile import compile_log, pdflatex

    if args.pdf and args.format != "latex":
        raise InputError("--pdf needs --format latex")
    if args.figures and args.format != "latex":
        raise InputError("--figures needs --format latex")
    if args.heat and args.format != "markdown":
        raise InputError("--heat needs --format markdown (the PDF's tables are coloured "
                         "already)")
    if args.format == "torch":
        return _torch(args)
    if args.pdf:
        pdflatex()  # fail before any work when it is missing
    output_directory(args.out)  # a file or device node is refused before any work
    example = load(args)
    chosen = slice_of(args, example)
    # --positions 0:K: the first K tokens alone, exact for a causal model with the -inf
    # mask; the document's tables then show those positions (others are refused, here
    # in the words given)
    first = None if chosen.positions is None else tuple(range(len(chosen.positions)))
    if chosen.positions != first:
        raise InputError(f"export --positions takes the first positions, 0:K (found "
                         f"{args.positions[:40]}): its tables show every derived row")
    p = prepare(example, request(args, "export", slice=chosen, reads="first", work={
        "figures": args.figures, "steps": args.steps, "exact": args.exact}))
    g = p.derivation
    stages = tuple(args.stage) if args.stage else None
    if chosen.heads is not None:  # the stages of the other heads left out, by name
        stages = tuple(s.name for s in g.select(args.stage)
                       if not s.head or s.head in chosen.heads)
    if args.steps and "next_token" not in g:
        raise InputError(f"{g.example.source}: --steps needs a [decoder] table with W_vocab "
                         "or an [lm_head] table (see symformer/examples/encoder_decoder.toml, "
                         "gpt2_style.toml)")
    target = None if args.target_token is None else resolve_token(g, args.target_token,
                                                                  side="decoder")
    token = args.token if args.token is not None else str(min(1, len(g.example.tokens) - 1))
    options = p.request.rendering.extended(NotesOptions, token=resolve_token(g, token),
                                           stages=stages, target_token=target,
                                           steps=args.steps, max_work=args.max_work)
    extra = (2 if args.pdf else 0) + args.figures  # pdflatex passes, the figures

    def stage(k: int, total: int, name: str) -> None:
        bar.step(k, total + extra, name)

    with Progress("symformer export", quiet=args.quiet) as bar:
        if args.figures:
            bar.update("figures")
        if args.format == "values":
            from symformer.authoring import values_files

            files: dict[str, str | bytes] = dict(values_files(g, options))
        else:
            files = dict(export_files(g, options, args.format,
                                      **_figures(g, options, args.figures),
                                      progress=stage, heat=args.heat))
        if args.pdf:
            files["main.pdf"] = compile_log(
                files, progress=lambda k, total: bar.update(f"pdflatex pass {k}/{total}"))[0]
    written = write_files(args.out, files)
    print(f"wrote {plural(len(written), 'file')} to {args.out}")
    return 0


def _torch(args: argparse.Namespace) -> int:
    """``--format torch``: model.py, the example as a standalone PyTorch module."""
    from symformer.frameworks.torch_out import to_torch
    from symformer.pipeline import applied

    output_directory(args.out)
    example = applied(load(args), request(args, "export"))
    written = write_files(args.out, {"model.py": to_torch(example)})
    print(f"wrote {plural(len(written), 'file')} to {args.out} (run: python "
          f"{args.out}/model.py)")
    return 0


def _figures(g, options, wanted: bool) -> dict[str, object]:
    """``export_files``' figure arguments: the TikZ figures under ``figures/``, or none."""
    if not wanted:
        return {}
    from symformer.figures import FigureOptions, figure_files
    from symformer.figures.tikz import PREAMBLE

    drawn = figure_files(g, options.extended(FigureOptions), "tikz", None,
                         diagram=False)  # the notes start with it
    return {"figures": {f"figures/{name}": str(text) for name, text in drawn.items()
                        if name != "main.tex"},
            "figure_preamble": PREAMBLE}
