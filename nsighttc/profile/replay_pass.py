"""The default run's replay pass: hardware evidence for the kernels the timeline found, by calling again
the PyTorch operators that launched them, under Nsight Compute (``nsighttc/replay.py`` says why that
measures the program's own kernels).

Why: the ncu pass over the program itself must run the program, every launch serialised, up to the first
launch of the last kernel it needs. A program whose later phases bring new GEMMs (wrappers/multi_phase.py)
paid ~10 s for that on H100 against ~2 s for the profiles themselves. The replay pass costs the profiles
and the calls only, wherever in the program the kernels first ran.

How: the timeline pass records operator arguments (torch.profiler ``record_shapes``); the replay process
starts under ncu beside the timeline pass and waits at a gate like the program's ncu pass. When the
timeline ends the gate opens (the CUDA context is made while we plan), the operators that made the first
launch of each kernel still lacking evidence are written to ``replay_ops.json``, and ncu profiles every
kernel launched inside the ``nsighttc-replay`` NVTX range. The list is made from the trace's kernel events
while the launcher still writes the trace (``StreamPlan``, JSON lines the replay follows; ``start_from_trace``
after it; or from the launcher's kernel list, ``EarlyPlan``) before the trace is fully parsed,
and the plan from the parsed trace decides afterwards what was measured. Kernels it did not launch (another algorithm
chosen, an operator it could not call, a launch with no operator) are left to the ncu pass over the
program, started after it and filtered to them.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import ncu_metrics
from ..collect import engines, process
from ..errors import NsighttcError
from ..replay import RANGE, WARM_RANGE
from . import CounterPermission, Options, Pass, _export, finish_pass

if TYPE_CHECKING:
    import pandas as pd  # imported where tables are made: the replay pass is started before the analysis stack

OPS_FILE = "replay_ops.json"
WAIT_BASE_S = 60.0      # the replay's own time limit: start-up left over, plus
WAIT_PER_CALL_S = 5.0   # each call (a profile is ~0.1 s on H100; cudnn benchmark mode tries many algorithms)


def replay_pass(ncu, run_dir: Path, cc: str | None, opts: Options, gate: Path) -> Pass:
    inner = engines.replay_argv(run_dir / OPS_FILE, python=opts.python, gate=gate,
                                gate_at="warm" if opts.overlap in ("cuda", "context") else "start")
    metrics = ncu_metrics.one_pass_metrics_for_cc(cc) if opts.counters == "fast" else None
    # Every launch in the range, not each launch configuration once: ncu's per-launch-config filter keys on the
    # function's base name and the launch shape, so cutlass::Kernel2<..._nn_align2> and <..._nt_align2> with the
    # same grid and block are one configuration and the second is never profiled (H100, ncu 2025.3.1,
    # benchmarks/gpu_replay_filter_probe.sh: ResNet-50 AMP's list, 57 profiles missing two kernels against 66
    # profiles with none missing). The replay calls each operator once, so few launches repeat.
    # and the warm-up's one profile (ncu's one-time set-up, before the gate: nsighttc.replay.WARM_RANGE), which
    # the parsers drop
    argv = engines.ncu_argv(ncu, run_dir / "ncu_replay", inner, cc, nvtx_range=(RANGE, WARM_RANGE),
                            all_kernels=opts.all_kernels, metrics=metrics, nvtx=True, every_launch=True)
    return Pass("ncu", argv, run_dir / "ncu_replay.log", mode="replay", stem="ncu_replay")


def first_launches(launches: pd.DataFrame, names) -> dict[str, tuple[str, int, int]]:
    """Kernel name -> (input file, launch id, device) of its first launch in the timeline."""
    import pandas as pd
    names = set(names)
    if not names or launches.empty or "launch_id" not in launches:
        return {}
    sel = launches[launches["name"].astype(str).isin(names).to_numpy() & launches["launch_id"].notna().to_numpy()]
    if sel.empty:
        return {}
    sel = sel.sort_values("start_ns", kind="stable").drop_duplicates("name")
    dev = sel["device"] if "device" in sel else pd.Series(0, index=sel.index)
    return {str(n): (str(i), int(l), int(d) if pd.notna(d) else 0)
            for n, i, l, d in zip(sel["name"], sel["input"], sel["launch_id"], dev)}


def write_ops(path: Path, first: dict[str, tuple[str, int, int]], missing: list[str]) -> dict:
    """Write the operator calls that made the first launch of each missing kernel (one call per distinct
    call), read from the timeline's trace, to ``path``. Returns what was found."""
    from ..parse.kineto_ops import launching_ops
    by_input: dict[str, dict[int, tuple[str, int]]] = {}
    for name in missing:
        if name in first:
            inp, corr, dev = first[name]
            by_input.setdefault(inp, {})[corr] = (name, dev)
    found: list[tuple[str, dict, int]] = []
    errors: list[str] = []
    for inp, corrs in by_input.items():
        try:
            ops = launching_ops(Path(inp), corrs)
        except Exception as exc:  # an unreadable trace only means no replay: the program's ncu pass follows
            errors.append(f"{inp}: {exc}")
            continue
        found += [(corrs[corr][0], call.to_json(), corrs[corr][1]) for corr, call in ops.items()]
    return {**_write_calls(path, found, len(missing)), "errors": errors}


