"""symformer.parallel bounded and named: a Dask worker running two threads gives the
serial results (one task at a time in a process), a local process killed costs only its
own task, a scheduler that does not answer, has no worker or whose workers never finish
is a one-line answer within its timeout, tls:// and ucx:// are refused in one line, and
nothing of Dask's own reaches stderr.  Loopback only; every server here is stopped."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from symformer.errors import InputError
from symformer.parallel import run_tasks


def _cluster(distributed, **sizes):
    """A Dask cluster in this process (threads), on loopback TCP, no dashboard."""
    return distributed.LocalCluster(processes=False, protocol="tcp", host="127.0.0.1",
                                    dashboard_address=None, **sizes)


def third_at(bits: int) -> str:
    """A task whose answer depends on the process-wide precision it sets: 1/3 at
    ``bits`` bits, read back after a pause that lets another thread run."""
    from flint import arb

    from symformer.engine.arbmath import precision

    with precision(bits):
        time.sleep(0.02)  # another thread's task, were it allowed, sets its own bits
        return (arb(1) / 3).str(more=True, radius=False)


def _exact_third(bits: int) -> str:
    """The same, independently: the nearest ``bits``-bit binary fraction to 1/3 has a
    known decimal expansion (mpmath at that precision)."""
    import mpmath

    with mpmath.workprec(bits):
        return mpmath.nstr(mpmath.mpf(1) / 3, int(bits * 0.30103) + 5, strip_zeros=False)


def test_a_two_thread_dask_worker_runs_one_task_at_a_time(capfd) -> None:
    distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    bits = [53, 300, 64, 200, 80, 400, 53, 120]
    serial = run_tasks(third_at, [(b,) for b in bits], [str(b) for b in bits])
    for b, outcome in zip(bits, serial):  # the task itself is right (mpmath)
        assert outcome.value[:b // 4] == _exact_third(b)[:b // 4]
    with _cluster(distributed, n_workers=1, threads_per_worker=2) as cluster:
        on_two = run_tasks(third_at, [(b,) for b in bits], [str(b) for b in bits],
                           scheduler=cluster.scheduler_address, connect_timeout=10)
    assert [o.value for o in on_two] == [o.value for o in serial]
    assert capfd.readouterr().err == ""


def dies_on(word: str) -> str:
    """A task whose process is killed for ``word == "kill"`` (as an out-of-memory kill)."""
    if word == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return word.upper()


def test_a_killed_local_process_costs_only_its_own_task() -> None:
    words = ["a", "kill", "b"]
    outcomes = run_tasks(dies_on, [(w,) for w in words], words, jobs=2)
    assert [o.value for o in outcomes] == ["A", None, "B"]
    assert outcomes[1].name == "kill" and "its process ended" in outcomes[1].error


@pytest.mark.parametrize("address", ["tls://127.0.0.1:1", "ucx://127.0.0.1:1",
                                     "inproc://x", "tcp://127.0.0.1:99999", "127.0.0.1"])
def test_only_tcp_addresses_are_taken(address) -> None:
    with pytest.raises(InputError, match="tcp://HOST:PORT") as refused:
        run_tasks(dies_on, [("a",)], ["a"], scheduler=address)
    assert "\n" not in str(refused.value)


def _silent_port() -> tuple[socket.socket, int]:
    """A loopback port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server, server.getsockname()[1]


def test_a_scheduler_that_never_answers_is_a_bounded_one_line_refusal(capfd) -> None:
    pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    server, port = _silent_port()
    try:
        start = time.monotonic()
        with pytest.raises(InputError, match="no Dask scheduler answers") as refused:
            run_tasks(dies_on, [("a",)], ["a"], scheduler=f"tcp://127.0.0.1:{port}",
                      connect_timeout=1)
        assert time.monotonic() - start < 4
    finally:
        server.close()
    assert "\n" not in str(refused.value)
    assert capfd.readouterr().err == ""


def wait_for(event_name: str) -> str:
    """A task that never finishes by itself (a frozen worker): it waits on an event
    of this process that the test sets once the run has given up."""
    _EVENTS[event_name].wait(30)
    return event_name


_EVENTS = {"frozen": threading.Event()}


def test_no_worker_and_frozen_workers_are_bounded(capfd) -> None:
    distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    with _cluster(distributed, n_workers=0) as empty:
        start = time.monotonic()
        with pytest.raises(InputError, match="no worker"):
            run_tasks(dies_on, [("a",)], ["a"], scheduler=empty.scheduler_address,
                      connect_timeout=1)
        assert time.monotonic() - start < 4
    try:
        with _cluster(distributed, n_workers=1, threads_per_worker=1) as cluster:
            start = time.monotonic()
            outcomes = run_tasks(wait_for, [("frozen",), ("frozen",)], ["p1", "p2"],
                                 scheduler=cluster.scheduler_address, idle_timeout=1)
            assert time.monotonic() - start < 5
            assert all("no Dask worker finished" in o.error for o in outcomes)
            _EVENTS["frozen"].set()
    finally:
        _EVENTS["frozen"].set()
    assert capfd.readouterr().err == ""



def pause(seconds: float) -> float:
    """A task that takes ``seconds``."""
    time.sleep(seconds)
    return seconds


def test_a_scheduler_lost_mid_run_fails_each_task_left_by_name(capfd) -> None:
    distributed = pytest.importorskip("distributed", reason="Dask's distributed scheduler")
    cluster = _cluster(distributed, n_workers=1, threads_per_worker=1)
    stopper = threading.Timer(0.5, cluster.close)
    stopper.start()
    try:
        start = time.monotonic()
        outcomes = run_tasks(pause, [(1.0,)] * 4, ["p1", "p2", "p3", "p4"],
                             scheduler=cluster.scheduler_address, idle_timeout=20)
        assert time.monotonic() - start < 10
    finally:
        stopper.join()
    assert [o.name for o in outcomes] == ["p1", "p2", "p3", "p4"]
    assert not outcomes[-1].ok and "Dask task failed" in outcomes[-1].error, outcomes
    assert capfd.readouterr().err == ""
