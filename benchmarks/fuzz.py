"""The longer run of the test suite's fuzzer (tests/fuzz_mutations.py).

    python benchmarks/fuzz.py --cases 2000 --seed 1             # 2000 cases
    python benchmarks/fuzz.py --minutes 10 --seed 1 --out findings
    python benchmarks/fuzz.py --replay findings/traceback-0001.json

Case i of seed S is generated from ``random.Random(f"{S}:{i}")``, so any case can be
rerun alone (``--seed S --first i --cases 1``).  Every case runs one command on a
mutated shipped example or claims file, in a forked child of this process, under a
SIGALRM bound (``--bound``, default 20 s; SIGKILL 10 s later) and a memory cap
(``--memory-mb``).  The summary gives the cases run, the exit statuses, the failures
by kind (tracebacks, hangs, other statuses, status 2 without a message, crashes), one
line per distinct failure class with a saved reproducer (the case's TOML file and a
JSON file with the command, the mutations and the traceback), and the slowest case.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz_mutations import DEFAULT_BOUND, Case, Outcome, make_case, run_case  # noqa: E402

#: Reproducers saved per failure class.
KEEP_PER_CLASS = 3


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:80]


def save(out: Path, number: int, case: Case, outcome: Outcome) -> Path:
    """Write the case's file and a JSON record of it; returns the JSON path."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{outcome.kind}-{number:05d}"
    stem.with_suffix(".toml").write_text(case.text, encoding="utf-8", errors="surrogateescape")
    record = {"case": asdict(case), "outcome": asdict(outcome),
              "signature": outcome.signature(case), "toml": stem.with_suffix(".toml").name}
    record["case"]["text"] = None  # the .toml file next to it holds the text
    path = stem.with_suffix(".json")
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def replay(path: Path, bound: float) -> int:
    """Rerun a saved case in this process (no fork) and print how it ends."""
    record = json.loads(path.read_text(encoding="utf-8"))
    case = Case(**{**record["case"], "text": (path.parent / record["toml"]).read_text(
        encoding="utf-8", errors="surrogateescape")})
    outcome = run_case(case, bound=bound, isolate=False)
    print(outcome.report(case))
    return 1 if outcome.failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000, help="cases to run (default 1000)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop after this many minutes even if cases remain")
    parser.add_argument("--seed", default="0", help="the run's seed (default 0)")
    parser.add_argument("--first", type=int, default=0, help="number of the first case")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND,
                        help=f"seconds per case before it counts as a hang ({DEFAULT_BOUND:g})")
    parser.add_argument("--memory-mb", type=int, default=4096,
                        help="address-space cap of each case's process (0: none)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"),
                        help="folder for the reproducers of failures (default fuzz-findings)")
    parser.add_argument("--replay", type=Path, help="rerun one saved case (its .json file)")
    parser.add_argument("--quiet", action="store_true", help="no line per failure")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.bound)

    start = time.perf_counter()
    statuses: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    commands: Counter[str] = Counter()
    classes: dict[str, list[str]] = {}
    class_count: Counter[str] = Counter()
    slowest: tuple[float, str] = (0.0, "")
    run = 0
    for number in range(args.first, args.first + args.cases):
        if args.minutes is not None and time.perf_counter() - start > 60 * args.minutes:
            break
        case = make_case(random.Random(f"{args.seed}:{number}"))
        outcome = run_case(case, bound=args.bound, memory_mb=args.memory_mb or None)
        run += 1
        commands[case.argv[0]] += 1
        statuses[str(outcome.status)] += 1
        kinds[outcome.kind] += 1
        if outcome.seconds > slowest[0]:
            slowest = (outcome.seconds, f"case {number}: {case.describe()}".replace("\n", "; "))
        if outcome.failed:
            signature = outcome.signature(case)
            class_count[signature] += 1
            saved = classes.setdefault(signature, [])
            if len(saved) < KEEP_PER_CLASS:
                saved.append(str(save(args.out, number, case, outcome)))
            if not args.quiet:
                print(f"case {number}: {outcome.kind}: {signature}", flush=True)

    elapsed = time.perf_counter() - start
    print(f"\nseed {args.seed}: {run} cases in {elapsed:.0f} s "
          f"({', '.join(f'{c} {n}' for c, n in sorted(commands.items()))})")
    print("exit statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    print("outcomes: " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()))
    others = run - kinds["ok"] - kinds["traceback"] - kinds["hang"]
    print(f"tracebacks: {kinds['traceback']}, hangs: {kinds['hang']}, other failures: {others}")
    print(f"slowest case: {slowest[0]:.1f} s, {slowest[1]}")
    if classes:
        print(f"\n{len(classes)} distinct failure classes (reproducers in {args.out}/):")
        for signature, count in class_count.most_common():
            print(f"  {count:5d}  {signature}\n         {classes[signature][0]}")
    return 1 if classes else 0


if __name__ == "__main__":
    sys.exit(main())
