"""``symformer derive``: every stage as a labelled table, or as JSON."""

from __future__ import annotations

import argparse
import json

from symformer.blocks.slices import Shown, Slice, position_labels, view
from symformer.cli._common import (
    add_convention_arguments,
    add_decimals_argument,
    add_example_argument,
    add_json_arguments,
    bounded_int,
    check_work,
    conventions_note,
    derivation,
    example_with_conventions,
    json_rounding,
    load,
    plural,
)
from symformer.cli._slice import add_slice_arguments, cut_example, slice_of
from symformer.engine import Derivation, Stage
from symformer.engine.graph import DEFAULT_MAX_OPS
from symformer.errors import ClosedFormTooLarge
from symformer.lazy import sympy
from symformer.verify.inactive import summary_lines

ORDER = 10
#: Closed forms up to this many operations are short enough to print (`--exact`).
EXACT_MAX_OPS = 12

EPILOG = """\
examples:
  symformer derive                                  # every stage, 3 decimals
  symformer derive --list                           # stage names and shapes
  symformer derive --list --all                     # and every side stage's address
  symformer derive --stage layer1.head1.weights.exp # each e^s_j (a side stage)
  symformer derive --stage 'layer1.head1.*' --decimals 5
  symformer derive --causal --stage layer1.head1.weights
  symformer derive my_example.toml --json --digits 30
  symformer derive --reader-rounding --decimals 2  # what a reader with a pencil gets
  symformer derive --exact --stage input --stage 'layer1.head1.Q'   # 4 + sin(1), ...
  symformer derive --exact --exact-max-ops 40 --stage 'layer1.head1.*'
  symformer derive --causal --mask -1e9 --stage layer1.head1.weights
  symformer derive gpt2.toml --positions 0:4 --heads 1 --dims 0:8   # a slice

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
    p.add_argument("--all", action="store_true",
                   help="also the side stages added on demand (each e^s_j and Σ, the "
                        "products, squares, RoPE's θ and angles, the weights, each "
                        "gradient's paths; docs/verify.md): what claims can name")
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
    add_slice_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer derive``."""
    rounding = json_rounding(args)
    example = load(args)
    chosen = slice_of(args, example)
    gradients = wants_gradients(args.stage, args.list) and example.loss is not None
    if chosen:  # the example cut to the tokens the slice reads, where that is exact
        from symformer.blocks.encoder import derive

        cut = cut_example(example_with_conventions(args, example), chosen,
                          gradients=gradients)
        check_work(args, cut, "derive", reader_rounding=args.reader_rounding,
                   gradients=gradients, shown=chosen.share(cut))
        g = derive(cut, max_work=args.max_work)
    else:
        check_work(args, example, "derive", reader_rounding=args.reader_rounding,
                   gradients=gradients)
        g = derivation(args, example)
    shown = view(with_gradients(g, args.stage, args.list, args.all), chosen,
                 len(example.tokens))
    if args.list:
        width = max(len(s.stage.name) for s in shown)
        for s in shown:
            print(f"{s.stage.name:<{width}}  {len(s.rows)}x{len(s.cols)}  {s.stage.kind}")
        return 0
    tables = None
    if args.reader_rounding:
        from symformer.verify.chain import reader_rounding

        tables = reader_rounding(g, args.decimals, [s.stage.name for s in shown])
        tables = {s.stage.name: [[tables[s.stage.name][i][j] for j in s.cols]
                                 for i in s.rows] for s in shown}
    if args.json:
        doc = as_json(g, shown, rounding, tables)
        if chosen:
            doc["tokens"] = list(example.tokens)
            doc["slice"] = {key: None if value is None else list(value)
                            for key, value in vars(chosen).items()}
            doc["slice"]["derived_tokens"] = len(g.example.tokens)
        if args.exact:
            for s in shown:
                doc["stages"][s.stage.name]["exact"] = [
                    [None if e is None else str(e) for e in row]
                    for row in short_closed_forms(s, args.exact_max_ops)]
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    note = (" (causal mask)" if g.causal else "") + conventions_note(args, example)
    if chosen:
        note += slice_note(chosen, len(g.example.tokens), len(example.tokens))
    if tables is not None:
        note += (f" (reader rounding: each stage from the previous ones at "
                 f"{plural(args.decimals, 'decimal')})")
    # a slice evaluates stage by stage: every table made before any is printed
    made = [tables[s.stage.name] if tables else s.values(decimals=args.decimals)
            for s in shown] if chosen else [None] * len(shown)
    print(f"{g.example.title}{note}")
    # what the example leaves inactive (a clipped FFN), said once; not for a slice that
    # derives fewer tokens (its "every token" would not be the example's)
    whole = len(g.example.tokens) == len(example.tokens)
    inactive = summary_lines(g, [s.stage.name for s in shown]) if whole else []
    if inactive:
        print("\n".join(inactive))
    for s, values in zip(shown, made):
        print()
        if values is None:
            values = tables[s.stage.name] if tables else s.values(decimals=args.decimals)
        if args.exact:
            values = [[v if e is None else str(e) for v, e in zip(row, forms)]
                      for row, forms in zip(values, short_closed_forms(s, args.exact_max_ops))]
        print(format_table(s.stage, args.decimals, values, shown=s))
    return 0