def _write_calls(path: Path, found: list[tuple[str, dict, int]], n_missing: int) -> dict:
    """``found``: (kernel, its operator call, device). One entry per distinct call, listing its kernels,
    written atomically (the replay process polls for the file)."""
    calls: dict[str, dict] = {}
    for name, call, dev in found:
        d = {**call, "device": dev}
        key = json.dumps(d, sort_keys=True)
        calls.setdefault(key, {**d, "kernels": []})["kernels"].append(name)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(list(calls.values())))
    os.replace(tmp, path)
    with_op = sum(len(c["kernels"]) for c in calls.values())
    return {"calls": len(calls), "kernels_with_operator": with_op, "kernels_without_operator": n_missing - with_op}


def early_needs(kernels: list[dict]) -> pd.DataFrame:
    """``needs_hardware`` over the launcher's early kernel list (one row per distinct kernel, its total time):
    the same name rules the plan from the trace applies."""
    import pandas as pd
    from ..analysis.tensor_cores import classify_launches
    from ..collect.hardware_pass import needs_hardware
    from ..model import conform
    if not kernels:
        return needs_hardware(pd.DataFrame())
    d = pd.DataFrame({"name": [str(k["name"]) for k in kernels],
                      "duration_ns": [float(k.get("time_ns") or 0.0) for k in kernels],
                      "start_ns": [float(k.get("first_ns") or 0.0) for k in kernels],
                      "device": [int(k.get("device") or 0) for k in kernels], "source": "torch"})
    return needs_hardware(classify_launches(conform(d)))


class EarlyPlan:
    """Starts the replay from the timeline launcher's early kernel list (``nsighttc.kernel_ops``), written
    when the program ends and before its trace: the replay then runs while the trace is written and
    parsed, instead of after (ResNet-50 AMP on H100: ~2.4 s of trace writing, reading and planning).

    A thread waits for the list, picks the kernels still lacking evidence with ``decide`` (name rules and
    the evidence cache, as the main plan), writes their operator calls and opens the replay's gate. The plan
    made from the trace afterwards still decides what was measured: a kernel this list missed goes to the
    program's ncu pass. Any failure here only means the replay starts after that plan, as before."""

    def __init__(self, kernel_ops: Path, ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]]):
        self.kernel_ops, self.ops, self.gate, self.decide = kernel_ops, ops, gate, decide
        self.found: dict | None = None   # write_ops' counts once the replay was started from the list
        self.error: str | None = None
        self.info: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="nsighttc-early-plan")

    def start(self) -> "EarlyPlan":
        self._thread.start()
        return self

    def finish(self) -> dict | None:
        """After the timeline pass: stop waiting for a list that did not come, let a plan under way end.
        Returns the counts when the replay was started from the list."""
        self._stop.set()
        self._thread.join()
        return self.found

    def _run(self) -> None:
        while not self.kernel_ops.exists():
            if self._stop.wait(0.02) and not self.kernel_ops.exists():
                return
        t0 = time.monotonic()
        try:
            doc = json.loads(self.kernel_ops.read_text())
            kernels = doc["kernels"]
            self.found = start_replay(kernels, self.ops, self.gate, self.decide)
        except Exception as exc:  # noqa: BLE001 - the plan from the trace follows
            self.error = f"{self.kernel_ops.name}: {type(exc).__name__}: {exc}"
            return
        self.info = {"source": "launcher", "kernels_listed": len(kernels), "listed_in_s": doc.get("seconds"),
                     "planned_in_s": round(time.monotonic() - t0, 2)}


