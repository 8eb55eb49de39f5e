"""``nsighttc diff BASE NEW``: compare two saved verdicts and gate a pull request on regressions.

Checks (defaults in ``Gate``): the Tensor Core share of kernel time must not drop by more than
``max_tc_drop`` percentage points, the GPU busy share by more than ``max_busy_drop`` points, the median
step (or the profiled window when there are no steps) must not get slower by more than ``max_slowdown``
percent, and no synchronising call may appear that BASE did not make. Distributed runs (several ranks) also
gate on the slowest rank's median step (``max_slowdown``) and on exposed communication (``max_comm_rise``
points of step time). A check whose data is missing on
either side is reported as skipped, never as passed or failed.
"""
from __future__ import annotations

from dataclasses import dataclass

from .render.fmt import ns, pct


@dataclass
class Gate:
    max_tc_drop: float = 5.0      # percentage points
    max_busy_drop: float = 10.0   # percentage points
    max_slowdown: float = 10.0    # percent
    max_comm_rise: float = 10.0   # percentage points of step time in exposed transfers (distributed runs)


@dataclass
class Check:
    name: str
    base: str
    new: str
    change: str
    status: str  # ok | fail | skipped
    why: str = ""


def _step_ns(doc: dict) -> float | None:
    tl = doc.get("timeline") or {}
    steps = tl.get("steps") or {}
    # the step as the GPU finished it (steps.py), else the host's iteration (verdicts saved before it existed)
    if steps.get("median_effective_ns") or steps.get("median_iteration_ns"):
        return steps.get("median_effective_ns") or steps["median_iteration_ns"]
    return None


def compare(base: dict, new: dict, gate: Gate) -> list[Check]:
    out = []
    b, n = base["tensor_cores"], new["tensor_cores"]
    if b.get("launches") and n.get("launches"):
        d = 100 * (n["tc_time_share"] - b["tc_time_share"])
        out.append(Check("Tensor Core share of kernel time", pct(b["tc_time_share"]), pct(n["tc_time_share"]),
                         f"{d:+.1f} pts", "fail" if d < -gate.max_tc_drop else "ok",
                         f"dropped more than {gate.max_tc_drop:g} points" if d < -gate.max_tc_drop else ""))
    else:
        out.append(Check("Tensor Core share of kernel time", "n/a", "n/a", "", "skipped", "no kernels on one side"))
    out.append(Check("Tensor Core verdict", f"{b['verdict']} ({b['evidence']})", f"{n['verdict']} ({n['evidence']})",
                     "", "ok"))
    bt, nt = base.get("timeline"), new.get("timeline")
    if bt and nt:
        d = 100 * (nt["gpu_busy_share"] - bt["gpu_busy_share"])
        out.append(Check(f"GPU busy ({nt.get('basis', '')})", pct(bt["gpu_busy_share"]), pct(nt["gpu_busy_share"]),
                         f"{d:+.1f} pts", "fail" if d < -gate.max_busy_drop else "ok",
                         f"dropped more than {gate.max_busy_drop:g} points" if d < -gate.max_busy_drop else ""))
        out.append(Check("Timeline verdict", bt["verdict"], nt["verdict"], "", "ok"))
        bs, nsv = _step_ns(base), _step_ns(new)
        if bs and nsv:
            d = 100 * (nsv / bs - 1)
            out.append(Check("Median step time", ns(bs), ns(nsv), f"{d:+.1f}%", "fail" if d > gate.max_slowdown else "ok",
                             f"slower by more than {gate.max_slowdown:g}%" if d > gate.max_slowdown else ""))
        else:
            out.append(Check("Median step time", ns(bs), ns(nsv), "", "skipped", "no steps on one side"))
        b_sync = set((bt.get("sync") or {}).get("by_name", {}))
        n_sync = (nt.get("sync") or {}).get("by_name", {})
        new_calls = sorted(set(n_sync) - b_sync)
        out.append(Check("Synchronising calls", ", ".join(sorted(b_sync)) or "none", ", ".join(sorted(n_sync)) or "none",
                         ("new: " + ", ".join(new_calls)) if new_calls else "", "fail" if new_calls else "ok",
                         "new synchronising calls" if new_calls else ""))
    else:
        out.append(Check("GPU busy / step time / syncs", "n/a" if not bt else "recorded", "n/a" if not nt else "recorded",
                         "", "skipped", "needs a timeline (nsys or torch) on both sides"))
    if base.get("distributed") or new.get("distributed"):
        out += _distributed_checks(base.get("distributed") or {}, new.get("distributed") or {}, gate)
    return out


