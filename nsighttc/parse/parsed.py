"""What every reader returns: ``Parsed``, one input's kernel table and, for timeline sources, its ``Timeline``.

In a module of its own so that the readers (``kineto``, ``nsys_sqlite``, ``nsys_rep``, ``timeline``) and the
package's ``load`` that dispatches to them do not import each other in a circle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .sniff import Kind


@dataclass
class Parsed:
    path: Path
    kind: Kind
    kernels: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    timeline: object | None = None  # a parse.timeline.Timeline for nsys/torch sources