def start_replay(kernels: list[dict], ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]],
                 calls_for: Callable[[list[dict]], dict[str, dict]] | None = None) -> dict:
    """From a list of distinct kernels (``nsighttc.kernel_ops`` / ``kineto_ops.kernel_launches``): pick those
    still lacking evidence (``decide``), write their first launches' operator calls to ``ops`` and open the
    replay's ``gate``. ``calls_for(kernels)``: name -> call for the kernels picked, when the list does not
    carry them. Returns the written list's counts (``write_ops``' form)."""
    need = early_needs(kernels)
    missing = decide(need) if not need.empty else []
    wanted = set(missing)
    picked = [k for k in kernels if k["name"] in wanted]
    calls = calls_for(picked) if calls_for is not None else {k["name"]: k.get("op") for k in picked}
    found = [(k["name"], calls[k["name"]], int(k.get("device") or 0)) for k in picked if calls.get(k["name"])]
    counts = _write_calls(ops, found, len(missing))
    gate.write_text("go")
    return {**counts, "errors": []}


class StreamPlan:
    """The replay planned while the trace is still written: the kernel scan (``KernelScan``) hands over each
    window's newly seen kernels, and a thread picks those still lacking evidence (``decide``: name rules and
    the evidence cache, as the final plan), finds their operators (all written before the first GPU event:
    Kineto writes the CPU side first, then the GPU side) and appends the calls to ``ops`` as JSON lines,
    opening the replay's gate with the first one. ``finish`` ends the list with ``{"end": true}``.

    Why: Kineto writes the GPU half of the trace last, ~0.5-0.6 s of ResNet-50 AMP's 1.2 s of writing on
    H100, and a program's distinct kernels nearly all appear in its first steps: the replay's calls start
    while that half is written instead of after the whole trace. Same machine, same rounds
    (``benchmarks/gpu_ab_first_run.py``): the first call listed 0.02-0.19 s before the trace was complete
    where the whole list came 0.17-0.22 s after it, the replay done 2.3 s after the trace instead of 2.9 s.
    A kernel whose operator is not in the file yet is looked up again once the trace is complete; what the
    replay did not measure is still found by the plan from the parsed trace and left to the program's pass."""

    def __init__(self, trace: Path, ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]],
                 defer_to: Path | None = None, index=None):
        import queue
        self.trace, self.ops, self.gate, self.decide, self.defer_to = trace, ops, gate, decide, defer_to
        self.index = index  # kineto_ops.OperatorIndex the scan fills: operators read where they lie
        self.stood_down = False  # the launcher listed its kernels (``defer_to``): ``EarlyPlan`` writes the list
        self._q: queue.Queue = queue.Queue()
        self._calls: dict[str, dict] = {}
        self._missing: list[str] = []
        self._deferred: list[dict] = []
        self._seen: set[str] = set()
        self._fh = None
        self.errors: list[str] = []
        self.first_call_s: float | None = None
        self.last_call_s: float | None = None      # when the last call was listed
        self.first_needed_s: float | None = None   # when the scan handed over the first kernel needing evidence
        self.lookup_s = 0.0                        # time spent finding the operators in the trace
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="nsighttc-stream-plan")

    def start(self) -> "StreamPlan":
        self._thread.start()
        return self

    def add(self, kernels: list[dict]) -> None:
        """Kernels first seen in the latest window (called by the scan's thread)."""
        self._q.put(list(kernels))

    def finish(self, rest: list[dict] | None = None) -> dict:
        """End the list once the trace is complete; ``rest``: every kernel of the finished trace (the ones
        not handed over yet are planned now; a kernel still without a call is looked up from its first launch
        in time). Returns the list's counts (``write_ops``' form) and ``first_call_s``."""
        self._q.put(("end", rest))
        self._thread.join()
        with_op = sum(len(c["kernels"]) for c in self._calls.values())
        return {"calls": len(self._calls), "kernels_with_operator": with_op,
                "kernels_without_operator": len(self._missing) - with_op, "errors": [],
                "first_call_s": self.first_call_s, "last_call_s": self.last_call_s,
                "first_needed_s": self.first_needed_s, "lookup_s": round(self.lookup_s, 3)}

    def calls(self) -> list[dict]:
        """The calls listed, each with every kernel it was listed for (the file's line names the first)."""
        return list(self._calls.values())

    def _run(self) -> None:
        try:
            while True:
                item = self._q.get()
                if isinstance(item, tuple):
                    rest = item[1] or []
                    self._plan(rest)
                    if not self.stood_down:  # what has no call yet: from its first launch in time, else as seen
                        covered = {n for c in self._calls.values() for n in c["kernels"]}
                        first = {k["name"]: k for k in self._deferred} | {k["name"]: k for k in rest}
                        self._resolve([first[n] for n in dict.fromkeys(self._missing)
                                       if n not in covered and n in first], final=True)
                    return
                self._plan(item)
        except Exception as exc:  # noqa: BLE001 - what was not planned is left to the program's pass
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self._fh is not None:  # a list this plan began: end it (no list: nobody waits for one)
                self._append({"end": True})
                self._fh.close()

    def _plan(self, kernels: list[dict]) -> None:
        if self.stood_down or (self.defer_to is not None and self.defer_to.exists()):
            self.stood_down = True
            return
        kernels = [k for k in kernels if k["name"] not in self._seen]
        self._seen.update(k["name"] for k in kernels)
        if not kernels:
            return
        need = early_needs(kernels)
        missing = self.decide(need) if not need.empty else []
        if missing:
            if self.first_needed_s is None:
                self.first_needed_s = round(time.monotonic() - self._t0, 2)
            self._missing += missing
            wanted = set(missing)
            self._resolve([k for k in kernels if k["name"] in wanted])

    def _resolve(self, picked: list[dict], final: bool = False) -> None:
        """Their operators' calls, appended; the ones whose operator is not written yet wait for the end."""
        from ..parse import kineto_ops
        ids = [k["external"] for k in picked if k.get("external") is not None]
        if not ids:
            return
        t0 = time.monotonic()
        ops_by_id: dict = {}
        if self.index is not None and (fh := kineto_ops.current_trace(self.trace)) is not None:
            with fh:
                ops_by_id = self.index.operators(fh, ids)
        rest = [i for i in ids if i not in ops_by_id]  # not indexed (or not whole there): a scan of what is written
        if rest and (fh := kineto_ops.current_trace(self.trace)) is not None:
            ops_by_id.update(kineto_ops.operators(self.trace, rest, fh))
        self.lookup_s += time.monotonic() - t0
        later = []
        for k in picked:
            call = ops_by_id.get(k.get("external"))
            if call is None:
                later.append(k)
                continue
            d = {**call.to_json(), "device": int(k.get("device") or 0)}
            key = json.dumps(d, sort_keys=True)
            if key in self._calls:
                self._calls[key]["kernels"].append(k["name"])
                continue
            self._calls[key] = {**d, "kernels": [k["name"]]}
            self._append(self._calls[key])
        if not final:
            self._deferred += [k for k in later if k.get("external") is not None]

    def _append(self, entry: dict) -> None:
        if self._fh is None:
            self._fh = self.ops.open("w")
        self._fh.write(json.dumps(entry) + "\n")
        self._fh.flush()
        if "end" not in entry:
            self.last_call_s = round(time.monotonic() - self._t0, 2)
        if self.first_call_s is None and "end" not in entry:
            self.first_call_s = round(time.monotonic() - self._t0, 2)
            self.gate.write_text("go")


