"""Progress of a profile run that suits the place it is read.

- On a terminal: one live line (rich's status spinner) carries what changes fast (kernels profiled of those
  needed, elapsed time); the pass' start and end lines stay above it.
- In a log (stderr is not a TTY: CI): the start and end lines, and at most one progress line per pass every
  ``INTERVAL`` seconds; a multi-phase program's first run printed hundreds of ``profiled N kernel(s)`` lines.
- ``-q``: nothing; ``-v``: every line, the profilers' command lines and the workload's own output.

What counts as fast-changing progress is told by the line itself (``PROGRESS``): the runs say it as before.
"""
from __future__ import annotations

import re
import sys
import time
from typing import Callable

INTERVAL = 10.0
# "[2/2 ncu] profiled 12 kernel(s); ...", "[2/2 ncu] replay: profiled 3 kernel(s) ...", "[ncu] profiled 11 kernels ..."
# "[ranks] analysed 12/256, 1 failed" (analyze's per-rank map)
PROGRESS = re.compile(r"^(\[[^\]]+\] (?:replay: )?)(?:profiled|analysed) ")  # group 1: the pass (the replay: its own)
COMMAND = re.compile(r"^\[[^\]]+\] running: ")   # the profilers' command lines (run.json and the report keep them)
WORKLOAD = "  | "                                 # the program's own output


class Progress:
    """A ``say`` callback for the profile and try runs. ``close`` ends the live line."""

    def __init__(self, level: int = 1, tty: bool | None = None, echo: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, interval: float = INTERVAL):
        self.level = level
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.echo = echo or (lambda s: print(s, file=sys.stderr, flush=True))
        self.clock, self.interval = clock, interval
        self._last: dict[str, float] = {}
        self._status = None

    def __call__(self, line: str) -> None:
        if self.level <= 0:
            return
        verbose = self.level >= 2
        if line.startswith(WORKLOAD) or COMMAND.match(line):
            if verbose:
                self._print(line)
            return
        m = PROGRESS.match(line)
        if m and not verbose:
            if self.tty:
                self._live(line)
                return
            key = m.group(1)
            now = self.clock()
            if now - self._last.get(key, -1e18) < self.interval:
                return
            self._last[key] = now
        self._print(line)

    def _print(self, line: str) -> None:
        if self._status is not None:
            self._status.console.print(line, markup=False, highlight=False, soft_wrap=True)
            return
        self.echo(line)

    def _live(self, line: str) -> None:
        try:
            if self._status is None:
                from rich.console import Console
                self._status = Console(stderr=True).status(line)
                self._status.start()
            else:
                self._status.update(line)
        except Exception:  # no live display here: a plain line
            self._status = None
            self.echo(line)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
