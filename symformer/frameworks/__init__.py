"""Models from the frameworks people use, in and out, exactly.

* :func:`from_pretrained`: a Hugging Face directory (``config.json`` +
  ``model.safetensors``; no torch needed) as an exact example;
* :func:`from_torch`: ``torch.nn.MultiheadAttention``, ``TransformerEncoderLayer`` /
  ``TransformerEncoder``, ``TransformerDecoderLayer`` / ``TransformerDecoder``;
* :func:`to_torch`: an example as a standalone PyTorch module file.

See docs/frameworks.md.
"""

from __future__ import annotations

from typing import Any

#: What to install for the torch-only functions and commands.
TORCH_HINT = "this needs PyTorch: pip install 'symformer[torch]' (a CPU wheel: pip install torch)"


def require_torch() -> Any:
    """``torch``, or a one-line NotSupportedError saying what to install."""
    from symformer.errors import NotSupportedError

    try:
        import torch
    except ImportError:
        raise NotSupportedError(TORCH_HINT) from None
    return torch


def from_pretrained(directory: Any, tokens: Any = None, segments: Any = None,
                    max_work: int | None = None, text: str | None = None,
                    layers: int | None = None) -> Any:
    """The exact example of a Hugging Face model directory (see :mod:`.hf_in`) on
    ``tokens`` (ids or names) or ``text`` (tokenized by the directory's tokenizer);
    ``segments``: a BERT model's token types (default all 0); ``max_work``: the work
    limit, as ``--max-work`` (None: SYMFORMER_MAX_WORK or the default; 0: none);
    ``layers``: only the first ``layers`` blocks."""
    from symformer.frameworks.hf_in import from_pretrained as load

    return load(directory, tokens, segments, max_work, text, layers)


def from_torch(module: Any, tokens: Any, causal: bool = False, memory: Any = None,
               encoder: Any = None) -> Any:
    """The exact example of a PyTorch module on input rows (see :mod:`.torch_in`); a
    decoder layer reads ``memory`` (the rows, or source rows for ``encoder``)."""
    require_torch()
    from symformer.frameworks.torch_in import from_torch as load

    return load(module, tokens, causal, memory, encoder)


def to_torch(example: Any) -> str:
    """The text of a standalone PyTorch module file for ``example`` (see :mod:`.torch_out`)."""
    from symformer.frameworks.torch_out import to_torch as write

    return write(example)
