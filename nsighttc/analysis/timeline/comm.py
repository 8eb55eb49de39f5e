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

``judge`` applies both to a rank's step families and window: verdicts on compute, exposed communication as a cause.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...durations import duration
from .. import intervals
from ..name_rules import is_communication
from . import idle
from .base import Thresholds, classify
from .extent import api_union


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
        self._compute_on: dict[float, intervals.Union] = {}
        for d in np.unique(key_m):
            c_on = key_c == d
            m_on = key_m == d
            self._compute_on[float(d)] = intervals.union(cs[c_on], ce[c_on])
            self._per_device.append((self._compute_on[float(d)],
                                     intervals.union(np.concatenate([cs[c_on], ms[m_on]]),
                                                     np.concatenate([ce[c_on], me[m_on]]))))
        # each communication kernel: its interval, device, collective (from its name)
        names = launches["name"].reset_index(drop=True)
        self._comm = pd.DataFrame({"start": s[comm], "end": e[comm], "device": np.nan_to_num(dev[comm], nan=-1),
                                   "collective": collective_of(names[comm]).to_numpy() if len(names) == len(comm)
                                   else np.array([], dtype=object), "row": np.nonzero(comm)[0]})

    def exposed_each(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Communication time not overlapped by compute on its own device, per interval [a_i, b_i] (each step's
        wait)."""
        tot = np.zeros(len(a))
        for comp, both in self._per_device:
            tot += intervals.busy_within(both, a, b) - intervals.busy_within(comp, a, b)
        return tot

    def exposed_within(self, a: np.ndarray, b: np.ndarray) -> float:
        """The same, summed over the intervals."""
        return float(self.exposed_each(a, b).sum())

    def collectives(self, launch_start: np.ndarray, scope: tuple[np.ndarray, np.ndarray], phases: dict,
                    steps: int) -> list[dict]:
        """Per collective (all-gather, reduce-scatter, all-reduce...) and phase (forward, backward, other: where the
        host launched it, from the hooks' marks ``phases``: {name: (starts, ends)}), the communication kernels'
        time in ``scope`` split into *exposed* (no compute on their GPU beside them) and *overlapped*, per step.
        FSDP's all-gathers of the forward and reduce-scatters of the backward each have their own fixes."""
        c = self._comm
        if c.empty:
            return []
        ls = launch_start[c["row"].to_numpy()] if len(launch_start) else np.full(len(c), np.nan)
        keep = intervals.inside(c["start"].to_numpy(), *scope)
        c, ls = c[keep], ls[keep]
        if c.empty:
            return []
        overlapped = np.zeros(len(c))
        for d, comp in self._compute_on.items():
            on = (c["device"] == d).to_numpy()
            if on.any():
                overlapped[on] = intervals.busy_within(comp, c["start"].to_numpy()[on], c["end"].to_numpy()[on])
        dur = (c["end"] - c["start"]).to_numpy()
        phase = np.full(len(c), "other" if phases else "unmarked", dtype=object)
        for name, (a, b) in phases.items():
            phase[intervals.inside(np.nan_to_num(ls, nan=-np.inf), a, b)] = name
        frame = pd.DataFrame({"collective": c["collective"].to_numpy(), "phase": phase, "time_ns": dur,
                              "overlapped_ns": np.minimum(overlapped, dur)})
        frame["exposed_ns"] = frame["time_ns"] - frame["overlapped_ns"]
        g = frame.groupby(["collective", "phase"], sort=False).agg(kernels=("time_ns", "size"), time_ns=("time_ns", "sum"),
                                                                  exposed_ns=("exposed_ns", "sum"),
                                                                  overlapped_ns=("overlapped_ns", "sum")).reset_index()
        n = max(int(steps), 1)
        return [{"collective": r.collective, "phase": r.phase, "kernels": int(r.kernels), "time_ns": float(r.time_ns),
                 "exposed_ns": float(r.exposed_ns), "overlapped_ns": float(r.overlapped_ns),
                 "exposed_per_step_ns": float(r.exposed_ns) / n}
                for r in g.sort_values("exposed_ns", ascending=False).itertuples(index=False)]

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


# NCCL's kernel names say the collective (``ncclDevKernel_AllGather_RING_LL``, ``ncclDevKernel_ReduceScatter_Sum_bf16_
# RING_LL``, ``ncclKernel_AllReduce_RING_LL_Sum_float``: NCCL 2.1x-2.28, the DDP fixtures of tests/fixtures/ddp);
# torch's symmetric-memory kernels too (``multimem_all_gather``, ``two_shot_all_reduce``).
COLLECTIVES = (("all-gather", r"all_?gather"), ("reduce-scatter", r"reduce_?scatter"), ("all-reduce", r"all_?reduce"),
               ("broadcast", r"broadcast"), ("all-to-all", r"all_?to_?all"), ("send-recv", r"send|recv"))


def collective_of(names: pd.Series) -> pd.Series:
    """Each communication kernel's collective, from its name (once per distinct name); "other" where it says none."""
    codes, uniq = pd.factorize(names.astype(str))
    out = []
    for u in uniq:
        low = u.lower()
        out.append(next((c for c, rx in COLLECTIVES if re.search(rx, low)), "other"))
    return pd.Series(np.asarray(out + ["other"], dtype=object)[np.where(codes < 0, len(uniq), codes)], index=names.index)


def cause(exposed_ns: float, comm_launches: int) -> dict:
    """The waiting as one cause of the rank's compute-idle time, beside the host-side causes."""
    return {"kind": "communication", "name": "communication not overlapped by compute", "idle_ns": float(exposed_ns),
            "detail": f"the GPU spent {duration(exposed_ns)} in communication kernels or peer copies "
                      f"({comm_launches:,} communication kernel launches in the run) with no compute running "
                      "beside them: waiting for the other ranks to arrive, or transfers that overlap with compute "
                      "would hide"}


def judge(work: Work, fams: list[dict], window_causes: list[dict], lo: float, hi: float,
                   n_kernels: int, th: Thresholds, api: pd.DataFrame) -> dict:
    """A rank that communicates is judged on its compute: each step family's verdict and causes, and the
    window's causes, gain the communication time no compute overlapped (``comm``); each family gains its launching
    threads' time inside CUDA calls per steady step (where a rank ahead of a straggler blocks: a sync, a full launch
    queue), which the ranks compare for the straggler's own excess (``analysis.ranks.own_excess``)."""
    def add_cause(causes: list[dict], exposed: float) -> list[dict]:
        if exposed <= 0:
            return causes
        return sorted(causes + [cause(exposed, work.comm_launches)], key=lambda c: -c["idle_ns"])

    in_api = api_union(api) if fams else None
    for f in fams:
        n_steady = f["count"] - f["warmup_steps"]
        f["steady_host_api_per_step_ns"] = float(intervals.busy_within(in_api, *f["_steady"]).sum()) / max(
            n_steady, 1) if in_api is not None else None
        sc = work.scope(*f["_steady"], steps=n_steady)
        f["compute_busy_share"] = sc["compute_busy_share"]
        f["exposed_comm_share"] = sc["exposed_comm_share"]
        f["exposed_comm_per_step_ns"] = sc["exposed_comm_per_step_ns"]
        # each steady step's wait: whether a rank's lag holds step by step (analysis.ranks)
        f["exposed_comm_ns_per_iteration"] = [float(x) for x in work.exposed_each(*f["_iterations"])]
        f["gpu_busy_verdict"] = f["verdict"]  # what the raw busy share (communication counted) said
        if f["verdict"] != "insufficient-data":
            f["verdict"] = classify(sc["compute_busy_share"], sc["wall_ns"], th.min_kernels, th)
        f["causes"] = add_cause(f["causes"], sc["exposed_comm_ns"])
        f["headline_cause"] = idle.headline(f["causes"], f["verdict"], f.get("host_frames"))
    window = work.scope(np.array([lo]), np.array([hi]))
    window_causes[:] = add_cause(window_causes, window["exposed_comm_ns"])
    dom = fams[0] if fams else None
    scope = work.scope(*dom["_steady"], steps=dom["count"] - dom["warmup_steps"]) if dom else window
    return {"basis": f"steady-state steps of `{dom['name']}`" if dom else "profiled window",
            "communication_launches": work.comm_launches, "peer_copies": work.peer_copies,
            "communication_kernel_ns": work.comm_kernel_ns,
            "communication_kernel_share": work.comm_kernel_ns / work.kernel_ns if work.kernel_ns else 0.0,
            **scope, "window": window}
