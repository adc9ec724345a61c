"""The work estimate against the CPU each command uses, command by example, in one run.

    python benchmarks/bench_estimate.py                      # everything (about 30 min)
    python benchmarks/bench_estimate.py --commands derive,trace --examples builtin,gpt2_256
    python benchmarks/bench_estimate.py --widths 64,256 --skip-imported

Each case runs ``symformer COMMAND EXAMPLE ... --max-work 0`` in a child process, as a
user runs it, and reads two numbers from that same process: the estimate the command
itself made before any work (the largest operation count it checked against the limit:
:func:`symformer.blocks.work.check_work` is wrapped to record it, nothing else changes)
and its process CPU time (user + system: the machine is shared, wall time is noisy).
The table prints, per case, the estimate in operations and in the seconds it implies
(:data:`~symformer.blocks.work.PER_SECOND` a second), the measured CPU seconds and
their ratio, measured over estimated: the constants of :mod:`symformer.blocks.cost`
are calibrated so that it lies within 1/2 and 2.

The examples: the built-in one, every shipped ``symformer/examples/*.toml``, and
imported Hugging Face models with random weights (GPT-2 and Llama-style, one block,
8 tokens, 64 to 768 wide), each built here from transformers' config classes and
written with safetensors (no hub, no network), then imported with ``symformer
import``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symformer.blocks.work import PER_SECOND, cpu_time  # noqa: E402

#: The child process: symformer's command line with check_work wrapped to record the
#: largest estimate checked (written to the file BENCH_ESTIMATE names).
HOOK = """
import os, sys
import symformer.blocks.work as work
real, seen = work.check_work, [0]
def recording(estimate, max_work, doing):
    seen[0] = max(seen[0], estimate)
    return real(estimate, max_work, doing)
work.check_work = recording
for module in list(sys.modules.values()):  # names bound before the wrap
    if getattr(module, "check_work", None) is real:
        module.check_work = recording
from symformer.cli import main
try:
    status = main(sys.argv[1:])
finally:
    with open(os.environ["BENCH_ESTIMATE"], "w") as out:
        out.write(str(seen[0]))
sys.exit(status)
"""

#: Claims with equations on the built-in example (check's equation claims).
EQUATIONS = r"""
[[equation]]
stage = "layer1.head1.scores"
latex = 'S = \frac{Q K^\top}{\sqrt{d_k}}'

