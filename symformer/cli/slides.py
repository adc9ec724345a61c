"""``symformer slides``: a Beamer deck that walks the block one stage per frame."""

from __future__ import annotations

import argparse
import re
import sys

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    load,
    plural,
    request,
    token_text,
)
from symformer.cli._progress import Progress
from symformer.files import output_directory, write_files
from symformer.pipeline import prepare

ORDER = 37

EPILOG = """\
examples:
  symformer slides --out talk                      # talk/slides.tex (Beamer)
  symformer slides --out talk --pdf                # ... and talk/slides.pdf (pdflatex)
  symformer slides gpt2_style --out talk --token 2 --decimals 2
  symformer slides --out talk --stage 'layer1.head1.*' --pdf

For every stage, in order, overlays that only add: the general equation with the
chosen token's numbers substituted, then (one keystroke later, where there is
something to predict) their results and the table with the token's row
highlighted. Short stages of one part share a frame. A stage whose equation was
worked before (the second head, the second layer) shows its table only (--full:
every stage worked). Nothing is shrunk (no text below 9 pt): long working
continues on the next frame, a table that does not fit under it gets its own.
A frame with the figure follows each attention head's weights, the positional
encoding, each LayerNorm and the next-token probabilities. Needs beamer, tikz and
pgfplots (Debian: texlive-latex-recommended, texlive-pictures; texlive-latex-extra
for the metropolis theme); see docs/slides.md.
"""

#: A box pdflatex could not fit (the deck is designed to have none).
_OVERFULL = re.compile(r"^Overfull \\[hv]box .*$", re.MULTILINE)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``slides`` sub-command."""
    p = sub.add_parser("slides", help="write a Beamer deck that walks the block step by step",
                       description="Write a Beamer deck: per stage, overlays that reveal the "
                                   "equation, the token's numbers, their results and the "
                                   "table.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--token", default=None, type=token_text, metavar="TOKEN",
                   help="follow this token: a position or the word (its first occurrence); "
                        "default: position 1 (the last one when the sentence has one token)")
    p.add_argument("--stage", action="append", metavar="GLOB",
                   help="only stages matching this name or glob (repeatable)")
    add_decimals_argument(p)
    add_convention_arguments(p, causal_help="derive with the causal mask in every layer")
    p.add_argument("--full", action="store_true",
                   help="work every stage (default: a stage whose equation an earlier "
                        "frame worked, e.g. the second head or layer, shows its table only)")
    p.add_argument("--pdf", action="store_true",
                   help="also compile slides.pdf with pdflatex")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer slides``."""
    from symformer.latex import resolve_token
    from symformer.latex.compile import compile_log, pdflatex
    from symformer.slides import SlideOptions, frames, page_count
    from symformer.slides.beamer import document

    if args.pdf:
        pdflatex()  # fail before any work when it is missing
    output_directory(args.out)  # a file or device node is refused before any work
    p = prepare(load(args), request(args, "slides"))
    g = p.derivation
    token = args.token if args.token is not None else str(min(1, len(g.example.tokens) - 1))
    options = p.request.rendering.extended(SlideOptions, token=resolve_token(g, token),
                                           stages=tuple(args.stage) if args.stage else None)
    passes = 2 if args.pdf else 0  # pdflatex's, after the stages
    with Progress("symformer slides", quiet=args.quiet) as bar:
        deck = frames(g, options, lambda k, total, name: bar.step(k, total + passes, name))
        files: dict[str, str | bytes] = {"slides.tex": document(g, options, deck)}
        if args.pdf:
            pdf, log = compile_log(files, "slides.tex", lambda k, total: bar.update(
                f"pdflatex pass {k}/{total} ({plural(page_count(deck), 'page')})"))
            files["slides.pdf"] = pdf
    if args.pdf:
        for line in _OVERFULL.findall(log)[:3]:
            print(f"symformer slides: warning: {line}", file=sys.stderr)
    written = write_files(args.out, files)
    print(f"wrote {plural(len(written), 'file')} to {args.out} "
          f"({plural(page_count(deck), 'page')})")
    return 0