class _WhileWritten:
    """Something read from the timeline's trace in a thread while the launcher writes it (Kineto's
    ``<trace>.tmp``, followed through its rename). ``result()`` joins once the writer is done (call it after
    the launcher said the trace is written); None when no trace came or the read failed (``error``)."""

    thread_name = "nsighttc-trace-reader"

    def __init__(self, trace: Path, written: Callable[[], bool]):
        self.trace, self.written = trace, written
        self.error: str | None = None
        self._result = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)

    def start(self):
        self._thread.start()
        return self

    def _read(self, fh):
        raise NotImplementedError

    def _run(self) -> None:
        from ..parse import kineto_ops
        try:
            fh = kineto_ops.growing_trace(self.trace, self.written)
            if fh is not None:
                self._result = self._read(fh)
        except Exception as exc:  # noqa: BLE001 - the caller reads the finished trace itself
            self.error = f"{type(exc).__name__}: {exc}"

    def result(self):
        self._thread.join()
        return self._result


class KernelScan(_WhileWritten):
    """The trace's kernel events (``kineto_ops.kernel_launches``), read in a thread while the timeline's
    launcher writes the trace, handing each window's new kernels to ``on_new`` (a ``StreamPlan``).

    Why a scan of its own: it skips the operator half of the trace at regular-expression speed and keeps up
    with the writer. Fed by the full parse, the plan listed its first call ~0.2 s after ResNet-50 AMP's trace
    was complete (H100's host: the parse lagged behind the writer); with the parse running beside the scan,
    0.5-0.7 s after (the parse took the scan's interpreter time), so the default run parses the trace while
    it is written only when there is no replay to plan (``TraceStream``).

    ``written()``: the writer is done (the launcher said so, or its process ended). ``kernels()`` is None
    when the scan could not be made (no trace came, a read failed)."""

    thread_name = "nsighttc-kernel-scan"

    def __init__(self, trace: Path, written: Callable[[], bool], on_new: Callable[[list], None] | None = None,
                 index=None):
        super().__init__(trace, written)
        self.on_new, self.index = on_new, index

    def _read(self, fh) -> list[dict]:
        from ..parse import kineto_ops
        return kineto_ops.kernel_launches(self.trace, fh, self.written, self.on_new, self.index)

    def kernels(self) -> list[dict] | None:
        """The scan's kernels once the writer is done."""
        return self.result()


