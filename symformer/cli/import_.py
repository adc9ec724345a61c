"""``symformer import``: a Hugging Face model directory as an exact example file.

The module is named ``import_`` (``import`` is a Python keyword); the command it
registers is ``import``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from symformer.cli._common import work_limit
from symformer.errors import InputError
from symformer.example.literals import shorten
from symformer.files import write_file

ORDER = 95

EPILOG = """\
examples:
  symformer import ./tiny-gpt2 --tokens 3,5,7 --out gpt2.toml
  symformer import ./tiny-llama --tokens "the,cat" --out llama.toml
  symformer import ./tiny-gpt2 --text "Why did my export fail?" --out gpt2.toml
  symformer import ./tiny-bert --tokens "[CLS],the,cat,[SEP]" --segments 0,0,0,0 --out bert.toml
  symformer import ./gpt2-small --text "Why did my export fail?" --layers 0:2 --out g.toml
  symformer import ./gpt2-small --tokens 464,3290 --weights reference --out g.toml
  symformer derive gpt2.toml --stage logits

SOURCE is a Hugging Face model directory: config.json and model.safetensors (read
with NumPy; torch is not needed), and vocab.txt, vocab.json or tokenizer.json for
token names (without one, token k is named t<k>). Supported: GPT-2, Llama, Mistral and
Qwen2 (grouped-query attention; rotary embeddings without scaling), BERT, RoBERTa and
DistilBERT encoders (token types from --segments, default all 0; the embedding LayerNorm; a
masked-LM head as [lm_head], else the example ends at the encoder's output; the pooler
and classifier heads are not imported).
Every weight is the exact dyadic rational the file stores, written as a short decimal
where that is exact, else "p/2^k"; or, for a model of more than 150,000 weights (or
with --weights reference), referred to where it is in model.safetensors, whose path
(relative to the example file's folder) and SHA-256 the example records: a changed file
is refused (see docs/frameworks.md). An example reads a weights file only in its own
folder or below: a model directory elsewhere has its model.safetensors copied beside
the example (NAME.safetensors for --out NAME.toml). A model whose configuration unties
its head (tie_word_embeddings = false) and whose file lacks it is refused. A feature
symformer does not compute (sliding windows shorter than the sentence, mixture of
experts, rotary scaling, ...) is refused in one line; a tensor of the file the example
does not use (a pooler, a classifier) is named on stderr and in the file's comments.

The directory is read as untrusted input: a file that is a symbolic link out of it is
refused (the Hugging Face cache's snapshots/REV/FILE -> ../../blobs/SHA links are
followed), every setting and the safetensors header are checked before any weight is
read, .bin pickles are never opened, and the import is bounded: its work (about 20 µs
of CPU a weight written inline, 0.04 µs one referred to) is estimated from the header
and refused over --max-work, and a model whose weights written inline would exceed the
8 MiB an example file may hold is refused before it is read.
"""


def token_list(text: str) -> list[int | str]:
    """``--tokens``: comma-separated ids (all digits) or token names."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids or names, "
                                         f"found {shorten(text)!r}")
    return [int(t) if t.isascii() and t.isdigit() else t for t in items]


def segment_list(text: str) -> list[int]:
    """``--segments``: comma-separated token types (small non-negative integers)."""
    items = [t.strip() for t in text.split(",")]
    if not all(t.isascii() and t.isdigit() and len(t) < 6 for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated token types (0, 1, ...), "
                                         f"found {shorten(text)!r}")
    return [int(t) for t in items]


def first_layers(text: str) -> int:
    """``--layers``: ``0:K`` (or ``K``), the first K blocks."""
    start, _, end = text.strip().rpartition(":")
    if start.strip() not in ("", "0") or not (end.strip().isascii() and end.strip().isdigit()
                                              and 0 < int(end) <= 10_000):
        raise argparse.ArgumentTypeError(f"expected 0:K, the first K blocks (K >= 1), found "
                                         f"{text[:40]!r}; only a model's first blocks can be "
                                         f"imported (a later block needs the earlier ones)")
    return int(end)


