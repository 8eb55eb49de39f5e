"""The kernels in launch order, once per recording: what the steps' period, a generation loop's split and the host's
pauses before a new shape's kernels (``slow.paid_before``) all read."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .... import labels
from ... import name_rules
from . import generation, period


class LaunchOrder:
    """The kernels in launch order (the launch call's time where the host side was recorded, else the kernel's
    start): their name codes, names, times, durations and ends on the GPU, and which names are matrix work."""

    def __init__(self, codes, names, times, dur, gpu_end, is_matrix):
        self.codes, self.names, self.times, self.dur, self.gpu_end, self.is_matrix = \
            codes, names, times, dur, gpu_end, is_matrix

    @classmethod
    def of(cls, launches: pd.DataFrame, launch_start: np.ndarray) -> "LaunchOrder | None":
        if launches.empty or "name" not in launches:
            return None
        t = np.where(np.isnan(launch_start), launches["start_ns"].to_numpy(dtype="float64"), launch_start) \
            if len(launch_start) == len(launches) else launches["start_ns"].to_numpy(dtype="float64")
        ok = ~np.isnan(t)
        order = np.argsort(t[ok], kind="stable")
        name = labels.as_categorical(launches["name"])  # a million launches share a few hundred names: their codes
        names = [str(c) for c in name.cat.categories] + [""]
        codes = name.cat.codes.to_numpy().astype(np.int64)[ok][order]
        codes[codes < 0] = len(names) - 1
        times = t[ok][order]
        dur = launches["duration_ns"].to_numpy(dtype="float64")[ok][order] if "duration_ns" in launches \
            else np.zeros(len(codes))
        gpu_start = launches["start_ns"].to_numpy(dtype="float64")[ok][order] if "start_ns" in launches else times
        is_matrix = name_rules.is_matrix_work(pd.Series(names)).to_numpy()
        return cls(codes, names, times, np.nan_to_num(dur), np.nan_to_num(gpu_start + dur, nan=0.0), is_matrix)

    def trains(self, a: int, b: int) -> bool:
        """Whether launches ``a:b`` (a step's) step an optimizer or run a backward pass: no generation loop."""
        body = np.unique(self.codes[a:b])
        return bool(name_rules.name_mask(pd.Series([self.names[int(c)] for c in body], dtype=object),
                                         period.TRAINING_KERNEL).any())

    def split(self, at: np.ndarray, end: int, mode: str):
        return generation.split(self.codes, self.is_matrix, self.times, self.dur, self.gpu_end, at, end, mode)
