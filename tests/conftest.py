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


#: The files that take longest (CPU seconds of a full run, most first): collected first,
#: so that with ``--dist loadfile --no-loadscope-reorder`` (pyproject.toml) the two
#: workers start on them and end on short files, not one worker on a long file while
#: the other waits.  Files not named keep their order after these.
LONGEST_FIRST = (
    "test_slides.py", "test_worked_recompute.py", "test_reliability_io.py",
    "test_hostile_inputs.py", "test_work_estimate.py", "test_export_figures.py",
    "test_operations.py", "test_figures.py", "test_latex_compile.py",
    "test_slides_fill.py", "test_notation_scans.py", "test_equations_proved.py",
    "test_imports.py", "test_new_operation.py", "test_backward_export.py",
    "test_parallel.py", "test_fuzz.py", "test_values_export.py",
)


#: The tests marked ``slow`` (``python -m pytest`` leaves them out: pyproject.toml's
#: ``-m "not slow"``; ``python -m pytest -m "slow or not slow"`` runs everything, about
#: a minute more on 2 cores), by node id prefix.  Four kinds, each with a faster
#: sibling that stays in the default run:
#:
#: * measured CPU against the work estimate (a timing band: benchmarks/bench_estimate.py
#:   prints the same ratios; the estimate's sizes are tested in the default run);
#: * the same scan over every shipped example's compiled notes, deck or figures (the
#:   built-in example and the smallest ones stay in the default run, and
#:   test_chapter_slides_scan / test_symbol_meanings scan every example uncompiled);
#: * real processes killed, umasks, clusters and kernels (the in-process kill tests,
#:   the atomic-write tests and the sequential paths stay in the default run);
#: * the e^-1e9 hang guard through slides and export (the figures' stays), a
#:   2000-letter name (the 1000-letter one stays).
SLOW = (
    "test_work_estimate.py::test_measured_work_over_estimate_stays_in_the_band",
    "test_decoding3_check_estimate.py::test_measured_work_over_estimate_stays_in_the_band",
    "test_latex_compile.py::test_notes_compile_without_overfull_boxes[gpt2_style]",
    "test_latex_compile.py::test_notes_compile_without_overfull_boxes[course_module]",
    "test_latex_compile.py::test_notes_compile_without_overfull_boxes[encoder_decoder]",
    "test_notation_scans.py::test_displayed_derivatives_are_fractions[gpt2_style]",
    "test_notation_scans.py::test_displayed_derivatives_are_fractions[course_module]",
    "test_notation_scans.py::test_displayed_derivatives_are_fractions[encoder_decoder]",
    "test_slides.py::test_no_word_on_a_frame_is_below_9pt[gpt2_deck]",
    "test_slides.py::test_no_frame_is_overfull[gpt2_deck]",
    "test_slides.py::test_no_internal_identifier_on_screen[gpt2_deck]",
    "test_slides.py::test_pages_are_the_planned_overlays[gpt2_deck]",
    "test_reliability_io.py::test_a_kill_while_a_real_export_writes_leaves_the_folder_whole",
    "test_reliability_io.py::test_files_of_every_command_get_the_umask_mode",
    "test_hostile_inputs.py::test_written_files_follow_the_umask",
    "test_parallel.py::test_a_dask_cluster_gives_the_same_results",
    "test_values_export.py::test_mystmd_book_builds_with_live_values",
    "test_export_figures.py::test_export_with_figures_compiles[symformer/examples/enc",
    "test_figures.py::test_a_weight_near_exp_minus_1e9_is_drawn_at_0_quickly[command2]",
    "test_figures.py::test_a_weight_near_exp_minus_1e9_is_drawn_at_0_quickly[command3]",
    "test_reliability_io.py::test_long_names_compile_shortened_in_tables_and_whole_in_th"
    "e_text[2000]",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of :data:`SLOW` marked ``slow``; the files of :data:`LONGEST_FIRST`
    first (a stable sort: each file's tests stay together and in order)."""
    for item in items:
        node = f"{item.path.name}::{item.name}"
        if node.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _debug_internal_errors(monkeypatch):
    """Let unexpected exceptions through the command line's last-resort guard."""
    monkeypatch.setenv("SYMFORMER_DEBUG", "1")
