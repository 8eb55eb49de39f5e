"""The default run's Nsight Compute pass: which kernels it must measure, how ncu is told, when to stop.

After the timeline pass, the kernels whose Tensor Core answer is not settled by hardware are those doing
matrix work (GEMM/conv/attention, whatever their name claims) and those the name rules cannot judge
(state "unknown"). Of these, the ones the evidence cache does not know are measured: ncu profiles only
kernels whose name contains one of their tokens (``--kernel-name-base demangled``, a regex *search*:
verified with ncu 2025.3.1 on H100, ``regex:gemm`` matched ``nvjet_...`` and ``sm80_xmma_..._gemm_...``,
``regex:^gemm$`` matched nothing; benchmarks/probes/gpu_ncu_stop_probe.py), each launch configuration once, and
the program is interrupted (SIGINT to the launcher's pid: ncu still writes a complete report, same probe)
as soon as every missing kernel was profiled once, so the rest of the program never runs under ncu.

ncu's ``==PROF== Profiling "NAME"`` lines print the function's base name (``nvjet_sm90_hsh_...``,
``distribution_elementwise_grid_stride_kernel``; without a name filter sometimes cut to ``name...``), or, with
``--kernel-name-base demangled`` (the pass filtered to the missing kernels), ncu's own demangling
(``void at::native::<unnamed>::krn_partials_per_segment<long>(T1 *, ...)``, not the timeline's spelling):
``StopWhenCovered`` matches the printed name, else its kernel token and leaf. (Matching the printed name only
kept a Trainer's filtered pass from ever counting a kernel: 19 profiled, "0/18 needed", the program never
stopped by the rule and the report said they were not seen: H100, reports/window/call3.)

Communication kernels (NCCL) are never sent to ncu: replaying one rank's collective under ncu stalls the
other ranks, and they are not Tensor Core work.
"""
from __future__ import annotations

import re
import threading
import time
from typing import Callable

import pandas as pd

from ..analysis import name_rules
from ..analysis.tensor_cores import EVIDENCE_HARDWARE, tc_states
from ..render.names import _WRAPPERS, name_parts

_IDENT = re.compile(r"[A-Za-z_]\w*")


def needs_hardware(launches: pd.DataFrame) -> pd.DataFrame:
    """Distinct (name, grid, block) of classified launches that lack hardware evidence and need it:
    matrix work, or a Tensor Core state the names cannot settle. Ordered by GPU time, largest first."""
    cols = ["name", "grid", "block", "time_ns", "launches"]
    if launches.empty:
        return pd.DataFrame(columns=cols)
    state = tc_states(launches).astype(str).to_numpy()
    need = (launches["evidence"] != EVIDENCE_HARDWARE).to_numpy() & \
        (launches["matrix_work"].astype(bool).to_numpy() | (state == "unknown"))
    d = launches.loc[need, ["name", "grid", "block", "duration_ns"]]
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d.assign(name=d["name"].astype(str), grid=d["grid"].astype(str), block=d["block"].astype(str))
    d = d[~name_rules.is_communication(d["name"]).to_numpy()]
    # A settled no-matrix family is left out of ncu's filter: never wait for it (cuDNN's
    # init_device_workspace_kernel<...implicit_gemm...> looks like matrix work by its template arguments and
    # kept a ResNet-50 AMP program pass running to the end waiting for it: H100, reports/profile_overhead).
    # Matched on the function's own name, as ncu's filter (default --kernel-name-base function) is: a CUTLASS
    # GEMM with `epilogue` in its template arguments still needs evidence.
    codes, uniques = pd.factorize(d["name"])
    settled = name_rules.name_mask(pd.Series([leaf_name(u) for u in uniques], dtype=object),
                                   "|".join(name_rules.NO_MATRIX_FAMILIES)).to_numpy()
    d = d[~settled[codes]]
    g = d.groupby(["name", "grid", "block"], sort=False, dropna=False).agg(time_ns=("duration_ns", "sum"),
                                                             launches=("duration_ns", "size")).reset_index()
    return g.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def first_launch_order(launches: pd.DataFrame) -> dict[str, int]:
    """Kernel leaf name (as ncu prints it) -> rank of its first launch in the timeline run (0 = first), among
    the kernels ncu's filter lets through (the settled no-matrix families never show up under ncu).
    The program launches its kernels in about the same order under ncu; ``StopWhenCovered`` uses it to
    tell a kernel that has not come *yet* from one this run will not launch."""
    if launches.empty or "start_ns" not in launches or launches["start_ns"].isna().all():
        return {}
    names = launches["name"].astype(str)
    ncu_sees = ~name_rules.name_mask(names, "|".join(name_rules.NO_MATRIX_FAMILIES)).to_numpy()
    first = launches[ncu_sees].groupby(names[ncu_sees].to_numpy())["start_ns"].min().dropna()
    by_leaf: dict[str, float] = {}
    for name, t in first.items():
        leaf = leaf_name(name)
        by_leaf[leaf] = min(t, by_leaf.get(leaf, t))
    return {leaf: i for i, leaf in enumerate(sorted(by_leaf, key=by_leaf.get))}


def leaf_name(name: str) -> str:
    """The function's own name, as ncu prints it: no return type, namespaces, templates or parameters
    (``void at::native::vectorized_elementwise_kernel<4, ...>(...)`` -> ``vectorized_elementwise_kernel``)."""
    return name_parts(name)[3]


