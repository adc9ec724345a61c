"""One token through the block: the trace IR, its builder and one renderer per format.

>>> from symformer import derive, load_example
>>> from symformer.trace import trace_token, render
>>> t = trace_token(derive(load_example()), "think", decimals=2)
>>> t.steps[3].stage, t.steps[3].values
('layer1.head1.Q', ['1.60', '0.75'])
>>> page = render(t, "html")          # one self-contained step-through page
"""

from __future__ import annotations

from collections.abc import Callable

from symformer.trace.build import BUILDERS, resolve_token, trace_token
from symformer.trace.render_html import render_html
from symformer.trace.render_json import render_json
from symformer.trace.render_latex import render_latex
from symformer.trace.render_markdown import render_markdown
from symformer.trace.render_text import render_text
from symformer.trace.result import Trace
from symformer.trace.steps import (
    ActivationStep,
    AttentionStep,
    Entry,
    NormStep,
    Step,
    VectorStep,
)

#: Output formats and their renderers.
RENDERERS: dict[str, Callable[[Trace], str]] = {
    "text": render_text, "json": render_json, "markdown": render_markdown,
    "latex": render_latex, "html": render_html,
}


def render(trace: Trace, fmt: str = "text") -> str:
    """The trace in one of :data:`RENDERERS`' formats."""
    try:
        return RENDERERS[fmt](trace)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(RENDERERS)}"
                         ) from None


__all__ = [
    "BUILDERS", "RENDERERS", "ActivationStep", "AttentionStep", "Entry", "NormStep", "Step",
    "Trace", "VectorStep", "render", "resolve_token", "trace_token",
]
