"""Shared fixtures."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

from symformer import derive, load_example  # noqa: E402
from symformer.cli import main  # noqa: E402


@pytest.fixture(scope="session")
def builtin():
    """The built-in example (the blog post's)."""
    return load_example()


@pytest.fixture(scope="session")
def block(builtin):
    """The built-in example's derivation, unmasked."""
    return derive(builtin)


@pytest.fixture(scope="session")
def causal_block(builtin):
    """The built-in example's derivation with the causal mask."""
    return derive(builtin, causal=True)


@pytest.fixture(scope="session")
def builtin_prove_json() -> tuple[int, str]:
    """``symformer prove --json`` on the built-in example: (exit status, stdout), run once
    per session (a few seconds) for every test that reads it."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("SYMFORMER_DEBUG", "1")
        status = main(["prove", "--json"])
    return status, out.getvalue()


# Hypothesis draws the same examples on every run (and in CI) unless asked to explore:
# HYPOTHESIS_PROFILE=explore python -m pytest
settings.register_profile("default", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _debug_internal_errors(monkeypatch):
    """Let unexpected exceptions through the command line's last-resort guard."""
    monkeypatch.setenv("SYMFORMER_DEBUG", "1")