class TraceStream(_WhileWritten):
    """The timeline's trace parsed while the launcher writes it (``parse.load_while_written``), in a thread
    started with the timeline pass.

    Why: on H100 the launcher wrote ResNet-50 AMP's 114 MB trace in ~1.2 s and its parse took ~1.3 s after
    that: beside the writer, the parse was waited for 0.10-0.24 s after the trace (second runs of the three
    wrappers). Used when no replay is planned (see ``KernelScan``). ``parsed()`` is None when it could not be
    made (no trace came, the writer stopped mid-way, an unexpected shape): the caller parses the finished
    file as before."""

    thread_name = "nsighttc-trace-stream"

    def _read(self, fh):
        from ..parse import load_while_written, textio
        return load_while_written(self.trace, textio.GrowingFile(fh, self.written))

    def parsed(self):
        """The parsed trace once the writer is done."""
        return self.result()


def start_from_trace(trace: Path, ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]]) -> dict:
    """``start_replay`` from the finished trace's kernel events alone (``kineto_ops.kernel_launches``, then one
    scan for the operators of the kernels picked): the replay runs while the whole trace is parsed
    (ResNet-50 AMP's 120 MB trace on H100: ~1.3 s of parsing and planning before the replay could start)."""
    from ..parse import kineto_ops

    def calls_for(picked: list[dict]) -> dict[str, dict]:
        ops_by_id = kineto_ops.operators(trace, [k["external"] for k in picked if k.get("external") is not None])
        return {k["name"]: ops_by_id[k["external"]].to_json() for k in picked if k.get("external") in ops_by_id}
    return start_replay(kineto_ops.kernel_launches(trace), ops, gate, decide, calls_for)


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
        reports = _export(rp, run_dir, [])
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
    if measured:
        out.notes.append(f"hardware evidence for {len(measured)} of the {len(missing)} kernel(s) needing it came from "
                         "calling again, under Nsight Compute, the PyTorch operators that launched them in the "
                         "timeline run (same shapes, strides, dtypes and arguments; kernels matched by exact name)"
                         + (f"; the other {len(rest)} were measured on the program itself" if rest else ""))
    say(f"[2/2 ncu] replay measured {len(measured)} of {len(missing)} kernel(s) in {time.monotonic() - t0:.1f}s"
        + (f"; {len(rest)} left for the program's ncu pass" if rest else ""))
    return rest, measured