def ncu_token(name: str) -> str:
    """The distinctive identifier of a kernel name for ncu's demangled-name filter: the leaf, or for
    wrapper templates (``cutlass::Kernel2<cutlass_80_tensorop_...>``) the kernel inside."""
    _, _, first, leaf = name_parts(name)
    if leaf in _WRAPPERS:
        m = _IDENT.search(first.split("::")[-1] if first else "")
        if m and len(m.group(0)) >= 8:
            return m.group(0)
    return leaf


def kernel_regex(names: list[str]) -> str:
    """ncu ``--kernel-name`` value (with ``--kernel-name-base demangled``) matching the kernels named,
    by whole identifiers (ECMAScript: look-ahead only, so the left edge is a character class)."""
    tokens = sorted({t for t in (ncu_token(n) for n in names) if t})
    return "regex:(?:^|[^A-Za-z0-9_])(?:" + "|".join(re.escape(t) for t in tokens) + ")(?![A-Za-z0-9_])"


class StopWhenCovered:
    """Counts ncu's ``==PROF== Profiling`` lines against the kernels to measure and calls ``stop`` once
    each was profiled at least once. Thread-safe (ncu's output is read on a pump thread)."""

    PROF = re.compile(r'==PROF== Profiling "([^"]+)"')

    # A kernel still missing once the ncu run has profiled kernels whose first launch in the timeline run
    # came PASSED_BY or more places after its own was launched under other choices in this run (cuBLAS
    # heuristics picked another GEMM: ResNet-50 AMP on H100, two cutlass kernels of the timeline run never
    # came under ncu and kept the program running to its end, 34.6 s, in reports/profile_overhead).
    PASSED_BY = 3
    PASSED_MIN_SHARE = 0.8

    def __init__(self, names: list[str], stop: Callable[[], None], weights: dict[str, float] | None = None,
                 order: dict[str, int] | None = None):
        self._todo: dict[str, set[str]] = {}
        for n in dict.fromkeys(names):
            for key in {leaf_name(n), ncu_token(n)}:
                self._todo.setdefault(key, set()).add(n)
        self.remaining = set(dict.fromkeys(names))
        self.total = len(self.remaining)
        self.profiled = 0
        self._stop = stop
        self._lock = threading.Lock()
        self.stopped = False
        self.reason = ""
        self._weights = {n: float((weights or {}).get(n, 1.0)) for n in self.remaining}
        self.started = time.monotonic()
        self.first_cover: float | None = None
        self.last_cover: float | None = None
        self._order = order or {}
        self.frontier = -1  # latest first-launch rank (timeline run) of any kernel ncu has profiled

    def _names_for(self, printed: str) -> set[str]:
        if printed in self._todo:
            return self._todo[printed]
        if printed.endswith("..."):  # ncu cut the name
            stem = printed[:-3]
            return {n for k, ns in self._todo.items() if k.startswith(stem) for n in ns}
        for key in (ncu_token(printed), leaf_name(printed)):  # a demangled name (--kernel-name-base demangled)
            if key in self._todo:
                return self._todo[key]
        return set()

    def _rank(self, printed: str) -> int:
        """The first-launch rank (timeline run) of the kernel ncu printed, by its name as printed or its leaf."""
        r = self._order.get(printed)
        return r if r is not None else self._order.get(leaf_name(printed), -1)

    def on_line(self, line: str) -> bool:
        """Feed one output line; True when it was a profiling line."""
        m = self.PROF.search(line)
        if not m:
            return False
        with self._lock:
            self.profiled += 1
            printed = m.group(1)
            self.frontier = max(self.frontier, self._rank(printed))
            hit = self._names_for(printed) & self.remaining
            if hit:
                self.remaining.discard(sorted(hit)[0])  # one profiled launch covers one kernel of that name
                self.last_cover = time.monotonic()
                self.first_cover = self.first_cover or self.last_cover
            if not self.stopped:
                if not self.remaining:
                    self.stopped, self.reason = True, "covered"
                elif self._passed():
                    self.stopped, self.reason = True, "passed"
                if self.stopped:
                    self._stop()
        return True

    def _passed(self) -> bool:
        """Every kernel still missing was first launched, in the timeline run, well before kernels ncu has
        already profiled, and most of the needed time is measured: the run went past them."""
        if self.covered_share < self.PASSED_MIN_SHARE or not self._order:
            return False
        ranks = [self._order.get(leaf_name(n)) for n in self.remaining]
        return all(r is not None and r + self.PASSED_BY <= self.frontier for r in ranks)

    @property
    def covered_share(self) -> float:
        """Share of the timeline's GPU time of the needed kernels that is now measured."""
        total = sum(self._weights.values())
        return 1.0 - sum(self._weights[n] for n in self.remaining) / total if total else 1.0

    def check_idle(self, now: float | None = None, min_share: float = 0.95, min_idle_s: float = 15.0) -> bool:
        """Diminishing returns: most of the needed time measured, and nothing new for a while (a kernel seen
        only in the timeline run, e.g. another cuBLAS heuristic choice, would otherwise keep the whole program
        running under ncu). The wait grows with how long the first kernel took to appear."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self.stopped or self.last_cover is None or self.covered_share < min_share:
                return False
            idle = max(min_idle_s, 3 * (self.first_cover - self.started))
            if now - self.last_cover < idle:
                return False
            self.stopped, self.reason = True, "idle"
        self._stop()
        return True

    @property
    def covered(self) -> int:
        return self.total - len(self.remaining)
