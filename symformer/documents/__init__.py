"""What the commands print, built from a prepared request: one module per command.

A command is *parse arguments → prepare → build → render → write*; the build step is
here, so that a notebook gets exactly what the command line prints::

    >>> from symformer import Request, load_example, prepare
    >>> from symformer.documents import derive_text
    >>> text = derive_text(prepare(load_example(), Request(stages=("input",))))
    >>> print(text.splitlines()[2])
    input  (4x4)

* :mod:`~symformer.documents.derive`: ``derive`` (:func:`derive_text`, ``--json``
  :func:`derive_json`, ``--list`` :func:`listing`), ``backward`` (:func:`backward_text`)
  and ``trace`` (:func:`trace_document`, rendered by :func:`symformer.trace.render`);
* :mod:`~symformer.documents.check`: ``check`` (:func:`check_text`, :func:`check_json`);
* :mod:`~symformer.documents.crosscheck`: ``crosscheck`` (:func:`reference_text`,
  :func:`torch_text`, :func:`prompts_text` and their ``*_json``);
* :mod:`~symformer.documents.generate`: ``generate`` (:func:`generate_text`,
  :func:`generate_json`);
* :mod:`~symformer.documents.train`: ``train`` (:func:`train_text`, :func:`train_lines`).
"""

from __future__ import annotations

from symformer.documents.derive import (
    as_json,
    backward_lines,
    backward_text,
    derive_json,
    derive_lines,
    derive_text,
    format_table,
    listing,
    reader_tables,
    short_closed_forms,
    trace_document,
)

#: Where each other command's builders live, imported on first use: ``derive`` loads
#: neither the checker nor the trainer (tests/test_imports.py).
_HOMES = {
    "check_json": "check", "check_text": "check",
    "over_tol": "crosscheck", "prompts_json": "crosscheck", "prompts_text": "crosscheck",
    "reference_json": "crosscheck", "reference_text": "crosscheck",
    "torch_json": "crosscheck", "torch_text": "crosscheck",
    "drift_json": "crosscheck", "drift_text": "crosscheck",
    "generate_json": "generate", "generate_text": "generate",
    "train_lines": "train", "train_text": "train",
}


def __getattr__(name: str) -> object:
    """A builder of ``check``, ``crosscheck``, ``generate`` or ``train``, from its module."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = [
    "as_json", "backward_lines", "backward_text", "check_json", "check_text", "drift_json",
    "drift_text",
    "derive_json", "derive_lines", "derive_text", "format_table", "generate_json",
    "generate_text", "listing", "over_tol", "prompts_json", "prompts_text", "reader_tables",
    "reference_json", "reference_text", "short_closed_forms", "torch_json", "torch_text",
    "trace_document", "train_lines", "train_text",
]