[[equation]]
stage = "layer1.head1.weights"
latex = 'A_{ij} = \frac{\exp(S_{ij})}{\sum_k \exp(S_{ik})}'
"""

#: A fill template (Markdown) asking for a few values and one table.
TEMPLATE = "The first input is {{ input[0,0] }} and the output {{ output[0,0] }}.\n"


@dataclass(frozen=True)
class Case:
    """One command line: ``symformer COMMAND EXAMPLE ARGV`` (OUT: a fresh folder)."""

    name: str
    command: str
    argv: tuple[str, ...] = ()
    #: which examples it runs on: "all", "lm" (a language model or decoder: generate),
    #: "loss" (backward, train), or a tuple of example names
    on: str | tuple[str, ...] = "all"


CASES = [
    Case("derive", "derive"),
    Case("derive --reader-rounding", "derive", ("--reader-rounding",)),
    Case("backward", "backward", (), "loss"),
    Case("train --steps 3", "train", ("--steps", "3", "--lr", "0.1"), "loss"),
    Case("export latex", "export", ("--out", "OUT")),
    Case("export markdown", "export", ("--format", "markdown", "--out", "OUT")),
    Case("export json", "export", ("--format", "json", "--out", "OUT")),
    Case("export --figures", "export", ("--figures", "--out", "OUT")),
    Case("trace --token 0", "trace", ("--token", "0")),
    Case("slides", "slides", ("--out", "OUT")),
    Case("figures tikz", "figures", ("--out", "OUT")),
    Case("figures svg", "figures", ("--format", "svg", "--out", "OUT")),
    Case("prove", "prove"),
    Case("generate --steps 4", "generate", ("--steps", "4"), "lm"),
    Case("generate --kv-cache", "generate", ("--steps", "4", "--kv-cache"), "lm"),
    Case("generate --top-p --seed", "generate",
         ("--steps", "4", "--temperature", "0.7", "--top-k", "50", "--top-p", "0.9",
          "--min-p", "0.01", "--repetition-penalty", "1.2", "--seed", "1"), "lm"),
    Case("fill", "fill", ("TEMPLATE", "--out", "OUT/filled.md")),
    Case("check claims", "check", ("CLAIMS",),
         ("illustrated_self_attention", "post_claims", "scaled_identity_attention")),
    Case("check equations", "check", ("EQUATIONS",), ("builtin",)),
    Case("exercise --variants 3", "exercise",
         ("--variants", "3", "--seed", "1", "--out", "OUT"), ("builtin", "gpt2_style")),
    Case("grade", "grade", ("GRADE",), ("builtin", "gpt2_style")),
]


def model_directory(folder: Path, kind: str, width: int) -> None:
    """A random one-block GPT-2 or Llama-style model ``width`` wide (heads of 64, a
    vocabulary of 1,000), from transformers' config classes, written as
    config.json + model.safetensors."""
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(width)
    heads = max(1, width // 64)
    if kind == "gpt2":
        from transformers import GPT2Config

        config = GPT2Config(n_embd=width, n_layer=1, n_head=heads, vocab_size=1000,
                            n_positions=64, bos_token_id=0, eos_token_id=0)
        shapes = {"wte.weight": (1000, width), "wpe.weight": (64, width)}
        for name, shape in (("ln_1", (width,)), ("ln_2", (width,))):
            shapes[f"h.0.{name}.weight"] = shapes[f"h.0.{name}.bias"] = shape
        shapes |= {"h.0.attn.c_attn.weight": (width, 3 * width),
                   "h.0.attn.c_attn.bias": (3 * width,),
                   "h.0.attn.c_proj.weight": (width, width), "h.0.attn.c_proj.bias": (width,),
                   "h.0.mlp.c_fc.weight": (width, 4 * width), "h.0.mlp.c_fc.bias": (4 * width,),
                   "h.0.mlp.c_proj.weight": (4 * width, width),
                   "h.0.mlp.c_proj.bias": (width,),
                   "ln_f.weight": (width,), "ln_f.bias": (width,)}
        shapes = {"transformer." + k: v for k, v in shapes.items()}
    else:
        from transformers import LlamaConfig

        inner = (8 * width // 3 + 63) // 64 * 64
        kv = max(1, heads // 2)
        config = LlamaConfig(hidden_size=width, intermediate_size=inner, num_hidden_layers=1,
                             num_attention_heads=heads, num_key_value_heads=kv,
                             vocab_size=1000, max_position_embeddings=64,
                             tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
        p = "model.layers.0."
        hd = width // heads
        shapes = {"model.embed_tokens.weight": (1000, width), "model.norm.weight": (width,),
                  p + "input_layernorm.weight": (width,),
                  p + "post_attention_layernorm.weight": (width,),
                  p + "self_attn.q_proj.weight": (heads * hd, width),
                  p + "self_attn.k_proj.weight": (kv * hd, width),
                  p + "self_attn.v_proj.weight": (kv * hd, width),
                  p + "self_attn.o_proj.weight": (width, heads * hd),
                  p + "mlp.gate_proj.weight": (inner, width),
                  p + "mlp.up_proj.weight": (inner, width),
                  p + "mlp.down_proj.weight": (width, inner),
                  "lm_head.weight": (1000, width)}
    tensors = {}
    for name, shape in shapes.items():
        norm = len(shape) == 1 and ("ln_" in name or "norm" in name) and "bias" not in name
        tensors[name] = (float(norm) + 0.02 * rng.standard_normal(shape)).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config.to_dict()))
    save_file(tensors, str(folder / "model.safetensors"))


def child_env() -> dict[str, str]:
    """The environment of a child: this checkout first on the path."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "SYMFORMER_MAX_WORK": "0"}