def _loads(text: str, source: str, out: str) -> Any:
    """The example ``text`` loaded as it will be from ``out`` (its weights file read
    relative to it), refused when it is over the example files' size limit or does not
    load."""
    from symformer.example.loader import MAX_FILE_BYTES as limit
    from symformer.example.loader import parse_example as parse

    size = len(text.encode("utf-8"))
    if size > limit:
        raise InputError(f"{source}: the example would be {size / 2**20:.1f} MiB, more "
                         f"than the {limit // 2**20} MiB an example file may hold; nothing "
                         f"written")
    try:
        # never write a file that does not load (weights read relative to --out)
        return parse(text, out if "\n[weights]\n" in text else source)
    except InputError as exc:
        raise InputError(f"{source}: the imported example does not load: {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``import`` sub-command."""
    p = sub.add_parser("import", help="read a Hugging Face model directory into an exact "
                                      "example file",
                       description="Write an example .toml file holding a Hugging Face "
                                   "model's weights exactly, on a sentence of your choice.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SOURCE", help="a Hugging Face model directory")
    sentence = p.add_mutually_exclusive_group(required=True)
    sentence.add_argument("--tokens", type=token_list, metavar="IDS_OR_NAMES",
                          help="the sentence: comma-separated token ids or vocabulary names")
    sentence.add_argument("--text", metavar="TEXT",
                          help="the sentence as text, tokenized by the directory's own "
                               "tokenizer (tokenizer.json, vocab.txt or vocab.json + "
                               "merges.txt; needs the tokenizers library)")
    p.add_argument("--segments", type=segment_list, metavar="TYPES",
                   help="BERT's token types (token_type_ids), comma-separated; default all 0")
    p.add_argument("--layers", type=first_layers, metavar="0:K", default=None,
                   help="import only the model's first K blocks (its final norm and head "
                        "then read block K's output); the rest is reported, not read")
    p.add_argument("--out", required=True, metavar="FILE", help="the example file to write")
    p.add_argument("--weights", choices=("auto", "inline", "reference"), default="auto",
                   help="write every weight's exact number into the example (inline), or "
                        "refer to the directory's model.safetensors with its SHA-256 "
                        "(reference); auto (default): inline up to 150,000 weights")
    p.add_argument("--max-work", type=work_limit, metavar="N", default=None,
                   help="refuse imports estimated to need more than N operations, each "
                        "about 2 microseconds of CPU (default 5,000,000, about 10 s, or "
                        "SYMFORMER_MAX_WORK; 0: no limit)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the directory, check the example loads and fits, write it."""
    import sys

    from symformer.blocks.cost import estimate
    from symformer.blocks.work import DEFAULT_MAX_WORK, refusal
    from symformer.cli._progress import Progress
    from symformer.files import output_file
    from symformer.frameworks.hf_in import copied_weights, pretrained_text

    output_file(args.out)  # a path that cannot be written is refused before the work
    copy = copied_weights(args.out)  # where a weights file from elsewhere is copied
    fresh = not os.path.lexists(copy)
    try:
        with Progress("symformer import", quiet=args.quiet) as bar:
            text, source, unused = pretrained_text(args.source, args.tokens, args.segments,
                                                   args.max_work, bar.step, args.text,
                                                   args.layers, args.weights, args.out)
            bar.note("checking that the example loads")
            example = _loads(text, source, str(args.out))
    except BaseException:
        if fresh and os.path.lexists(copy):  # nothing left behind by a refused import
            os.unlink(copy)
        raise
    path = write_file(args.out, text)
    print(f"wrote {path}", flush=True)
    if unused:
        print(f"symformer import: note: {unused}", file=sys.stderr)
    work = estimate("derive", example)
    if work > DEFAULT_MAX_WORK:  # the refusal `symformer derive` would print, as a note
        note = refusal("`symformer derive` on it", work, DEFAULT_MAX_WORK)
        print(f"symformer import: note: {note}", file=sys.stderr)
    return 0
