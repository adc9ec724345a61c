"""Many independent tasks at once: local processes, or an existing Dask cluster.

A sweep (the user's model over a file of prompts) is a list of tasks that share
nothing.  :func:`run_tasks` runs them

* serially in this process (``jobs=1``, the default),
* on ``jobs`` local processes (:class:`concurrent.futures.ProcessPoolExecutor`), or
* on a running Dask distributed scheduler (``scheduler="tcp://host:8786"``; the
  optional ``distributed`` package), one Dask task a prompt,

and returns one :class:`Outcome` per task **in the tasks' order**, whatever order they
finished in, so that the results are identical to the serial run's.  A task that
fails is reported by its name with its one-line reason; the others are kept.  No
scheduling of our own: the pool or Dask decides where each task runs.

Exact arithmetic keeps process-wide state (FLINT's working precision, the engine's
caches), so a process runs one task at a time: a Dask worker with several threads
runs our tasks one after another (a lock held for the whole task), never two at once.

Bounded: a local process that dies (killed, out of memory) costs only the task it ran
(the others are run again, at last each in a process of its own); a scheduler must
answer within ``connect_timeout`` seconds, have a worker within it, and some task must
finish every ``idle_timeout`` seconds, else the tasks left are named as not run.
Only ``tcp://`` addresses are taken.  Dask's own log lines and tracebacks are not
printed (its loggers are silenced once a scheduler is used).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from symformer.errors import InputError, NotSupportedError, SymformerError

#: The most local processes ``--jobs`` starts.
MAX_JOBS = 256
#: Seconds a Dask scheduler has to answer and to have a worker; seconds within which
#: some task must finish (the longest task's estimated time, when the caller knows it).
CONNECT_TIMEOUT = 30.0
IDLE_TIMEOUT = 600.0
#: One task at a time in a process (FLINT's precision is process-global).
_TASK_LOCK = threading.Lock()
#: Dask's loggers (and the event loops' it runs on): silenced once a scheduler is used.
_DASK_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


@dataclass(frozen=True)
class Outcome:
    """One task's result, or the one-line reason it failed (``value`` then None)."""

    name: str
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the task ran to its result."""
        return self.error is None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SymformerError):
        return str(exc)
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


def _guarded(fn: Callable[..., Any], args: tuple) -> tuple[bool, Any]:
    """``fn(*args)`` as (True, result) or (False, its one-line reason): what a worker
    returns, so that a task's failure travels as data, never as a lost worker.  One
    task at a time in a process, whatever threads the worker runs tasks on."""
    with _TASK_LOCK:
        try:
            return True, fn(*args)
        except (MemoryError, RecursionError) as exc:
            return False, f"too large for this machine ({type(exc).__name__})"
        except Exception as exc:  # noqa: BLE001 -- the task's reason, named by the caller
            return False, _reason(exc)


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple], names: Sequence[str], *,
              jobs: int = 1, scheduler: str | None = None,
              progress: Callable[[int, int, str], None] | None = None,
              connect_timeout: float = CONNECT_TIMEOUT,
              idle_timeout: float = IDLE_TIMEOUT) -> list[Outcome]:
    """``fn(*task)`` for every task, as :class:`Outcome` s in the tasks' order.

    ``fn`` must be a module-level function (it is sent to other processes by name);
    ``progress(k, total, name)`` is called as each task finishes.  A scheduler that
    does not answer, or has no worker, within ``connect_timeout`` seconds is an error;
    on a scheduler, the tasks left when none has finished for ``idle_timeout`` seconds
    are named as not run (give the longest task's expected time, with room)."""
    if len(names) != len(tasks):
        raise ValueError("one name a task")
    if not 1 <= jobs <= MAX_JOBS:
        raise InputError(f"--jobs {jobs}: give 1 to {MAX_JOBS} local processes")
    results: list[tuple[bool, Any] | None] = [None] * len(tasks)
    count = [0]

    def finished(k: int, result: tuple[bool, Any]) -> None:
        results[k] = result
        count[0] += 1
        if progress is not None:
            progress(count[0], len(tasks), names[k])

    if scheduler is not None:
        _on_dask(fn, tasks, scheduler, finished, connect_timeout, idle_timeout)
    elif jobs == 1 or len(tasks) <= 1:
        for k, task in enumerate(tasks):
            finished(k, _guarded(fn, task))
    else:
        _on_processes(fn, tasks, jobs, finished)
    return [Outcome(name, value=r[1]) if r[0] else Outcome(name, error=r[1])
            for name, r in zip(names, results)]


def _on_processes(fn: Callable[..., Any], tasks: Sequence[tuple], jobs: int,
                  finished: Callable[[int, tuple[bool, Any]], None]) -> None:
    """The tasks on ``jobs`` local processes.  A process that dies breaks the pool and
    every task it had not finished: those run again on a new pool, and after a second
    break each in a process of its own, so that only a task whose own process dies is
    failed ("its process ended")."""
    pending = list(range(len(tasks)))
    for _ in range(2):
        if pending:
            pending = _pool_round(fn, tasks, pending, min(jobs, len(pending)), finished,
                                  last=False)
    for k in pending:  # isolated: one process a task
        _pool_round(fn, tasks, [k], 1, finished, last=True)


def _pool_round(fn: Callable[..., Any], tasks: Sequence[tuple], indices: list[int],
                workers: int, finished: Callable[[int, tuple[bool, Any]], None], *,
                last: bool) -> list[int]:
    """The tasks ``indices`` on a new pool of ``workers`` processes; the indices left
    unfinished when the pool broke (``last``: failed as "its process ended")."""
    import concurrent.futures as cf
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")  # no state inherited by fork
    left: list[int] = []
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_guarded, fn, tasks[k]): k for k in indices}
        for future in cf.as_completed(futures):
            k = futures[future]
            try:
                finished(k, future.result())
            except BrokenProcessPool as exc:  # a process died (killed, out of memory)
                if last:
                    finished(k, (False, f"its process ended ({_reason(exc)})"))
                else:
                    left.append(k)
            except Exception as exc:  # noqa: BLE001 -- the result could not come back
                finished(k, (False, f"its process failed ({_reason(exc)})"))
    return sorted(left)


