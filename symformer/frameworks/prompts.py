"""The user's own model over a file of prompts: one exact reference and one float run
per prompt (``symformer crosscheck DIR --prompts FILE``).

Every prompt is imported as ``crosscheck DIR --text PROMPT`` imports it: the
directory on that prompt's own tokens (:func:`~symformer.frameworks.hf_in.
from_pretrained`, every check of :mod:`symformer.example.model_dir`), so that what
depends on the sentence (a sliding window that bites only on a long enough prompt,
RoBERTa's padding rule) is the directory's, prompt by prompt.  The main process
imports each prompt once to check it and to estimate the work; each prompt is then a
task (:mod:`symformer.parallel`) that imports it again where it runs (an import reads
no weight: a few milliseconds) and compares the model run in the dtype with hooks
(:func:`~symformer.frameworks.torch_check.module_crosscheck`) with its exact
derivation.  A worker loads the model once per process, however many prompts it runs.

A prompt that cannot be checked (too long to tokenize, more tokens than the model's
positions, ...) is named by its line in the file with the reason, and the others are
still run.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from symformer.errors import InputError, NotSupportedError
from symformer.example.schema import Example

#: The most prompts one file may hold.
MAX_PROMPTS = 100_000


@dataclass(frozen=True)
class Prompt:
    """One prompt of the file: its text and its line number (from 1)."""

    line: int
    text: str

    def name(self, number: int) -> str:
        """``prompt 2 (line 5)``: how a prompt is named in the output."""
        return f"prompt {number} (line {self.line})"


def read_prompts(path: str | Path) -> list[Prompt]:
    """The prompts of ``path``: one a line (a line ends at ``\\n`` only: a U+2028 in a
    prompt stays in it), blank lines and ``#`` comments skipped."""
    from symformer.example.loader import read_text_file

    text = read_text_file(Path(path), "a prompts file (one prompt a line)")
    prompts = [Prompt(n, line.strip()) for n, line in enumerate(text.split("\n"), 1)
               if line.strip() and not line.lstrip().startswith("#")]
    if not prompts:
        raise InputError(f"{path}: no prompt (one a line)")
    if len(prompts) > MAX_PROMPTS:
        raise InputError(f"{path}: {len(prompts):,} prompts, more than {MAX_PROMPTS:,}")
    return prompts


def prompt_examples(directory: str, prompts: list[Prompt], max_work: int | None
                    ) -> list[Example | str]:
    """Each prompt's example (the directory imported on its tokens, as ``--text``
    would), or the one-line reason that prompt cannot be checked.  A reason every
    prompt shares (the directory's, not a prompt's) is raised instead."""
    from symformer.frameworks.hf_in import from_pretrained

    out: list[Example | str] = []
    for ids in _token_ids(directory, [p.text for p in prompts]):
        if isinstance(ids, str):
            out.append(ids)
            continue
        try:
            out.append(from_pretrained(directory, ids, max_work=max_work))
        except (InputError, NotSupportedError) as exc:
            out.append(str(exc))
    reasons = {r for r in out if isinstance(r, str)}
    if len(reasons) == 1 and len(out) > 1 and all(isinstance(r, str) for r in out):
        raise InputError(reasons.pop())
    return out


def _token_ids(directory: str, texts: list[str]) -> list[list[int] | str]:
    """Each text's token ids by the directory's tokenizer (read once), or the reason
    it cannot be tokenized (too long, no token)."""
    from symformer.frameworks.hf_tokenizer import MAX_TEXT_CHARS, tokenize, tokenize_all

    out: list[list[int] | str] = [
        f"{len(t):,} characters, more than the {MAX_TEXT_CHARS:,} tokenized at once"
        if len(t) > MAX_TEXT_CHARS else [] for t in texts]
    fit = [k for k, t in enumerate(out) if not isinstance(t, str)]
    if not fit:
        return out
    try:
        for k, (ids, _) in zip(fit, tokenize_all(directory, [texts[k] for k in fit])):
            out[k] = ids
    except InputError:  # one prompt's: find which, prompt by prompt
        for k in fit:
            try:
                out[k] = tokenize(directory, texts[k])[0]
            except InputError as exc:
                out[k] = str(exc)
    return out


#: The models this process has loaded, by (directory, dtype, attention): a worker
#: loads each once, however many prompts it runs.
_MODELS: dict[tuple[str, str, str], Any] = {}


def _model(directory: str, example: Example, dtype: str, attention: str) -> Any:
    from symformer.frameworks.torch_check import load_hf_model

    key = (directory, dtype, attention)
    if key not in _MODELS:
        _MODELS.clear()  # one model at a time in memory
        _MODELS[key] = load_hf_model(directory, example, dtype, attention)
    return _MODELS[key]


@lru_cache(maxsize=4)
def fingerprint(directory: str) -> str:
    """The model of ``directory`` as this process reads it: the SHA-256 of its
    ``config.json`` and of its ``model.safetensors`` (hashed once a process)."""
    from symformer.example.model_dir import ModelDir

    folder = ModelDir(directory)
    config = hashlib.sha256(folder.read_bytes("config.json") or b"").hexdigest()
    return f"{config}:{folder.safetensors().sha256()}"


def crosscheck_prompt(directory: str, ids: tuple[int, ...], dtype: str,
                      load: tuple[str | None, str] = (None, "sdpa"),
                      expected: str | None = None) -> list[dict]:
    """One task: the model of ``directory`` (loaded as ``load``: the dtype given to
    ``from_pretrained``, None for --dtype, and the attention implementation) on the
    tokens ``ids`` in ``dtype``, every hooked stage's error (as plain dictionaries, the
    same from any process).  The example is imported here on these tokens, as
    ``crosscheck DIR --tokens`` imports it; the work was bounded by the caller.
    ``expected``: the caller's :func:`fingerprint` of the directory; a worker that
    reads another model there (another machine, a file replaced) refuses the task."""
    from symformer.frameworks.hf_in import from_pretrained
    from symformer.frameworks.torch_check import module_crosscheck

    if expected is not None and fingerprint(directory) != expected:
        raise InputError(f"{directory}: the model directory this worker reads is not the "
                         f"one checked (its config.json or model.safetensors differ)")
    with warnings.catch_warnings():  # the unused tensors: named once, by the caller
        warnings.simplefilter("ignore")
        example = from_pretrained(directory, list(ids), max_work=0)
    model = _model(directory, example, load[0] or dtype, load[1])
    return [asdict(r) for r in module_crosscheck(model, example, dtype, max_work=0)]
