"""``symformer figures``: attention maps, positional encoding, LayerNorm and probabilities."""

from __future__ import annotations

import argparse

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    load,
    plural,
    request,
)
from symformer.cli._progress import Progress
from symformer.files import output_directory, write_files
from symformer.pipeline import prepare

ORDER = 35

EPILOG = """\
examples:
  symformer figures --out figs                     # TikZ/PGFPlots: figs/main.tex + one .tex each
  symformer figures --out figs --format svg        # SVG (text kept as text, with a <title>)
  symformer figures --out figs --format png --token think
  symformer figures symformer/examples/encoder_decoder.toml --out ed --format pdf

Figures: per head the attention-weight map (values in the cells, masked cells
hatched, coloured from the map's smallest to its largest weight on the project's
colour-blind-safe blue scale; --absolute-scale: from 0 to 1), the positional encoding
as the example has it (sinusoidal: each dimension's curve through the tokens'
values; learned: the table; RoPE: each pair's rotation angle by position; none: no
figure), each LayerNorm's input and output for --token, and the next-token
probabilities when the example has a decoder with W_vocab. Every value written or
plotted is certified. The TikZ files need tikz and pgfplots (Debian:
texlive-pictures); see docs/figures.md.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``figures`` sub-command."""
    from symformer.figures import FORMATS

    p = sub.add_parser("figures", help="draw the derivation's figures (TikZ, SVG, PNG, PDF)",
                       description="Draw attention maps, the positional encoding, LayerNorm "
                                   "inputs and outputs and next-token probabilities from the "
                                   "certified values.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--format", choices=FORMATS, default="tikz",
                   help="tikz (default): one .tex per figure and main.tex; svg, png "
                        "(200 dpi) or pdf: one file per figure, drawn with matplotlib")
    p.add_argument("--token", default="1", metavar="TOKEN",
                   help="LayerNorm figures for this token: a position (default 1) or the word")
    add_decimals_argument(p, "the values written on the figures")
    p.add_argument("--absolute-scale", action="store_true",
                   help="colour attention maps from 0 to 1 (maps of different heads "
                        "compare) instead of from each map's smallest to largest weight")
    add_convention_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer figures``."""
    from symformer.figures import FigureOptions, figure_files
    from symformer.latex import resolve_token

    output_directory(args.out)  # a file or device node is refused before any work
    p = prepare(load(args), request(args, "figures", work={"fmt": args.format}))
    g = p.derivation
    options = p.request.rendering.extended(FigureOptions, token=resolve_token(g, args.token),
                                           absolute_scale=args.absolute_scale)

    with Progress("symformer figures", quiet=args.quiet) as bar:
        files = figure_files(g, options, args.format, bar.step)
    written = write_files(args.out, files)
    print(f"wrote {plural(len(written), 'file')} to {args.out}")
    return 0
