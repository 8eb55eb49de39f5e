"""The default run's replay pass: hardware evidence for the kernels the timeline found, by calling again
the PyTorch operators that launched them, under Nsight Compute (``nsighttc/runtime/replay.py`` says why that
measures the program's own kernels).

Why: the ncu pass over the program itself must run the program, every launch serialised, up to the first
launch of the last kernel it needs. A program whose later phases bring new GEMMs (wrappers/multi_phase.py)
paid ~10 s for that on H100 against ~2 s for the profiles themselves. The replay pass costs the profiles
and the calls only, wherever in the program the kernels first ran.

How: the timeline pass records operator arguments (torch.profiler ``record_shapes``); the replay process
starts under ncu beside the timeline pass, warms up (CUDA context, cuBLAS/cuDNN, and one profile of its own
that pays ncu's set-up) and waits at a gate like the program's ncu pass. When the
timeline ends the gate opens (the CUDA context is made while we plan), the operators that made the first
launch of each kernel still lacking evidence are written to ``replay_ops.json``, and ncu profiles every
kernel launched inside the ``nsighttc-replay`` NVTX range. The list is made from the trace's kernel events
while the launcher still writes the trace (``StreamPlan``, JSON lines the replay follows; ``start_from_trace``
after it; or from the launcher's kernel list, ``EarlyPlan``) before the trace is fully parsed,
and the plan from the parsed trace decides afterwards what was measured. Kernels it did not launch (another algorithm
chosen, an operator it could not call, a launch with no operator) are left to the ncu pass over the
program, started after it and filtered to them.

Here: the replay's ncu command and what it measured. The list of calls: ``profile.replay_plan``; the trace read
while it is written: ``profile.trace_reader``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import ncu_metrics
from ..collect import engines, process
from ..errors import NsighttcError
from ..record_format import REPLAY_RANGE as RANGE, WARM_RANGE
from ..runtime.replay import CALLING
from .evidence import export
from .passes import CounterPermission, Options, Pass
from .running import finish_pass
from .replay_plan import write_ops

if TYPE_CHECKING:
    import pandas as pd  # imported where tables are made: the replay pass is started before the analysis stack

OPS_FILE = "replay_ops.json"
WAIT_BASE_S = 60.0      # the replay's own time limit: start-up left over, plus
WAIT_PER_CALL_S = 5.0   # each call (a profile is ~0.1 s on H100; cudnn benchmark mode tries many algorithms)


def replay_pass(ncu, run_dir: Path, cc: str | None, opts: Options, gate: Path, backend_flags: Path | None = None) -> Pass:
    """``backend_flags``: where the timeline's launcher writes the program's kernel-choosing switches (its rank's
    directory in a distributed job), which the replay sets before its calls (``runtime.backend_flags``)."""
    inner = engines.replay_argv(run_dir / OPS_FILE, python=opts.python, gate=gate,
                                gate_at="warm" if opts.overlap in ("cuda", "context") else "start",
                                backend_flags=backend_flags)
    metrics = ncu_metrics.one_pass_metrics_for_cc(cc) if opts.counters == "fast" else None
    # Every launch in the replay's range (and the warm-up's one profile, which pays ncu's one-time set-up before
    # the gate and which the parsers drop: nsighttc.runtime.replay.WARM_RANGE), not each launch configuration once: ncu's
    # per-launch-config filter keys on the function's base name and the launch shape, so
    # cutlass::Kernel2<..._nn_align2> and <..._nt_align2> with the same grid and block are one configuration and
    # the second is never profiled (H100, ncu 2025.3.1, benchmarks/probes/gpu_replay_filter_probe.sh: ResNet-50 AMP's
    # list, 57 profiles missing two kernels against 66 profiles with none missing). The replay calls each
    # operator once, so few launches repeat.
    argv = engines.ncu_argv(ncu, run_dir / "ncu_replay", inner, cc, nvtx_range=(RANGE, WARM_RANGE),
                            all_kernels=opts.all_kernels, metrics=metrics, nvtx=True, every_launch=True)
    return Pass("ncu", argv, run_dir / "ncu_replay.log", mode="replay", stem="ncu_replay")


def measured_keys(inputs: list[Path], parsed_into: dict | None = None) -> set[str]:
    """Merge keys (``analysis.merge.merge_key``) of the kernels these ncu reports measured with hardware
    evidence: the names the merge will give evidence to. The parses go into ``parsed_into`` (the final
    analysis reads them from there)."""
    from ..analysis.merge import merge_key
    from ..analysis.tensor_cores import EVIDENCE_HARDWARE, classify_launches
    from ..api import _load_all
    keys: set[str] = set()
    for path, parsed in zip(inputs, _load_all(inputs)):
        if parsed_into is not None:
            parsed_into[path] = parsed
        if parsed.kernels.empty:
            continue
        launches = classify_launches(parsed.kernels)
        hard = launches[(launches["evidence"] == EVIDENCE_HARDWARE).to_numpy()]
        keys |= set(merge_key(hard["name"].astype(str)))
    return keys


def crashed_in(log: Path) -> str | None:
    """The operator the replay was calling when its process ended (its last ``CALLING`` line with no outcome after
    it), or None."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    last = max((i for i, line in enumerate(lines) if line.startswith(CALLING)), default=None)
    if last is None:
        return None
    outcome = ("nsighttc.replay: +", "nsighttc.replay: could not call")
    if any(line.startswith(outcome) for line in lines[last + 1:]):
        return None
    return lines[last][len(CALLING):].strip() or None


