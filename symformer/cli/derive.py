"""``symformer derive``: every stage as a labelled table, or as JSON."""

from __future__ import annotations

import argparse
import json

from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    add_json_arguments,
    bounded_int,
    check_work,
    conventions_note,
    derivation,
    json_rounding,
    load,
    plural,
)
from symformer.engine import Derivation, Stage
from symformer.engine.graph import DEFAULT_MAX_OPS
from symformer.errors import ClosedFormTooLarge
from symformer.lazy import sympy

ORDER = 10
#: Closed forms up to this many operations are short enough to print (`--exact`).
EXACT_MAX_OPS = 12

EPILOG = """\
examples:
  symformer derive                                  # every stage, 3 decimals
  symformer derive --list                           # stage names and shapes
  symformer derive --stage 'layer1.head1.*' --decimals 5
  symformer derive --causal --stage layer1.head1.weights
  symformer derive my_example.toml --json --digits 30
  symformer derive --reader-rounding --decimals 2  # what a reader with a pencil gets
  symformer derive --exact --stage input --stage 'layer1.head1.Q'   # 4 + sin(1), ...
  symformer derive --exact --exact-max-ops 40 --stage 'layer1.head1.*'
  symformer derive --causal --mask -1e9 --stage layer1.head1.weights

Every printed digit is certified: values are computed in ball arithmetic and the
precision is raised until the rounding is decided.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``derive`` sub-command."""
    p = sub.add_parser("derive", help="print every stage of the derivation",
                       description="Push the example through its encoder blocks exactly "
                                   "and print the stages.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_example_argument(p)
    p.add_argument("--stage", action="append", metavar="NAME",
                   help="stage name or glob pattern (repeatable), e.g. 'layer1.head1.*'")
    p.add_argument("--list", action="store_true", help="list stage names with shapes")
    add_convention_arguments(p)
    add_decimals_argument(p, "the tables", json=True)
    p.add_argument("--exact", action="store_true",
                   help="show an entry's exact closed form instead of its decimal when it "
                        "has at most --exact-max-ops operations; in JSON, adds an \"exact\" "
                        "matrix (null where the form is longer)")
    p.add_argument("--exact-max-ops", type=bounded_int(1, DEFAULT_MAX_OPS),
                   default=EXACT_MAX_OPS, metavar="OPS",
                   help=f"longest closed form --exact shows, in operations (default "
                        f"{EXACT_MAX_OPS}, at most {DEFAULT_MAX_OPS}; --exact=OPS is short "
                        f"for --exact --exact-max-ops OPS)")
    p.add_argument("--reader-rounding", action="store_true",
                   help="recompute every stage from the previous stages rounded to "
                        "--decimals, as a reader working from printed tables does")
    add_json_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer derive``."""
    rounding = json_rounding(args)
    example = load(args)
    check_work(args, example, "derive", reader_rounding=args.reader_rounding,
               gradients=wants_gradients(args.stage, args.list) and example.loss is not None)
    g = derivation(args, example)
    stages = with_gradients(g, args.stage, args.list)
    if args.list:
        width = max(len(s.name) for s in stages)
        for s in stages:
            print(f"{s.name:<{width}}  {s.shape[0]}x{s.shape[1]}  {s.kind}")
        return 0
    tables = None
    if args.reader_rounding:
        from symformer.verify.chain import reader_rounding

        tables = reader_rounding(g, args.decimals, [s.name for s in stages])
    if args.json:
        doc = as_json(g, stages, rounding, tables)
        if args.exact:
            for s in stages:
                doc["stages"][s.name]["exact"] = [
                    [None if e is None else str(e) for e in row]
                    for row in short_closed_forms(s, args.exact_max_ops)]
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    note = (" (causal mask)" if g.causal else "") + conventions_note(args, example)
    if tables is not None:
        note += (f" (reader rounding: each stage from the previous ones at "
                 f"{plural(args.decimals, 'decimal')})")
    print(f"{g.example.title}{note}")
    for s in stages:
        print()
        values = tables[s.name] if tables else s.values(decimals=args.decimals)
        if args.exact:
            values = [[v if e is None else str(e) for v, e in zip(row, forms)]
                      for row, forms in zip(values, short_closed_forms(s, args.exact_max_ops))]
        print(format_table(s, args.decimals, values))
    return 0


def wants_gradients(patterns: list[str] | None, listing: bool) -> bool:
    """Whether ``--list`` or a ``--stage`` pattern asks for the loss or its gradients."""
    return listing or any(p == "loss" or p.startswith("grad") for p in patterns or [])


def with_gradients(g: Derivation, patterns: list[str] | None, listing: bool) -> list[Stage]:
    """The selected stages; the loss and its gradients (``symformer backward``) are
    appended for ``--list`` and for a ``--stage`` that names them (``'grad.*'``), when
    the example has a ``[loss]``."""
    if wants_gradients(patterns, listing) and g.example.loss is not None:
        from symformer.blocks.backward import backward

        backward(g)
    return g.select(patterns)


def as_json(g: Derivation, stages: list[Stage], rounding: dict[str, int],
            tables: dict[str, list[list[str]]] | None = None) -> dict:
    """The JSON document of ``derive --json``: values rounded as ``rounding`` says
    (``{"decimals": N}`` or ``{"significant": N}``); ``tables`` replaces the values, e.g.
    with reader-rounded ones, which are then marked by ``"reader_rounding": true``."""
    doc = {
        "title": g.example.title,
        "tokens": list(g.example.tokens),
        "causal": g.causal,
        "stages": {
            s.name: {"shape": list(s.shape), "rows": list(s.rows), "cols": list(s.cols),
                     "values": tables[s.name] if tables else s.values(**rounding)}
            for s in stages
        },
    }
    if tables:
        doc["reader_rounding"] = True
    return doc


def short_closed_forms(stage: Stage, max_ops: int) -> list[list[sympy.Expr | None]]:
    """Each entry's closed form if it has at most ``max_ops`` operations, else None."""
    forms: list[list[sympy.Expr | None]] = []
    for i in range(stage.shape[0]):
        row = []
        for j in range(stage.shape[1]):
            try:
                form = stage.closed_form(i, j, max_ops=max_ops)
            except ClosedFormTooLarge:
                form = None
            row.append(form if form is None or form.is_finite is not False else None)
        forms.append(row)
    return forms


def format_table(stage: Stage, decimals: int, values: list[list[str]] | None = None) -> str:
    """A stage as an aligned plain-text table with token and column labels.

    ``values`` replaces the stage's certified values (e.g. reader-rounded ones).
    """
    values = values if values is not None else stage.values(decimals=decimals)
    rows = [f"{pos} {tok}" for pos, tok in enumerate(stage.rows)]
    head_width = max(len(r) for r in rows)
    widths = [max(len(c), *(len(v[j]) for v in values)) for j, c in enumerate(stage.cols)]
    lines = [f"{stage.name}  ({stage.shape[0]}x{stage.shape[1]})",
             " " * head_width + "  " + "  ".join(c.rjust(w) for c, w in zip(stage.cols, widths))]
    for label, row in zip(rows, values):
        lines.append(label.ljust(head_width) + "  "
                     + "  ".join(v.rjust(w) for v, w in zip(row, widths)))
    return "\n".join(lines)
