"""Many tasks at once (symformer.parallel): local processes and a local Dask cluster give
the serial run's results, in the tasks' order; a failed task is named, the others kept."""

from __future__ import annotations

import pytest

from symformer.errors import InputError
from symformer.parallel import run_tasks


def certified_output(name: str | None) -> str:
    """A task: the example's exact output entry [0, 0] to 20 certified decimals."""
    import symformer

    g = symformer.derive(symformer.load_example(name))
    return str(g["output"].rounded(decimals=20)[0][0])


TASKS = [(None,), ("gpt2_style",), ("no_such_example",), ("attention_only",)]
NAMES = ["built-in", "gpt2_style", "missing", "attention_only"]


def _check(outcomes) -> None:
    serial = [certified_output(*t) if n != "missing" else None for t, n in zip(TASKS, NAMES)]
    assert [o.name for o in outcomes] == NAMES
    assert [o.value for o in outcomes] == serial
    assert [o.ok for o in outcomes] == [True, True, False, True]
    assert "no_such_example" in outcomes[2].error


def test_serial_and_local_processes_agree() -> None:
    seen: list[tuple[int, int, str]] = []
    _check(run_tasks(certified_output, TASKS, NAMES, progress=lambda *a: seen.append(a)))
    assert [k for k, _, _ in seen] == [1, 2, 3, 4] and {t for _, t, _ in seen} == {4}
    _check(run_tasks(certified_output, TASKS, NAMES, jobs=2))
    with pytest.raises(InputError, match="--jobs"):
        run_tasks(certified_output, TASKS, NAMES, jobs=0)


def test_a_dask_cluster_gives_the_same_results() -> None:
    distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        _check(run_tasks(certified_output, TASKS, NAMES, scheduler=cluster.scheduler_address))
    with pytest.raises(InputError, match="no Dask scheduler"):
        run_tasks(certified_output, TASKS, NAMES, scheduler="tcp://127.0.0.1:9",
                  connect_timeout=2)


def test_exercise_sheets_on_two_processes_are_the_same_files() -> None:
    from symformer.exercise import SheetRequest, make_exercise

    serial = make_exercise(SheetRequest(None, 2, seed=7)).files
    parallel = make_exercise(SheetRequest(None, 2, seed=7, jobs=2)).files
    assert parallel == serial and len(serial) > 10
