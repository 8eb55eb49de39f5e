"""Errors the user can act on.

Every failure the user can cause (a wrong file, a missing tool, a denied permission) is raised as an
``NsighttcError`` carrying the exit code the CLI returns and a one-line message; ``cli.main`` catches
them once and prints that line, so no traceback ever reaches a user for a problem in their input.
"""
from __future__ import annotations

from pathlib import Path


class NsighttcError(Exception):
    """Base class: ``str(err)`` is the one line shown to the user."""

    exit_code = 1

    def __init__(self, message: str, path: str | Path | None = None):
        self.path = None if path is None else str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


class InputError(NsighttcError):
    """The input file is missing, unreadable, of an unknown kind, or malformed (exit code 2)."""

    exit_code = 2


class ParseError(InputError):
    """The file is of a known kind but its content is broken (truncated, no kernel rows...)."""


class ReaderMissing(InputError):
    """The file is fine but reading it needs a tool or package that is not installed."""


class NeedsExport(ReaderMissing):
    """A profiler's binary report that the readers cannot open themselves: its tool must export it first (an
    ``.nsys-rep`` to SQLite with nsys, an ``.ncu-rep`` to a CSV with ncu when the ``ncu_report`` module is missing).
    The readers launch nothing: ``collect.readable`` runs the export and reads what it wrote. ``tool``: which."""

    def __init__(self, message: str, path: str | Path | None = None, tool: str = ""):
        super().__init__(message, path)
        self.tool = tool


class ToolNotFound(NsighttcError):
    """A profiler executable (ncu, nsys) could not be found where we looked (exit code 3)."""

    exit_code = 3


class CollectError(NsighttcError):
    """A profiler run failed (exit code 4); the message carries the profiler's own ``==ERROR==`` line."""

    exit_code = 4


class UsageError(NsighttcError):
    """Options that contradict each other or name nothing (exit code 2)."""

    exit_code = 2
