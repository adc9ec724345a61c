"""examples/notebook.ipynb runs top to bottom in a headless kernel and shows tables."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (test extra)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (test extra)")

NOTEBOOK = Path(__file__).parent.parent / "examples" / "notebook.ipynb"


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    try:
        client.execute()
    except RuntimeError as exc:  # no kernel could start (ipykernel missing)
        if "kernel" in str(exc).lower() and "died" not in str(exc).lower():
            pytest.skip(f"no python3 kernel could start: {exc}")
        raise
    return nb


def _html(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)


def test_runs_without_errors(executed):
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in code)
    assert all(c.outputs for c in code)


def test_weights_cell_shows_a_labelled_table(executed, block):
    cell = next(c for c in executed.cells if c.source == 'g["layer1.head1.weights"]')
    html = _html(cell)
    assert "<table" in html and "1 think" in html and "understand" in html
    for value in block["layer1.head1.weights"].values(decimals=3)[1]:
        assert f"<td>{value}</td>" in html
    assert any("text/latex" in o.get("data", {}) for o in cell.outputs)


def test_trace_cell_shows_every_step(executed, block):
    cell = next(c for c in executed.cells if c.source.endswith("\nt"))
    html = _html(cell)
    assert html.count('<section class="step"') == sum(  # a LayerNorm's own mean and
        s.kind not in ("mean", "variance") or ".output_" not in s.name  # variance too
        for s in block)
    assert "<math" in html


def test_course_cells_differ(executed):
    cells = [c for c in executed.cells if "add_norm1" in c.source]
    per_token, whole = (_html(c) for c in cells[-2:])
    assert "<table" in per_token and "<table" in whole and per_token != whole
