"""A Sphinx / MyST (Jupyter Book 1) extension: the ``symformer`` role.

``{symformer}`layer1.head1.weights[1,3]``` is replaced by the certified value of
``symformer-values.json`` (written by ``symformer export --format values``);
``{symformer}`worked:layer1.head1.Q[1,0]``` by that worked line (math).  In
``conf.py``: ``extensions = ["symformer_values_sphinx"]`` (the copy the export writes,
importable without symformer) or ``"symformer.authoring.sphinx"``, and
``symformer_values = "symformer-values.json"`` (relative to the source folder).  An
unknown name stops the build with an error naming it.  This module needs only Sphinx
(and docutils), not the symformer package.
"""

from __future__ import annotations

import json
from pathlib import Path


def _values(app) -> dict:
    cached = getattr(app.env, "symformer_values_data", None)
    if cached is None:
        path = Path(app.srcdir) / app.config.symformer_values
        cached = json.loads(path.read_text(encoding="utf-8"))
        app.env.symformer_values_data = cached
    return cached


def symformer_role(name, rawtext, text, line, inliner, options=None, content=None):
    """The value (a text node) or worked line (math) named by ``text``."""
    from docutils import nodes  # Sphinx's own dependency: imported where Sphinx runs us

    app = inliner.document.settings.env.app
    data = _values(app)
    key = "".join(text.split())
    if key.startswith("worked:"):
        worked = data["worked"].get(key[len("worked:"):])
        if worked is not None:
            return [nodes.math(rawtext, worked)], []
    elif key in data["values"]:
        value = data["values"][key].replace("-", "\u2212")
        return [nodes.Text(value)], []
    message = inliner.reporter.error(f"symformer: no value named {key!r} in "
                                     f"{app.config.symformer_values}", line=line)
    return [inliner.problematic(rawtext, rawtext, message)], [message]


def setup(app):
    """Register the role and the ``symformer_values`` setting."""
    app.add_config_value("symformer_values", "symformer-values.json", "env")
    app.add_role("symformer", symformer_role)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
