"""The lines nsighttc's code inside the user's process prints for the profile run to read (``nsighttc.launch: wrote
...``, the window's events, ``nsighttc.replay: ...``).

Why one write per line: ``print(text, file=sys.stderr)`` writes the text and its newline apart (two ``write(2, ...)``
calls, seen with strace), and the ranks of a torchrun job share one stderr: one rank's line was seen glued to the
next rank's (``...trace written in 0.00 s)nsighttc.launch: wrote .../rank0/torch_trace.json``), so the profile run
missed rank 0's "trace written" line (this repository's CPU machine, torch 2.13, two gloo ranks). Standard library only:
this runs inside the user's program.
"""
from __future__ import annotations

import sys


def say(text: str) -> None:
    """Write ``text`` and its newline to stderr in one write, flushed."""
    try:
        sys.stderr.write(f"{text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # a closed or missing stderr: the program goes on
        pass
