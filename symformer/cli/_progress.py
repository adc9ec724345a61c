"""The terminal's progress bar for long commands (tqdm on stderr), cleared when done.

Every command of :mod:`symformer.cli` that may run long shows one (:class:`Progress`); a notebook's
display of stages and derivations is :mod:`symformer.display`'s.
"""

from __future__ import annotations

import time

#: A progress bar's line once its number of steps is known.
_COUNTED = "{desc} [{n_fmt}/{total_fmt}] {bar:20}"


class Progress:
    """A progress bar on stderr for long runs (tqdm), cleared when done.

    Silent when stderr is not a terminal (piped, redirected) or when ``quiet``, so
    scripts and logs see only the result.  ``total`` steps (None: no bar); each
    :meth:`update` names the step now starting (the steps before it count as done).
    ``delay``: seconds before the bar shows (a run shorter than that shows none).
    """

    def __init__(self, title: str, total: int | None = None, quiet: bool = False,
                 stream=None, delay: float = 0.0) -> None:
        import sys

        from tqdm import tqdm

        self.stream = stream if stream is not None else sys.stderr
        self.active = not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
        self.title = title
        self.started = False
        self.delay = delay
        self.since = time.monotonic()
        self.bar = tqdm(total=total, desc=title, file=self.stream, leave=False,
                        disable=not self.active, dynamic_ncols=True,
                        bar_format=_COUNTED if total else "{desc}", delay=delay)

    def update(self, message: str) -> None:
        """Show ``message``, the step now starting; the one before it is done."""
        if self.active:
            self.bar.set_description_str(f"{self.title}: {message}", refresh=False)
            self.bar.update(1 if self.started else 0)
            if self._due():
                self.bar.refresh()
            self.started = True

    def note(self, message: str) -> None:
        """Show ``message`` about the step under way (no step is counted done)."""
        if self.active:
            self.bar.set_description_str(f"{self.title}: {message}", refresh=self._due())

    def _due(self) -> bool:
        """Has the run lasted its ``delay`` (the bar shows from then on)?"""
        return time.monotonic() - self.since >= self.delay

    def set_total(self, total: int) -> None:
        """The number of steps, once known."""
        if self.active and self.bar.total != total:
            self.bar.total = total
            self.bar.bar_format = _COUNTED

    def step(self, k: int, total: int, name: str) -> None:
        """``progress(k, total, name)``, the callback the long loops take: step ``k`` of
        ``total``, ``name``, starts."""
        self.set_total(total)
        self.update(name)

    def done(self) -> None:
        """Clear the bar."""
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()