def imported(folder: Path, kind: str, width: int) -> Path:
    """The example file of a random ``kind`` model ``width`` wide, 8 tokens."""
    directory = folder / f"{kind}_{width}_dir"
    path = folder / f"{kind}_{width}.toml"
    if path.exists():  # kept from an earlier run (--models)
        return path
    model_directory(directory, kind, width)
    done = subprocess.run([sys.executable, "-m", "symformer", "import", str(directory),
                           "--tokens", "1,2,3,4,5,6,7,8", "--out", str(path), "--max-work",
                           "0"], capture_output=True, text=True, env=child_env())
    if done.returncode:
        raise SystemExit(f"import {kind} {width}: {done.stderr.strip()}")
    return path


def examples(folder: Path, widths: list[int], kinds: list[str]) -> dict[str, str]:
    """Name -> example argument (a packaged name, or a path)."""
    out = {"builtin": ""}
    for path in sorted((ROOT / "symformer" / "examples").glob("*.toml")):
        out[path.stem] = path.stem if path.stem != "post_claims" else str(path)
    for kind in kinds:
        for width in widths:
            out[f"{kind}_{width}"] = str(imported(folder, kind, width))
    return out


def applies(case: Case, name: str, text: str) -> bool:
    """Whether ``case`` runs on the example ``name`` (its file's ``text``)."""
    if name == "post_claims":  # claims about the built-in example, not an example
        return case.command == "check" and case.on != ("builtin",)
    if isinstance(case.on, tuple):
        return name in case.on
    if case.on == "loss":
        return "[loss]" in text or "[objective]" in text or name == "builtin"
    if case.on == "lm":
        return "[lm_head]" in text or "[decoder]" in text or "W_vocab" in text
    return True


def example_text(argument: str) -> str:
    """The example's TOML text (the built-in one's for "")."""
    from symformer.example.loader import builtin_text

    if not argument:
        return builtin_text()
    path = Path(argument)
    if not path.exists():
        path = ROOT / "symformer" / "examples" / f"{argument}.toml"
    return path.read_text("utf-8")


def command_line(case: Case, name: str, argument: str, folder: Path) -> list[str]:
    """The child's arguments for ``case`` on ``argument``, its files made in ``folder``."""
    out = folder / "out"
    argv = []
    for a in case.argv:
        if a.startswith("OUT"):
            argv.append(str(out) + a[3:])
        elif a == "TEMPLATE":
            (folder / "notes.md").write_text(TEMPLATE)
            argv.append(str(folder / "notes.md"))
        elif a == "CLAIMS":
            argv.append(argument)
        elif a == "EQUATIONS":
            (folder / "equations.toml").write_text(EQUATIONS)
            argv.append(str(folder / "equations.toml"))
        elif a == "GRADE":
            return grade_line(name, argument, folder)
        else:
            argv.append(a)
    if case.command == "fill":
        out.mkdir(exist_ok=True)
    if case.command == "check":
        return ["check", *argv, *([argument] if argument and argument not in argv else [])]
    if case.command == "fill":
        return ["fill", *argv, *(["--example", argument] if argument else [])]
    return [case.command, *([argument] if argument else []), *argv]


def grade_line(name: str, argument: str, folder: Path) -> list[str]:
    """``grade``: an exercise of 3 variants drawn first (not measured), each answered
    with its key's values."""
    key = folder / "key"
    subprocess.run([sys.executable, "-m", "symformer", "exercise",
                    *([argument] if argument else []), "--variants", "3", "--seed", "1",
                    "--out", str(key)], capture_output=True, env=child_env(), check=True)
    answers = folder / "answers"
    answers.mkdir()
    for variant in sorted(p for p in key.iterdir() if p.is_dir() and p.name.startswith("v")):
        entries = json.loads((variant / "key.json").read_text())["entries"]
        for off, kind in ((0, "right"), (1, "off")):  # the key's answers, then each a unit off
            rows = [f"variant,{variant.name}", "stage,row,col,value"]
            for e in entries:
                value = Decimal(e["student"]) + off * Decimal(1).scaleb(
                    Decimal(e["student"]).as_tuple().exponent)
                rows.append(f"{e['stage']},{e['row']},{e['col']},{value}")
            (answers / f"{variant.name}-{kind}.csv").write_text("\n".join(rows) + "\n")
    return ["grade", str(answers), "--key", str(key), "--out", str(folder / "graded")]


