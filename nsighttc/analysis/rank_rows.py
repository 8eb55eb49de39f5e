"""One rank's row of the job's rank table, from its own verdict: its step, its own time (the step less the
communication it waited in), its causes per step, its communication and Tensor Core shares, and the private columns
the reduce compares (``analysis.ranks``); a rank that could not be analysed gets a row that says why."""
from __future__ import annotations

from .timeline.idle import frame_words

COMPUTE = "gpu-compute"      # the rank's own GPU compute time per step, compared like a cause


def rank_row(rank: int, v) -> dict:
    """One line of the rank table from a rank's verdict."""
    tl = v.timeline or {}
    comm = tl.get("communication") or {}
    steps = tl.get("steps") or {}
    fams = tl.get("step_families") or []
    dom = next((f for f in fams if f.get("name") == steps.get("name")), fams[0] if fams else {})
    gpu_busy = dom.get("steady_gpu_busy_share", tl.get("window", {}).get("gpu_busy_share")) if tl else None
    compute = comm.get("compute_busy_share", gpu_busy) if tl else None
    med = steps.get("median_iteration_ns") or None
    per_step_wait = comm.get("exposed_comm_per_step_ns", 0.0) if med else None
    no_work = (tl.get("verdict") == "no-gpu-work") if tl else not v.tensor_cores.get("kernel_time_ns")
    warm = int(dom.get("warmup_steps", 0)) if dom else 0
    # GPU work recorded, but none in the steps compared (a rank whose recording of the window lost its GPU
    # records, beside warm-up steps that kept theirs)
    idle_window = not no_work and dom and dom.get("steady_wall_ns") and dom.get("steady_gpu_busy_share") == 0
    reason = short = why = None
    if no_work:
        short, why = "no GPU work recorded", "the recording stopped before the rank's GPU work was recorded, or the " \
                                             "rank ran none"
        reason = ("its recording holds no GPU work (" + ", ".join(str(i["path"]) for i in v.inputs) + "): " + why)
    elif idle_window:
        short, why = "no GPU work recorded in its window", "the profiler lost the window's GPU records, or the " \
                                                           "rank's GPU work lies elsewhere"
        reason = (f"its recording holds no GPU work in its {max(int(dom.get('count', 0)) - warm, 0)} steady steps ("
                  + ", ".join(str(i["path"]) for i in v.inputs) + "): " + why)
    n_steady = max(int(dom.get("count", 0)) - warm, 1) if dom else 1
    per_step = {}
    if dom:
        for c in dom.get("causes") or []:
            if c["kind"] != "communication":
                key = (c["kind"], c["name"])
                per_step[key] = per_step.get(key, 0.0) + c["idle_ns"] / n_steady
        if comm or dom.get("compute_busy_share") is not None:
            share = dom.get("compute_busy_share", dom.get("steady_gpu_busy_share", 0.0))
            per_step[(COMPUTE, "GPU compute")] = share * dom.get("steady_wall_ns", 0.0) / n_steady
    return {
        "rank": rank if rank >= 0 else None,
        "inputs": [str(i["path"]) for i in v.inputs],
        "tc_time_share": v.tensor_cores.get("tc_time_share"), "tc_verdict": v.tensor_cores.get("verdict"),
        "gpu_busy_share": gpu_busy, "compute_busy_share": compute,
        "median_step_ns": med, "own_step_ns": (med - per_step_wait) if med else None,
        "exposed_comm_share": comm.get("exposed_comm_share", 0.0) if tl else None,
        "exposed_comm_per_step_ns": per_step_wait,
        "communication_kernel_ns": comm.get("communication_kernel_ns", 0.0),
        # every rank's overlap, not only the rank whose timeline the report shows: the share of its
        # communication kernels' time that had compute beside it
        "comm_overlapped_share": _overlapped(comm) if tl else None,
        # Tensor Core share of the compute kernels' time: a waiting rank's long NCCL kernels must not make its
        # share look smaller than an identical rank's (H200 x2 straggler run: 10% vs 30% of all kernel time)
        "tc_compute_share": _tc_compute_share(v.tensor_cores, comm.get("communication_kernel_ns", 0.0)),
        "kernel_time_ns": v.tensor_cores.get("kernel_time_ns", 0.0),
        "verdict": tl.get("verdict") if tl else None, "headline_cause": tl.get("headline_cause") if tl else None,
        "step_family": steps.get("name"), "_iterations": list(dom.get("iteration_ns", []))[warm:] if dom else [],
        "_warmup": warm, "_all_iterations": list(dom.get("iteration_ns", [])) if dom else [],
        "_per_step": per_step,
        "_host_api_per_step": dom.get("steady_host_api_per_step_ns") if dom else None,
        "complete": reason is None,
        "incomplete_reason": reason, "_incomplete_short": short, "_incomplete_why": why,
        "_steady_steps": max(int(dom.get("count", 0)) - warm, 0) if dom else 0,
        "_own_iterations": _own_iterations(dom, warm),
        "_collectives": list(comm.get("collectives") or []) if tl else [],
        "host": (tl.get("host_frames") or {}).get("host") or None if tl else None,
        # the compute kernels it ran (names), and where its host was while its GPU idled (host_frames), per step
        "_compute_kernels": _compute_kernel_names(v),
        "_work": work_per_step(v, dom, n_steady),
        "_frames_per_step": {frame_words(f): f["idle_ns"] / n_steady for f in dom.get("host_frames") or []}
        if dom else {},
    }


