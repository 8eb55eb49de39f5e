"""Communication: how much of a rank's GPU time was spent waiting for the other ranks.

A data-parallel rank that finishes its backward pass early enters the all-reduce and its NCCL kernel
spins on the GPU until the slowest rank arrives: the GPU is "busy" with a kernel, yet does no work of its
own. So communication work (NCCL kernels and other collectives, ``name_rules.COMMUNICATION``, and
peer-to-peer copies) is kept apart from compute (every other kernel, copy, set and graph execution):

- ``compute_busy``: GPU busy with compute alone; the rank's verdict is judged on it when the rank
  communicates (a rank waiting 50% of its step in NCCL is not GPU-bound);
- ``exposed``: communication time not overlapped by compute on the same GPU: what the rank waited, or
  what overlap would have hidden. Computed per device as busy(compute ∪ comm) − busy(compute) over the
  scope, so every scope (steady steps, the window) costs two binary searches per interval.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...durations import duration
from .. import intervals
from ..name_rules import is_communication


def _launch_intervals(launches: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end and device of every kernel launch (timeline sources)."""
    if launches.empty or "start_ns" not in launches:
        z = np.array([])
        return z, z, z
    s = launches["start_ns"].to_numpy(dtype="float64")
    e = s + launches["duration_ns"].to_numpy(dtype="float64")
    return s, e, pd.to_numeric(launches["device"], errors="coerce").to_numpy(dtype="float64")


class Work:
    """Compute and communication unions, per device and over all devices."""

    def __init__(self, ops: pd.DataFrame, launches: pd.DataFrame):
        comm = is_communication(launches["name"]).to_numpy() if not launches.empty else np.array([], dtype=bool)
        peer_any = (not ops.empty) and bool(ops["copy_kind"].eq("PtoP").any())  # categorical: no strings built
        self.comm_launches = int(comm.sum())
        self.any = bool(self.comm_launches or peer_any)
        self._per_device: list = []
        if not self.any:  # one GPU, no collectives: nothing to split (a million-kernel trace pays one name scan)
            self.peer_copies, self.comm_kernel_ns, self.kernel_ns = 0, 0.0, 0.0
            return
        s, e, dev = _launch_intervals(launches)
        if len(s) != len(comm):  # launches without start times: no intervals to split
            comm = np.zeros(len(s), dtype=bool)
        self.comm_kernel_ns = float(np.nansum((e - s)[comm])) if comm.any() else 0.0
        self.kernel_ns = float(np.nansum(e - s)) if len(s) else 0.0
        other = ops[(ops["kind"].astype(str) != "kernel").to_numpy()] if not ops.empty else ops
        peer = other["copy_kind"].eq("PtoP").to_numpy(dtype=bool) if not other.empty else np.array([], dtype=bool)
        os_, oe = (other["start_ns"].to_numpy(dtype="float64"), other["end_ns"].to_numpy(dtype="float64")) \
            if not other.empty else (np.array([]), np.array([]))
        odev = pd.to_numeric(other["device"], errors="coerce").to_numpy(dtype="float64") if not other.empty else np.array([])
        self.peer_copies = int(peer.sum())
        cs = np.concatenate([s[~comm], os_[~peer]])
        ce = np.concatenate([e[~comm], oe[~peer]])
        cd = np.concatenate([dev[~comm], odev[~peer]])
        ms = np.concatenate([s[comm], os_[peer]])
        me = np.concatenate([e[comm], oe[peer]])
        md = np.concatenate([dev[comm], odev[peer]])
        self.compute = intervals.union(cs, ce)
        # (compute union, compute ∪ comm union) of each device that communicates
        key_c, key_m = np.nan_to_num(cd, nan=-1), np.nan_to_num(md, nan=-1)
        for d in np.unique(key_m):
            c_on = key_c == d
            m_on = key_m == d
            self._per_device.append((intervals.union(cs[c_on], ce[c_on]),
                                     intervals.union(np.concatenate([cs[c_on], ms[m_on]]),
                                                     np.concatenate([ce[c_on], me[m_on]]))))

    def exposed_within(self, a: np.ndarray, b: np.ndarray) -> float:
        """Communication time not overlapped by compute on its own device, summed over [a_i, b_i]."""
        tot = 0.0
        for comp, both in self._per_device:
            tot += float((intervals.busy_within(both, a, b) - intervals.busy_within(comp, a, b)).sum())
        return tot

    def exposed_each(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Communication time not overlapped by compute, per interval [a_i, b_i] (each step's wait)."""
        tot = np.zeros(len(a))
        for comp, both in self._per_device:
            tot += intervals.busy_within(both, a, b) - intervals.busy_within(comp, a, b)
        return tot

    def compute_within(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(intervals.busy_within(self.compute, a, b).sum())

    def scope(self, a: np.ndarray, b: np.ndarray, steps: int | None = None) -> dict:
        """The communication numbers of one scope (steady steps, or the window)."""
        wall = float(np.sum(b - a))
        exposed = self.exposed_within(a, b)
        compute = self.compute_within(a, b)
        out = {"wall_ns": wall, "compute_busy_ns": compute, "compute_busy_share": compute / wall if wall else 0.0,
               "exposed_comm_ns": exposed, "exposed_comm_share": exposed / wall if wall else 0.0}
        if steps:
            out["exposed_comm_per_step_ns"] = exposed / steps
        return out


def cause(exposed_ns: float, comm_launches: int) -> dict:
    """The waiting as one cause of the rank's compute-idle time, beside the host-side causes."""
    return {"kind": "communication", "name": "communication not overlapped by compute", "idle_ns": float(exposed_ns),
            "detail": f"the GPU spent {duration(exposed_ns)} in communication kernels or peer copies "
                      f"({comm_launches:,} communication kernel launches in the run) with no compute running "
                      "beside them: waiting for the other ranks to arrive, or transfers that overlap with compute "
                      "would hide"}
