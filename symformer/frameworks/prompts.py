"""The user's own model over a file of prompts: one exact reference and one float run
per prompt (``symformer crosscheck DIR --prompts FILE``).

The directory is imported once, here (every check of
:mod:`symformer.example.model_dir`, the work bound), each prompt tokenized by its own
tokenizer, and each prompt becomes a task (:mod:`symformer.parallel`): the example on
that prompt's tokens, derived exactly, against the model run in the dtype with hooks
(:func:`~symformer.frameworks.torch_check.module_crosscheck`).  A worker imports the
directory and loads the model once per process, however many prompts it runs.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from symformer.errors import InputError
from symformer.example.schema import Example

#: The most prompts one file may hold.
MAX_PROMPTS = 100_000


def read_prompts(path: str | Path) -> list[str]:
    """The prompts of ``path``: one a line, blank lines and ``#`` comments skipped."""
    from symformer.example.loader import read_text_file

    text = read_text_file(Path(path), "a prompts file (one prompt a line)")
    prompts = [line.strip() for line in text.splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    if not prompts:
        raise InputError(f"{path}: no prompt (one a line)")
    if len(prompts) > MAX_PROMPTS:
        raise InputError(f"{path}: {len(prompts):,} prompts, more than {MAX_PROMPTS:,}")
    return prompts


def prompt_examples(directory: str, prompts: list[str], max_work: int | None
                    ) -> list[Example]:
    """The example of the directory on each prompt (imported once: the prompts only
    change the sentence)."""
    from symformer.frameworks.hf_in import from_pretrained
    from symformer.frameworks.hf_tokenizer import tokenize_all

    tokenized = tokenize_all(directory, prompts)  # the tokenizer read once
    first = from_pretrained(directory, tokenized[0][0], max_work=max_work)
    return [_on_tokens(first, ids, f"prompt {k + 1}")
            for k, (ids, _) in enumerate(tokenized)]


def _on_tokens(example: Example, ids: list[int], where: str) -> Example:
    """``example`` on the token ids ``ids`` (checked as the loader checks a sentence)."""
    if any(not 0 <= i < len(example.vocab) for i in ids):
        raise InputError(f"{where}: a token id outside the vocabulary of "
                         f"{len(example.vocab)}")
    table = example.positional_embeddings
    if table is not None and len(ids) > table.rows:
        raise InputError(f"{where}: {len(ids)} tokens, more than the model's "
                         f"{table.rows} positions")
    tokens = tuple(example.vocab[i] for i in ids)
    segments = (0,) * len(ids) if example.token_type_embeddings is not None else ()
    return replace(example, tokens=tokens, segments=segments)


@lru_cache(maxsize=4)
def _imported(directory: str) -> Example:
    from symformer.frameworks.hf_in import from_pretrained

    return from_pretrained(directory, [0], max_work=0)  # bounded by the caller already


@lru_cache(maxsize=4)
def _model(directory: str) -> Any:
    from symformer.frameworks.torch_check import load_hf_model

    return load_hf_model(directory, _imported(directory))


def crosscheck_prompt(directory: str, ids: tuple[int, ...], dtype: str) -> list[dict]:
    """One task: the model of ``directory`` on the tokens ``ids`` in ``dtype``, every
    hooked stage's error (as plain dictionaries, the same from any process)."""
    from symformer.frameworks.torch_check import module_crosscheck

    example = _on_tokens(_imported(directory), list(ids), "prompt")
    return [asdict(r) for r in module_crosscheck(_model(directory), example, dtype)]