def _overlapped(comm: dict) -> float | None:
    total = comm.get("communication_kernel_ns") or 0.0
    if total <= 0:
        return None
    return float(min(max(1.0 - (comm.get("exposed_comm_ns") or 0.0) / total, 0.0), 1.0))


def failed_row(rank: int, inputs: list[str], reason: str) -> dict:
    """The rank table's line of a rank that could not be analysed (its file missing or corrupt, its worker lost, past
    the timeout: ``rank_map``): named, with why, and never part of a cross-rank claim."""
    return {"rank": rank, "inputs": list(inputs), "tc_time_share": None, "tc_verdict": None, "gpu_busy_share": None,
            "compute_busy_share": None, "median_step_ns": None, "own_step_ns": None, "exposed_comm_share": None,
            "exposed_comm_per_step_ns": None, "communication_kernel_ns": 0.0, "comm_overlapped_share": None,
            "tc_compute_share": None,
            "kernel_time_ns": 0.0, "verdict": None, "headline_cause": None, "step_family": None, "_iterations": [],
            "_warmup": 0, "_all_iterations": [], "_per_step": {}, "complete": False,
            "incomplete_reason": f"it could not be analysed: {reason}", "_incomplete_short": "not analysed",
            "_incomplete_why": reason,
            "_own_iterations": [], "_collectives": [],
            "_steady_steps": 0,
            "host": None, "_compute_kernels": [], "_frames_per_step": {}}


def _own_iterations(dom: dict, warm: int) -> list[float]:
    """Each steady step's own work: its wall time less the communication it waited in (empty where the rank's
    verdict does not carry each step's wait)."""
    waits = dom.get("exposed_comm_ns_per_iteration") if dom else None
    its = list(dom.get("iteration_ns", []))[warm:] if dom else []
    if not waits or len(waits) != len(its):
        return []
    return [float(i - w) for i, w in zip(its, waits)]


def work_per_step(v, dom: dict, n_steady: int) -> dict[tuple[str, str], float] | None:
    """What a rank ran per steady step: its compute kernels' launches per step, by kernel name and grid (the launch's
    shape, where the recording has it), communication left out. The ranks' work is compared on this, not on GPU time:
    on two H100s an FSDP2 job's identical ranks ran the same 39 compute kernels the same number of times, 22.2 and
    27.5 ms of compute per step, the NCCL kernels beside it slowing one rank's.

    Per kernel and grid, the median over the steady steps of its launches in each step (the steps laid end to end
    from the window's start by their iteration times), not the window's launches over its step count: a window of
    14 steps whose edges cut one step's launches differently on two ranks differs by 7% that way (two H200s, DDP,
    a first run: rank 0's recording began at its window, rank 1's at the program's start; same_work false)."""
    launches = getattr(v, "launches", None)
    window = dom.get("steady_window_ns") if dom else None
    if launches is None or not len(launches) or not window or "name" not in launches:
        return None
    import numpy as np
    from .name_rules import is_communication
    t = launches["launch_ns"] if "launch_ns" in launches and launches["launch_ns"].notna().any() else launches["start_ns"]
    t = t.to_numpy(dtype="float64")
    names = launches["name"].astype(str)
    keep = (t >= window[0]) & (t <= window[1]) & ~is_communication(names).to_numpy()
    if not keep.any():
        return None
    import pandas as pd
    grid = launches["grid"].astype(str).to_numpy()[keep] if "grid" in launches else np.full(int(keep.sum()), "")
    warm = int(dom.get("warmup_steps", 0))
    its = np.asarray(list(dom.get("iteration_ns", []))[warm:], dtype="float64")
    if len(its) >= 3 and abs(its.sum() - (window[1] - window[0])) <= 0.02 * (window[1] - window[0]):
        bounds = window[0] + np.concatenate([[0.0], np.cumsum(its)])
        step = np.clip(np.searchsorted(bounds, t[keep], side="right") - 1, 0, len(its) - 1)
        per = pd.DataFrame({"n": names.to_numpy()[keep], "g": grid, "s": step}).groupby(["n", "g", "s"]).size()
        per = per.unstack("s", fill_value=0).reindex(columns=range(len(its)), fill_value=0)
        med = per.median(axis=1)
        return {(str(n), str(g)): float(k) for (n, g), k in med.items() if k > 0}
    c = pd.DataFrame({"n": names.to_numpy()[keep], "g": grid}).value_counts()
    return {(str(n), str(g)): int(k) / n_steady for (n, g), k in c.items()}


def _compute_kernel_names(v) -> frozenset:
    k = getattr(v, "kernels", None)
    if k is None or len(k) == 0 or "name" not in k:
        return frozenset()
    from .name_rules import is_communication
    names = k["name"].astype(str)
    return frozenset(names[~is_communication(names).to_numpy()].tolist())


def _tc_compute_share(tc: dict, comm_ns: float) -> float | None:
    compute = (tc.get("kernel_time_ns") or 0.0) - (comm_ns or 0.0)
    return (tc.get("tc_time_ns") or 0.0) / compute if compute > 0 else None
