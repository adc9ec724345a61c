"""``--positions``, ``--heads``, ``--dims``: the slice a command shows (derive, trace).

The options and the slice they make are defined here once; what a slice is and what
showing it needs are :mod:`symformer.blocks.slices`', and the cut of the sentence to
the tokens it reads is :func:`symformer.pipeline.prepare`'s.
"""

from __future__ import annotations

import argparse

from symformer.blocks.slices import Slice, check_slice, parse_indices
from symformer.example import Example


def add_slice_arguments(parser: argparse.ArgumentParser, *, positions: bool = True,
                        dims: bool = True) -> None:
    """--heads, and --positions and --dims unless the command says otherwise (``trace``
    follows one token, whose whole vector it shows)."""
    if positions:
        parser.add_argument("--positions", metavar="RANGE",
                            help="only these positions' rows (and attention columns): "
                                 "0:4 (0 to 3), 1,3 or 2; under a causal mask of -inf, "
                                 "only the tokens up to the last one are derived")
    parser.add_argument("--heads", metavar="RANGE",
                        help="only these heads' stages (1-based: 1, 1:3 for 1 and 2, 2,4); "
                             "the stages they read are still derived")
    if dims:
        parser.add_argument("--dims", metavar="RANGE",
                            help="only these columns of every stage with more than one "
                                 "(0-based: 0:8, 0,5); attention maps' columns follow "
                                 "--positions")


def slice_of(args: argparse.Namespace, example: Example) -> Slice:
    """The slice the command line asks for (empty: everything), checked against
    ``example``."""
    texts = {key: getattr(args, key, None) for key in ("positions", "heads", "dims")}
    chosen = Slice(**{key: None if text is None else parse_indices(text, f"--{key}")
                      for key, text in texts.items()})
    check_slice(example, chosen)
    return chosen