def measure(argv: list[str], timeout: float) -> tuple[int, float, int, str]:
    """(estimate, CPU seconds, exit status, last line of stderr) of one child."""
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as record:
        env = {**child_env(), "BENCH_ESTIMATE": record.name}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            done = subprocess.run([sys.executable, "-c", HOOK, *argv, "--max-work", "0"],
                                  capture_output=True, text=True, env=env, timeout=timeout)
            status, err = done.returncode, done.stderr.strip()
        except subprocess.TimeoutExpired:
            status, err = -1, f"timed out after {timeout:.0f} s"
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        text = record.read().strip()
    return int(text or 0), seconds, status, (err.splitlines() or [""])[-1]


def run(cases: list[Case], named: dict[str, str], timeout: float) -> Iterator[tuple]:
    """Each applicable (case, example): its row of the table."""
    for case in cases:
        for name, argument in named.items():
            text = example_text(argument)
            if not applies(case, name, text):
                continue
            with tempfile.TemporaryDirectory() as scratch:
                argv = command_line(case, name, argument, Path(scratch))
                estimate, seconds, status, err = measure(argv, timeout)
            yield case.name, name, estimate, seconds, status, err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", help="comma-separated commands (derive: every derive "
                        "case) or case names ('derive --reader-rounding'; default: all)")
    parser.add_argument("--examples", help="comma-separated example names (default: all)")
    parser.add_argument("--widths", default="64,128,256,512,768",
                        help="imported models' widths (default 64,128,256,512,768)")
    parser.add_argument("--kinds", default="gpt2,llama", help="imported models' kinds")
    parser.add_argument("--skip-imported", action="store_true")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a case")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--models", help="a folder to keep the imported examples in (and "
                        "reuse them from on the next run)")
    args = parser.parse_args(argv)
    asked = args.commands.split(",") if args.commands else None
    cases = [c for c in CASES if asked is None or c.name in asked or c.name.split()[0] in asked]
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.models or scratch
        widths = [] if args.skip_imported else [int(w) for w in args.widths.split(",")]
        named = examples(Path(folder), widths, args.kinds.split(","))
        if args.examples:
            named = {k: v for k, v in named.items() if k in args.examples.split(",")}
        print(f"{'command':26} {'example':28} {'estimate':>12} {'est. s':>8} "
              f"{'CPU s':>8} {'ratio':>6}", flush=True)
        # a first run compiles the modules' bytecode: not any case's CPU
        subprocess.run([sys.executable, "-m", "symformer", "derive", "--stage", "input"],
                       capture_output=True, env=child_env(), check=True)
        rows, started = [], time.perf_counter()
        for case, name, estimate, seconds, status, err in run(cases, named, args.timeout):
            implied = estimate / PER_SECOND
            if status not in (0, 1):
                print(f"{case:26} {name:28} {'':>12} {'':>8} {seconds:8.2f}   n/a: "
                      f"{err[:90]}", flush=True)
                continue
            ratio = seconds / implied if implied else float("inf")
            flag = "" if 0.5 <= ratio <= 2 else "  <-- outside 1/2..2"
            print(f"{case:26} {name:28} {estimate:12,} {implied:8.2f} {seconds:8.2f} "
                  f"{ratio:6.2f}{flag}", flush=True)
            rows.append({"command": case, "example": name, "estimate": estimate,
                         "cpu": seconds, "ratio": ratio, "time": cpu_time(estimate)})
        print(f"{len(rows)} cases in {time.perf_counter() - started:.0f} s; "
              f"{sum(not 0.5 <= r['ratio'] <= 2 for r in rows)} outside 1/2..2")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
