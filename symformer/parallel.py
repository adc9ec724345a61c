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
scheduling of our own: the pool or Dask decides where each task runs.  Exact
arithmetic keeps process-wide state (FLINT's working precision), so tasks never share
a process's threads: Dask workers must run one thread each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from symformer.errors import InputError, NotSupportedError, SymformerError

#: The most local processes ``--jobs`` starts.
MAX_JOBS = 256


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
    returns, so that a task's failure travels as data, never as a lost worker."""
    try:
        return True, fn(*args)
    except (SymformerError, ValueError, ArithmeticError, OSError, RuntimeError) as exc:
        return False, _reason(exc)


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple], names: Sequence[str], *,
              jobs: int = 1, scheduler: str | None = None,
              progress: Callable[[int, int, str], None] | None = None,
              connect_timeout: float = 30) -> list[Outcome]:
    """``fn(*task)`` for every task, as :class:`Outcome` s in the tasks' order.

    ``fn`` must be a module-level function (it is sent to other processes by name);
    ``progress(k, total, name)`` is called as each task finishes; a scheduler that does
    not answer within ``connect_timeout`` seconds is an error."""
    if len(names) != len(tasks):
        raise ValueError("one name a task")
    if not 1 <= jobs <= MAX_JOBS:
        raise InputError(f"--jobs {jobs}: give 1 to {MAX_JOBS} local processes")
    results: list[tuple[bool, Any] | None] = [None] * len(tasks)

    def finished(k: int, result: tuple[bool, Any], done: int) -> None:
        results[k] = result
        if progress is not None:
            progress(done, len(tasks), names[k])

    if scheduler is not None:
        _on_dask(fn, tasks, names, scheduler, finished, connect_timeout)
    elif jobs == 1 or len(tasks) <= 1:
        for k, task in enumerate(tasks):
            finished(k, _guarded(fn, task), k + 1)
    else:
        import concurrent.futures as cf
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # no state inherited by fork
        with cf.ProcessPoolExecutor(max_workers=min(jobs, len(tasks)),
                                    mp_context=context) as pool:
            futures = {pool.submit(_guarded, fn, task): k for k, task in enumerate(tasks)}
            for done, future in enumerate(cf.as_completed(futures), 1):
                k = futures[future]
                try:
                    finished(k, future.result(), done)
                except Exception as exc:  # the worker itself died (killed, out of memory)
                    finished(k, (False, f"its process ended ({_reason(exc)})"), done)
    return [Outcome(name, value=r[1]) if r[0] else Outcome(name, error=r[1])
            for name, r in zip(names, results)]


def _on_dask(fn: Callable[..., Any], tasks: Sequence[tuple], names: Sequence[str],
             scheduler: str, finished: Callable[[int, tuple[bool, Any], int], None],
             connect_timeout: float) -> None:
    """The tasks on the Dask scheduler at ``scheduler``, one Dask task each."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise NotSupportedError("--scheduler needs Dask's distributed scheduler: pip "
                                "install 'symformer[distributed]'") from None
    try:
        client = Client(scheduler, timeout=connect_timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {scheduler}: no Dask scheduler answers there "
                         f"({_reason(exc)})") from None
    try:
        futures = [client.submit(_guarded, fn, task, key=f"symformer-{k}-{name}"[:200],
                                 pure=False) for k, (task, name) in
                   enumerate(zip(tasks, names))]
        index = {f.key: k for k, f in enumerate(futures)}
        for done, future in enumerate(as_completed(futures), 1):
            k = index[future.key]
            try:
                finished(k, future.result(), done)
            except Exception as exc:  # a worker lost, a task cancelled
                finished(k, (False, f"its Dask task failed ({_reason(exc)})"), done)
    finally:
        client.close()