def _distributed_checks(b: dict, n: dict, gate: Gate) -> list[Check]:
    """Distributed runs: the job runs at its slowest rank's pace, and waiting in exposed communication is
    time every rank loses."""
    out = []
    bs, nsv = b.get("slowest_rank_step_ns"), n.get("slowest_rank_step_ns")
    if bs and nsv:
        d = 100 * (nsv / bs - 1)
        out.append(Check("Slowest rank's median step", f"{ns(bs)} (rank {b.get('slowest_rank')})",
                         f"{ns(nsv)} (rank {n.get('slowest_rank')})", f"{d:+.1f}%",
                         "fail" if d > gate.max_slowdown else "ok",
                         f"slower by more than {gate.max_slowdown:g}%" if d > gate.max_slowdown else ""))
    else:
        out.append(Check("Slowest rank's median step", ns(bs), ns(nsv), "", "skipped", "rank steps on one side only"))
    be, ne = b.get("exposed_comm_share"), n.get("exposed_comm_share")
    bt, nt = _transfer_share(b), _transfer_share(n)
    if bt is not None and nt is not None:
        # the gate reads the transfers: the rest of the exposed communication is the ranks waiting for each other's
        # work, which the slowest rank's step already gates (a straggler's wait is no communication regression)
        d = 100 * (nt - bt)
        out.append(Check("Exposed communication: transfers (share of step time)", pct(bt), pct(nt), f"{d:+.1f} pts",
                         "fail" if d > gate.max_comm_rise else "ok",
                         f"rose more than {gate.max_comm_rise:g} points" if d > gate.max_comm_rise else ""))
        out.append(Check("Exposed communication, waits included (share of step time)", pct(be), pct(ne),
                         f"{100 * ((ne or 0.0) - (be or 0.0)):+.1f} pts", "ok",
                         "the ranks waiting for each other: gated by the slowest rank's step"))
    elif be is not None and ne is not None:
        d = 100 * (ne - be)
        out.append(Check("Exposed communication (share of step time)", pct(be), pct(ne), f"{d:+.1f} pts",
                         "fail" if d > gate.max_comm_rise else "ok",
                         f"rose more than {gate.max_comm_rise:g} points" if d > gate.max_comm_rise else ""))
    else:
        out.append(Check("Exposed communication (share of step time)", pct(be), pct(ne), "", "skipped",
                         "several ranks on one side only"))
    bst, nst = (b.get("straggler") or {}).get("rank"), (n.get("straggler") or {}).get("rank")
    out.append(Check("Straggler", "none" if bst is None else f"rank {bst}", "none" if nst is None else f"rank {nst}",
                     "new" if nst is not None and bst is None else "", "ok"))
    return out


def _transfer_share(d: dict) -> float | None:
    """The job's exposed transfers (``analysis.ranks.exposed_transfers``) as a share of its slowest rank's step; None
    for a verdict without them (saved before they were measured, or a rank without its steps' waits)."""
    tr, step = d.get("exposed_transfer"), d.get("slowest_rank_step_ns")
    return tr["transfer_per_step_ns"] / step if tr and step else None


def render_markdown(checks: list[Check], base_name: str, new_name: str, gate: Gate) -> str:
    failed = [c for c in checks if c.status == "fail"]
    head = (f"**nsighttc diff: FAIL — {', '.join(c.name + ' ' + c.why for c in failed)}**" if failed
            else "**nsighttc diff: OK — no regression beyond the gate**")
    lines = [head, "", f"| | base `{base_name}` | new `{new_name}` | change | gate |", "|---|---|---|---|---|"]
    icon = {"ok": "ok", "fail": "**FAIL**", "skipped": "skipped"}
    for c in checks:
        lines.append(f"| {c.name} | {c.base} | {c.new} | {c.change} | {icon[c.status]}{(' — ' + c.why) if c.why and c.status != 'fail' else ''} |")
    lines += ["", f"<sub>Gate: Tensor Core share drop ≤ {gate.max_tc_drop:g} pts, GPU busy drop ≤ {gate.max_busy_drop:g} pts, "
              f"step slowdown ≤ {gate.max_slowdown:g}%, no new synchronising calls"
              + (f"; distributed: slowest rank's step slowdown ≤ {gate.max_slowdown:g}%, exposed communication rise ≤ "
                 f"{gate.max_comm_rise:g} pts" if any(c.name.startswith(("Slowest", "Exposed")) for c in checks) else "")
              + ".</sub>", ""]
    return "\n".join(lines)