def still_missing(missing: list[str], keys: set[str]) -> list[str]:
    import pandas as pd
    from ..analysis.merge import merge_key
    if not missing:
        return []
    k = merge_key(pd.Series(missing, dtype=object))
    return [n for n, kk in zip(missing, k) if kk not in keys]


def run_replay(rp: Pass, rp_run: process.Running, run_dir: Path, need: pd.DataFrame, missing: list[str],
               out, say: Callable[[str], None], started: float,
               remaining: Callable[[], float | None], early: dict | None = None) -> tuple[list[str], list[str]]:
    """Give the replay process the operators of the missing kernels (unless ``early``: the counts of an
    ``EarlyPlan`` that already did), let it finish, and read what it measured. Returns (kernels still
    missing, kernels the replay measured)."""
    info = out.info
    t0 = time.monotonic()
    if not missing:
        rp_run.kill(grace_s=2.0)
        return missing, []
    found = early if early is not None else write_ops(run_dir / OPS_FILE, need.attrs.get("first", {}), missing)
    if not found["calls"]:
        rp_run.kill(grace_s=2.0)
        info["replay"] = {**found, "measured": 0}
        out.notes.append(no_operators_note(out, len(missing)))
        return missing, []
    say(f"[2/2 ncu] replaying {found['calls']} operator call(s) for {found['kernels_with_operator']} of the "
        f"{len(missing)} kernel(s) needing hardware evidence ... {time.monotonic() - started:.0f}s")
    rp.on_prof = lambda line: say(f"[2/2 ncu] replay: profiled {rp.profiled_kernels} kernel(s) "
                                  f"... {time.monotonic() - started:.0f}s")
    limit = WAIT_BASE_S + WAIT_PER_CALL_S * found["calls"]
    left = remaining()
    try:
        finish_pass(rp, rp_run, limit if left is None else min(limit, left))
    except CounterPermission:
        info["replay"] = {**found, "measured": 0, "error": "counters refused"}
        return missing, []
    waited = time.monotonic() - t0
    out.done.append(rp)
    try:
        reports = export(rp, run_dir, [])
    except NsighttcError as exc:
        out.failures.append(str(exc))
        reports = []
    keys = measured_keys(reports, out.parsed) if reports else set()
    rest = still_missing(missing, keys)
    left = set(rest)
    measured = [n for n in missing if n not in left]
    kept = [r for r in reports if r in out.parsed and not out.parsed[r].kernels.empty]
    rows = [len(out.parsed[r].kernels) for r in reports if r in out.parsed]
    warm = 0
    if reports and len(rows) == len(reports):  # ncu's count less the warm-up's profile, which the parse dropped
        warm, rp.profiled_kernels = max(0, rp.profiled_kernels - sum(rows)), sum(rows)
    out.inputs += kept  # a report holding the warm-up's profile alone has nothing to merge
    info["replay"] = {**found, "measured": len(measured), "profiled": rp.profiled_kernels, "warm_up_profiles": warm,
                      "seconds": round(time.monotonic() - t0, 2), "waited_s": round(waited, 2),
                      "read_s": round(time.monotonic() - t0 - waited, 2)}
    crashed = crashed_in(rp.log.with_suffix(".stderr.log")) if rp.returncode not in (None, 0) and not rp.stopped_early else None
    if crashed:
        info["replay"]["crashed_in"] = crashed
        out.notes.append(f"the replay process ended (code {rp.returncode}) while calling {crashed}: the calls not made "
                         "after it were left to the program's Nsight Compute pass (see ncu_replay.stderr.log)")
    if measured:
        out.notes.append(f"hardware evidence for {len(measured)} of the {len(missing)} kernel(s) needing it came from "
                         "calling again, under Nsight Compute, the PyTorch operators that launched them in the "
                         "timeline run (same shapes, strides, dtypes and arguments; kernels matched by exact name)"
                         + (f"; the other {len(rest)} were measured on the program itself" if rest else ""))
    say(f"[2/2 ncu] replay measured {len(measured)} of {len(missing)} kernel(s) in {time.monotonic() - t0:.1f}s"
        + (f"; {len(rest)} left for the program's ncu pass" if rest else ""))
    return rest, measured


def no_operators_note(out, missing: int) -> str:
    """Why the replay had no operator calls for the kernels that need evidence: a rank whose change of sessions was
    given up at its window (a record_function of the program's open across its steps, ``runtime.recording``) never
    recorded its operators; else their first launches were not in the operators' recording. What answered instead
    follows in the run's notes (ncu on the program, the evidence cache, or the kernels' names)."""
    timeline = next((p for p in out.done if getattr(p, "mode", None) == "timeline"), None)
    ranks = getattr(timeline, "ranks_recorded", None) or {}
    kept = sorted((r for r, v in ranks.items() if v.get("operators_for_replay") is False), key=int)
    why = (f"rank {', '.join(kept)} recorded no operators: a record_function of the program's stayed open across its "
           "steps, so its change to the operators' recording was given up and the session holding its window was kept"
           if kept else "their first launches were not in the operators' recording")
    return (f"the replay had no operator calls for the {missing} kernel(s) needing hardware evidence ({why}); "
            "they are measured on the program by Nsight Compute where that pass runs, else answered by their names")