def slice_note(chosen: Slice, derived: int, tokens: int) -> str:
    """`` (slice: positions 0:4, heads 1, dims 0:8; tokens 0 to 3 of 16 derived)``."""
    cut = f"; tokens 0 to {derived - 1} of {tokens} derived" if derived < tokens else ""
    return f" (slice: {chosen.describe()}{cut})"


def wants_gradients(patterns: list[str] | None, listing: bool) -> bool:
    """Whether ``--list`` or a ``--stage`` pattern asks for the loss or its gradients."""
    return listing or any(p == "loss" or p.startswith("grad") for p in patterns or [])


def with_gradients(g: Derivation, patterns: list[str] | None, listing: bool,
                   side: bool = False) -> list[Stage]:
    """The selected stages; the loss and its gradients (``symformer backward``) are
    appended for ``--list`` and for a ``--stage`` that names them (``'grad.*'``), when
    the example has a ``[loss]``; ``side`` (``--all``): every side stage too, and a
    ``--stage`` naming one adds it (:mod:`symformer.blocks.side_stages`)."""
    from symformer.blocks.side_stages import add_side_stage, side_addresses

    if wants_gradients(patterns, listing) and g.example.loss is not None:
        from symformer.blocks.backward import backward

        backward(g)
    for name in patterns or []:
        if not any(c in name for c in "*?[") and name not in g:
            add_side_stage(g, name)
    if side:
        for name in list(side_addresses(g)):
            add_side_stage(g, name)
    return g.select(patterns)


def as_json(g: Derivation, stages: list[Stage] | list[Shown], rounding: dict[str, int],
            tables: dict[str, list[list[str]]] | None = None) -> dict:
    """The JSON document of ``derive --json``: values rounded as ``rounding`` says
    (``{"decimals": N}`` or ``{"significant": N}``); ``tables`` replaces the values, e.g.
    with reader-rounded ones, which are then marked by ``"reader_rounding": true``.
    A slice's stages (:class:`~symformer.blocks.slices.Shown`) give their shown rows and
    columns, with their indices (``"positions"``, ``"columns"``) when not whole."""
    doc = {
        "title": g.example.title,
        "tokens": list(g.example.tokens),
        "causal": g.causal,
        "stages": {},
    }
    for item in stages:
        s = item if isinstance(item, Shown) else Shown(item, tuple(range(item.shape[0])),
                                                        tuple(range(item.shape[1])))
        entry = {"shape": [len(s.rows), len(s.cols)],
                 "rows": [s.stage.rows[i] for i in s.rows],
                 "cols": [s.stage.cols[j] for j in s.cols],
                 "values": tables[s.stage.name] if tables else s.values(**rounding)}
        if not s.whole:
            entry["positions"] = position_labels(s)
            entry["columns"] = list(s.cols)
        doc["stages"][s.stage.name] = entry
    if tables:
        doc["reader_rounding"] = True
    return doc


def short_closed_forms(shown: Stage | Shown, max_ops: int) -> list[list[sympy.Expr | None]]:
    """Each (shown) entry's closed form if it has at most ``max_ops`` operations, else
    None."""
    if isinstance(shown, Stage):
        shown = Shown(shown, tuple(range(shown.shape[0])), tuple(range(shown.shape[1])))
    forms: list[list[sympy.Expr | None]] = []
    for i in shown.rows:
        row = []
        for j in shown.cols:
            try:
                form = shown.stage.closed_form(i, j, max_ops=max_ops)
            except ClosedFormTooLarge:
                form = None
            row.append(form if form is None or form.is_finite is not False else None)
        forms.append(row)
    return forms


def format_table(stage: Stage, decimals: int, values: list[list[str]] | None = None,
                 shown: Shown | None = None) -> str:
    """A stage as an aligned plain-text table with token and column labels.

    ``values`` replaces the stage's certified values (e.g. reader-rounded ones);
    ``shown``: only a slice's rows and columns (``values`` are then the slice's),
    labelled with their positions and columns.
    """
    if shown is None:
        shown = Shown(stage, tuple(range(stage.shape[0])), tuple(range(stage.shape[1])))
    values = values if values is not None else shown.values(decimals=decimals)
    positions = range(stage.shape[0]) if shown.whole else position_labels(shown)
    rows = [f"{pos} {stage.rows[i]}" for pos, i in zip(positions, shown.rows)]
    cols = [stage.cols[j] for j in shown.cols]
    head_width = max(len(r) for r in rows)
    widths = [max(len(c), *(len(v[j]) for v in values)) for j, c in enumerate(cols)]
    size = f"{stage.shape[0]}x{stage.shape[1]}"
    if not shown.whole:
        size = f"{len(shown.rows)}x{len(shown.cols)} of {size}"
    lines = [f"{stage.name}  ({size})",
             " " * head_width + "  " + "  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    for label, row in zip(rows, values):
        lines.append(label.ljust(head_width) + "  "
                     + "  ".join(v.rjust(w) for v, w in zip(row, widths)))
    return "\n".join(lines)
