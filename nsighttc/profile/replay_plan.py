"""The replay's list of operator calls, made as early as the timeline allows: from the trace's kernel events
while the launcher still writes it (``StreamPlan``), from the finished trace (``start_from_trace``), or from the
launcher's own kernel list (``EarlyPlan``); ``write_ops`` makes it from the parsed trace. The replay process
(``nsighttc.runtime.replay``) follows the list as it grows; ``profile.replay_pass`` runs that process and reads what
it measured.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..runtime.gate import write_gate

if TYPE_CHECKING:
    import pandas as pd  # imported where tables are made: the replay is planned before the analysis stack loads


def first_launches(launches: pd.DataFrame, names) -> dict[str, list[tuple[str, int, int]]]:
    """Kernel name -> [(input file, launch id, device)] of its first launch in each input of the timeline, the
    earliest first: a job's ranks each recorded the kernel, and where one rank's recording holds no operators (its
    change to the operators' recording was given up: ``runtime.recording.hold_window``) another rank's may."""
    import pandas as pd
    names = set(names)
    if not names or launches.empty or "launch_id" not in launches:
        return {}
    sel = launches[launches["name"].astype(str).isin(names).to_numpy() & launches["launch_id"].notna().to_numpy()]
    if sel.empty:
        return {}
    sel = sel.sort_values("start_ns", kind="stable").drop_duplicates(["name", "input"])
    dev = sel["device"] if "device" in sel else pd.Series(0, index=sel.index)
    out: dict[str, list[tuple[str, int, int]]] = {}
    for n, i, l, d in zip(sel["name"], sel["input"], sel["launch_id"], dev):
        out.setdefault(str(n), []).append((str(i), int(l), int(d) if pd.notna(d) else 0))
    return out


def write_ops(path: Path, first: dict[str, list[tuple[str, int, int]]], missing: list[str]) -> dict:
    """Write the operator calls that made the first launch of each missing kernel (one call per distinct
    call), read from the timeline's trace, to ``path``: from the input that launched it first, else from the next
    input that has the operator (another rank's recording). Returns what was found.

    Why the other ranks: a DDP job with a ``record_function`` of its own open around its loop (2 x H200,
    ``ddp_w.py``): rank 0, which records the ranges only until its lead change, could not change sessions, so its
    recording holds no operators, while rank 1 recorded them from its start; the replay had none for 46 kernels and
    the whole job was launched again under Nsight Compute for them (a first run at 2.07x a plain one)."""
    from ..parse.kineto_ops import launching_ops
    found: list[tuple[str, dict, int]] = []
    errors: list[str] = []
    left = [n for n in dict.fromkeys(missing) if first.get(n)]
    k = 0
    while left:
        by_input: dict[str, dict[int, tuple[str, int]]] = {}
        for name in left:
            if k < len(first[name]):
                inp, corr, dev = first[name][k]
                by_input.setdefault(inp, {})[corr] = (name, dev)
        if not by_input:
            break
        got: set[str] = set()
        for inp, corrs in by_input.items():
            try:
                ops = launching_ops(Path(inp), corrs)
            except Exception as exc:  # an unreadable trace only means no replay: the program's ncu pass follows
                errors.append(f"{inp}: {exc}")
                continue
            found += [(corrs[corr][0], call.to_json(), corrs[corr][1]) for corr, call in ops.items()]
            got |= {corrs[corr][0] for corr in ops}
        left = [n for n in left if n not in got]
        k += 1
    if left:  # a rank that recorded its operators by a dispatch mode (``runtime.op_capture``): the calls around them
        from ..parse.op_capture import captured_calls
        inputs = list(dict.fromkeys(c[0] for n in left for c in first[n]))
        for inp in inputs:
            calls = captured_calls(Path(inp), left)
            dev = {n: next((c[2] for c in first[n] if c[0] == inp), 0) for n in calls}
            found += [(n, call, dev[n]) for n, call in calls.items()]
            left = [n for n in left if n not in calls]
            if not left:
                break
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
    """Starts the replay from the timeline launcher's early kernel list (``nsighttc.runtime.kernel_ops``), written
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
    """From a list of distinct kernels (``nsighttc.runtime.kernel_ops`` / ``kineto_ops.kernel_launches``): pick those
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
    write_gate(gate, "go")
    return {**counts, "errors": []}


class StreamPlan:
    """The replay planned while the trace is still written: the kernel scan (``KernelScan``) hands over each
    window's newly seen kernels, and a thread picks those still lacking evidence (``decide``: name rules and
    the evidence cache, as the final plan), finds their operators (all written before the first GPU event:
    Kineto writes the CPU side first, then the GPU side; read where the scan's ``OperatorIndex`` saw them, else
    by a scan of what is written) and appends the calls to ``ops`` as JSON lines,
    opening the replay's gate with the first one. ``finish`` ends the list with ``{"end": true}``.

    Why: Kineto writes the GPU half of the trace last, ~0.5-0.6 s of ResNet-50 AMP's 1.2 s of writing on
    H100, and a program's distinct kernels nearly all appear in its first steps: the replay's calls start
    while that half is written instead of after the whole trace. Same machine, same rounds
    (``benchmarks/gpu/gpu_ab_first_run.py``): the first call listed 0.02-0.19 s before the trace was complete
    where the whole list came 0.17-0.22 s after it, the replay done 2.3 s after the trace instead of 2.9 s.
    A kernel whose operator is not in the file yet is looked up again once the trace is complete; what the
    replay did not measure is still found by the plan from the parsed trace and left to the program's pass."""

    def __init__(self, trace: Path, ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]],
                 defer_to: Path | None = None, index=None, hold: threading.Event | None = None):
        import queue
        self.trace, self.ops, self.gate, self.decide, self.defer_to = trace, ops, gate, decide, defer_to
        # the gate opens with the first call, but not before ``hold`` is set: a list planned from a first run's
        # operators until its window is ready while the window still runs, and the replay's GPU work would slow
        # the steps it times
        self.hold = hold
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

    def use_trace(self, trace: Path) -> None:
        """The scan reads ``trace`` (the operators' trace of a first run with a window): operators are looked up
        there (called before the scan hands over any kernel)."""
        self.trace = trace

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
        from ..collect.yield_cores import idle_thread
        idle_thread()  # planned beside the program: no core taken from it (collect.yield_cores)
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
                        self._captured(first)
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
            self._list(k["name"], {**call.to_json(), "device": int(k.get("device") or 0)})
        if not final:
            self._deferred += [k for k in later if k.get("external") is not None]

    def _captured(self, first: dict) -> None:
        """The kernels still without a call, from the calls this rank recorded by a dispatch mode where its trace has
        no operators (``parse.op_capture``: a first run whose change to the operators' session could not run)."""
        from ..parse.op_capture import capture_file, captured_calls
        covered = {n for c in self._calls.values() for n in c["kernels"]}
        left = [n for n in dict.fromkeys(self._missing) if n not in covered]
        if not left or not capture_file(self.trace).exists():
            return
        for name, call in captured_calls(self.trace, left).items():
            self._list(name, {**call, "device": int((first.get(name) or {}).get("device") or 0)})

    def _list(self, name: str, d: dict) -> None:
        """Kernel ``name``'s call ``d`` (with its device) in the list: appended once per distinct call, each naming
        every kernel it was listed for."""
        key = json.dumps(d, sort_keys=True)
        if key in self._calls:
            self._calls[key]["kernels"].append(name)
            return
        self._calls[key] = {**d, "kernels": [name]}
        self._append(self._calls[key])

    def _append(self, entry: dict) -> None:
        if self._fh is None:
            self._fh = self.ops.open("w")
        self._fh.write(json.dumps(entry) + "\n")
        self._fh.flush()
        if "end" not in entry:
            self.last_call_s = round(time.monotonic() - self._t0, 2)
        if self.first_call_s is None and "end" not in entry:
            self.first_call_s = round(time.monotonic() - self._t0, 2)
            self._open_gate()

    def _open_gate(self) -> None:
        if self.hold is None or self.hold.is_set():
            write_gate(self.gate, "go")
            return

        def when_released() -> None:
            self.hold.wait()
            write_gate(self.gate, "go")
        threading.Thread(target=when_released, daemon=True, name="nsighttc-replay-gate").start()



def start_from_trace(trace: Path, ops: Path, gate: Path, decide: Callable[[pd.DataFrame], list[str]]) -> dict:
    """``start_replay`` from the finished trace's kernel events alone (``kineto_ops.kernel_launches``, then one
    scan for the operators of the kernels picked): the replay runs while the whole trace is parsed
    (ResNet-50 AMP's 120 MB trace on H100: ~1.3 s of parsing and planning before the replay could start)."""
    from ..parse import kineto_ops

    def calls_for(picked: list[dict]) -> dict[str, dict]:
        ops_by_id = kineto_ops.operators(trace, [k["external"] for k in picked if k.get("external") is not None])
        got = {k["name"]: ops_by_id[k["external"]].to_json() for k in picked if k.get("external") in ops_by_id}
        left = [k["name"] for k in picked if k["name"] not in got]
        if left:  # (a rank whose operators a dispatch mode recorded: ``parse.op_capture``)
            from ..parse.op_capture import captured_calls
            got.update(captured_calls(trace, left))
        return got
    return start_replay(kineto_ops.kernel_launches(trace), ops, gate, decide, calls_for)