def _address(scheduler: str) -> str:
    """``scheduler`` if it is a TCP address (``tcp://host:port`` or ``host:port``), else
    a one-line refusal (``tls://`` needs certificates symformer does not take, ``ucx://``
    and ``inproc://`` are not a scheduler another process reaches here)."""
    text = scheduler.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    host, colon, port = rest.rpartition(":")
    if scheme.lower() != "tcp" or not colon or not host or not port.isascii() \
            or not port.isdigit() or not 0 < int(port) < 65536 or len(text) > 300 \
            or not text.isprintable():
        shown = "".join(c if c.isprintable() else "?" for c in text[:80])
        raise InputError(f"--scheduler {shown}: give a Dask scheduler's TCP address, "
                         f"tcp://HOST:PORT (tls://, ucx:// and other protocols are not "
                         f"supported)")
    return f"tcp://{rest}"


def _silence_dask() -> None:
    """Dask's loggers (and those of the event loop it runs on) print nothing: a lost
    scheduler or worker is reported by the task it failed, in one line."""
    import distributed  # noqa: F401 -- its logging configured first, then silenced

    names = [name for name in list(logging.root.manager.loggerDict)
             if name.split(".")[0] in _DASK_LOGGERS]
    for name in {*names, *_DASK_LOGGERS}:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False
        for handler in logger.handlers:  # a child's records reach them whatever its level
            handler.setLevel(logging.CRITICAL + 1)


def _connect(address: str, timeout: float) -> Any:
    """A Dask client of the scheduler at ``address`` with a worker, within ``timeout``
    seconds for each (a port that accepts and never answers included), else a one-line
    refusal.  The connection is made on a daemon thread, abandoned if it hangs."""
    from distributed import Client

    box: dict[str, Any] = {}
    answered = threading.Event()

    def connect() -> None:
        try:
            client = Client(address, timeout=timeout)
            box["client"] = client
            answered.set()
            client.wait_for_workers(1, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 -- reported below, in one line
            box["error"] = exc
        answered.set()

    thread = threading.Thread(target=connect, name="symformer-dask-connect", daemon=True)
    thread.start()
    if answered.wait(timeout + 1):  # the answer, then a worker
        thread.join(timeout + 1)
    client = box.get("client")
    if "error" in box or thread.is_alive():
        if client is not None:  # it answered: no worker joined
            _close(client)
            raise InputError(f"--scheduler {address}: the scheduler has no worker (none "
                             f"joined within {timeout:g} s)") from None
        why = (_reason(box["error"]) if "error" in box
               else f"no answer within {timeout:g} s")
        raise InputError(f"--scheduler {address}: no Dask scheduler answers there ({why})")
    return client


def _on_dask(fn: Callable[..., Any], tasks: Sequence[tuple], scheduler: str,
             finished: Callable[[int, tuple[bool, Any]], None], connect_timeout: float,
             idle_timeout: float) -> None:
    """The tasks on the Dask scheduler at ``scheduler``, one Dask task each."""
    address = _address(scheduler)
    try:
        import distributed
    except ImportError:
        raise NotSupportedError("--scheduler needs Dask's distributed scheduler: pip "
                                "install 'symformer[distributed]'") from None
    _silence_dask()
    client = _connect(address, connect_timeout)
    try:
        futures = [client.submit(_guarded, fn, task, key=f"symformer-{k}", pure=False)
                   for k, task in enumerate(tasks)]
        index = {f.key: k for k, f in enumerate(futures)}
        pending = set(futures)
        while pending:
            try:
                done, pending = distributed.wait(pending, timeout=idle_timeout,
                                                 return_when="FIRST_COMPLETED")
            except TimeoutError:
                _give_up(pending, index, finished, f"no Dask worker finished a task for "
                         f"{idle_timeout:g} s (workers busy, frozen or gone); not run")
                return
            except Exception as exc:  # noqa: BLE001 -- the scheduler lost: every task left
                _give_up(pending, index, finished, f"its Dask task failed (the scheduler "
                         f"was lost: {type(exc).__name__})")
                return
            for future in sorted(done, key=lambda f: index[f.key]):
                try:
                    finished(index[future.key], future.result(timeout=idle_timeout))
                except Exception as exc:  # noqa: BLE001 -- a worker lost, a task cancelled
                    finished(index[future.key],
                             (False, f"its Dask task failed ({_reason(exc)})"))
    finally:
        _close(client)


def _give_up(pending: set, index: dict, finished: Callable[[int, tuple[bool, Any]], None],
             reason: str) -> None:
    """Every task left failed with ``reason``, in the tasks' order (cancelled on the
    scheduler, if it is still there)."""
    for future in sorted(pending, key=lambda f: index[f.key]):
        try:
            future.cancel()
        except Exception:  # noqa: BLE001,S110 -- a lost scheduler: nothing to cancel
            pass
        finished(index[future.key], (False, reason))


def _close(client: Any) -> None:
    """Close the client without waiting long on a scheduler that went away."""
    try:
        client.close(timeout=5)
    except Exception:  # noqa: BLE001,S110 -- the results are in; a lost scheduler is fine
        pass
