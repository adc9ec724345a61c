"""Shared fixtures."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections import Counter
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


#: The slowest test files (CPU of a serial run), slowest first.  pytest-xdist
#: (``--dist loadfile --no-loadscope-reorder``, pyproject.toml) hands files to the
#: workers in collection order, so these start first and the small files fill in at the
#: end, where the two workers then finish together.  (Its default order, by number of
#: tests, left slow files with few tests -- test_prove.py, test_notebook.py -- to run
#: alone at the end.)  A file missing here runs after them, by number of tests.
SLOWEST_FIRST = [
    "test_slides.py", "test_worked_recompute.py", "test_repro.py", "test_reliability_io.py",
    "test_work_estimate.py", "test_fuzz.py", "test_operations.py", "test_equations_proved.py",
    "test_verify_decoder.py", "test_exercise_fair.py", "test_prove.py",
    "test_reliability_limits.py", "test_latex_compile.py", "test_pdf_edges.py",
    "test_trace.py", "test_prove_backward.py", "test_export_figures.py", "test_exercise.py",
    "test_polyzero.py", "test_notebook.py", "test_backward_export.py", "test_backward.py",
    "test_figures.py", "test_decoder.py",
]


def pytest_collection_modifyitems(config, items) -> None:
    """Order the files slowest first (:data:`SLOWEST_FIRST`), each file's tests kept
    together and in their order."""
    files = [item.nodeid.split("::")[0] for item in items]
    count = Counter(files)
    rank = {name: k for k, name in enumerate(SLOWEST_FIRST)}
    order = sorted(range(len(items)), key=lambda k: (
        rank.get(Path(files[k]).name, len(rank)), -count[files[k]], files[k], k))
    items[:] = [items[k] for k in order]
