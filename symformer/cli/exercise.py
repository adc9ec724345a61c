"""``symformer exercise``: variants of a template with student sheets and answer keys."""

from __future__ import annotations

import argparse

from symformer.cli._common import bounded_int, token_text, work_limit
from symformer.cli._progress import Progress
from symformer.files import output_directory, write_files
from symformer.parallel import MAX_JOBS

ORDER = 75
#: Decimals an exercise may ask for (by hand: a few).
MAX_EXERCISE_DECIMALS = 6
#: Largest seed (a TOML integer).
MAX_SEED = 2 ** 63 - 1

EPILOG = """\
examples:
  symformer exercise --variants 30 --seed 7 --out class          # built-in example
  symformer exercise my_template.toml --variants 30 --seed 7 --out class --pdf
  symformer exercise --variants 5 --seed 1 --out ffn --ask 'layer1.ffn.*' --decimals 1
  symformer exercise --variants 30 --seed 7 --out class --margin 1/50 --token think

Writes DIR/manifest.toml (what `symformer grade` reads), DIR/vNN/example.toml (each
variant, an ordinary example file), DIR/vNN/sheet.tex|md (definitions, given numbers,
equations, empty tables, room for working), DIR/vNN/key.tex|md (filled tables, worked
lines on the student's path), DIR/vNN/key.json (every entry: exact rounding, the value
from the student's rounded answers, that line as plain arithmetic) and
DIR/key-all.tex|md. Numbers are drawn from the ranges of the template's [exercise]
table (defaults: embeddings 0..2 integers, weights -1/2..1/2 and biases -1..1/2 in
quarters); no asked value lies within the margin of a rounding boundary, and every
draw is fair (scores |s| <= 4, no softmax weight above 0.9, an FFN activation input of
both signs, no nonzero answer rounding to 0), all proved with ball arithmetic.
A sheet asks one token's path through the asked steps (--token; the default sheet at
most 40 entries; --every-entry: every entry), gives its numbers at the asked decimals,
and the key works each entry from the numbers it printed before (a softmax row with
each e^s and their sum). The same seed gives the same files on every machine. See
docs/exercises.md.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``exercise`` sub-command."""
    from symformer.exercise import DEFAULT_ASK, MAX_VARIANTS
    from symformer.lms import FORMATS

    p = sub.add_parser("exercise", help="exercise sheets and answer keys: variants of an "
                                        "example drawn for hand computation",
                       description="Draw variants of a template example for students to "
                                   "compute by hand, with sheets, keys and a manifest.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("template", nargs="?", metavar="TEMPLATE.toml",
                   help="template example (file or packaged name; default: the built-in "
                        "example)")
    p.add_argument("--variants", required=True, type=bounded_int(1, MAX_VARIANTS),
                   metavar="N", help=f"how many variants (1 to {MAX_VARIANTS})")
    p.add_argument("--seed", required=True, type=bounded_int(0, MAX_SEED), metavar="S",
                   help="the seed: the same seed gives the same files everywhere")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--ask", action="append", metavar="GLOB",
                   help=f"stages the students compute (repeatable; default: "
                        f"{' '.join(DEFAULT_ASK)})")
    p.add_argument("--decimals", type=bounded_int(0, MAX_EXERCISE_DECIMALS), default=2,
                   metavar="D", help=f"decimals of the answers (default 2, at most "
                                     f"{MAX_EXERCISE_DECIMALS})")
    p.add_argument("--token", default="1", type=token_text, metavar="T",
                   help="the keys' worked lines follow this token (position or word; "
                        "default 1)")
    p.add_argument("--margin", metavar="M", default=None,
                   help="no asked value within M units of the last decimal of a rounding "
                        "boundary (an exact number below 1/2; default: the template's "
                        "[exercise] margin, else 1/100)")
    p.add_argument("--every-entry", action="store_true",
                   help="ask every entry of the asked stages (default: the entries on "
                        "the token's path, one token through the steps)")
    p.add_argument("--format", action="append", dest="formats", metavar="LMS",
                   choices=FORMATS,
                   help="also write the exercise for an LMS (repeatable): moodle "
                        "(moodle.xml, Cloze), prairielearn (question folders), qti "
                        "(qti.zip, QTI 2.1 for Canvas/Blackboard), gift (gift.txt); "
                        "see docs/lms.md")
    p.add_argument("--pdf", action="store_true",
                   help="also compile every sheet and key to PDF with pdflatex")
    p.add_argument("--max-work", type=work_limit, metavar="N", default=None,
                   help="work limit: refuse variant counts whose sheets and first draws "
                        "exceed N operations, and stop a search before it would pass N "
                        "(every draw counts; default 5,000,000, or SYMFORMER_MAX_WORK; 0: "
                        "no limit; see docs/exercises.md)")
    p.add_argument("--jobs", type=bounded_int(1, MAX_JOBS), default=1, metavar="N",
                   help="build the variants' sheets and keys on N local processes (default "
                        "1; the same files as one process)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="build each variant's sheets as a task on the Dask scheduler at "
                        "ADDRESS (tcp://host:8786; needs the distributed package)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``symformer exercise``."""
    from symformer.exercise import DEFAULT_ASK, SheetRequest, make_exercise
    from symformer.latex.compile import compile_pdf, pdflatex
    from symformer.words import plural

    if args.pdf:
        pdflatex()  # fail before any work when it is missing
    output_directory(args.out)
    request = SheetRequest(args.template, args.variants, args.seed,
                      tuple(args.ask) if args.ask else DEFAULT_ASK, args.decimals,
                      args.token, args.margin, args.max_work, args.every_entry, args.jobs,
                      args.scheduler)
    with Progress("symformer exercise", total=args.variants, quiet=args.quiet) as bar:
        made = make_exercise(request, lambda k, n: bar.update(f"variant {k}/{n} drawn"),
                             bar.note)
    files: dict[str, str | bytes] = dict(made.files)
    if args.formats:
        from symformer.lms import exercise_files

        files.update(exercise_files(made, request, list(dict.fromkeys(args.formats))))
    if args.pdf:
        sources = [name for name in made.files if name.endswith(".tex")]
        with Progress("symformer exercise", total=len(sources), quiet=args.quiet) as bar:
            for name in sources:
                bar.update(f"pdflatex {name}")
                folder, _, base = name.rpartition("/")
                pdf = compile_pdf({base: made.files[name]}, main=base)
                files[(f"{folder}/" if folder else "") + base[:-4] + ".pdf"] = pdf
    written = write_files(args.out, files)
    search = made.search
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(search.rejected.items())) or "none"
    print(f"wrote {plural(len(written), 'file')} to {args.out}: "
          f"{plural(len(made.variants), 'variant')}, {plural(len(made.asked), 'asked stage')}; "
          f"{plural(search.total_rejected, 'draw')} rejected ({reasons})")
    return 0
