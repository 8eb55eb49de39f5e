"""In the timeline process, right after torch.profiler stops: every distinct kernel the program launched,
with the operator (and its recorded arguments) that made its first launch. Written *before* the trace.

Why: the replay pass (``profile/replay_pass.py``) needs, for each kernel still lacking hardware evidence,
the operator call that launched it. Read from the exported trace, that list comes after the trace is
written (ResNet-50 AMP on H100: 1.2 s for 114 MB) and read again (~1 s), while the GPU sits idle. The
profiler already holds it in memory: ``kineto_results.events()`` links each kernel to its operator
(``linked_correlation_id`` = the operator's ``correlation_id``, the trace's ``External id``) and, with
``record_shapes``, carries the operator's arguments. So the launcher writes this small list first;
nsighttc picks the kernels to replay from it and opens the replay while the trace is still being written
and parsed. The trace remains the record: the plan made from it decides, and whatever this list missed is
measured on the program as before.

Needs a torch whose profiler events carry input strides and activity types
(``_KinetoEvent.structured_input_strides``, ``activity_type``: torch 2.13 has them, 2.11 does not); without, no list is written and the replay starts from the trace as before.
Where torch has the profiler's ``trace_only`` setting (2.13), the launcher uses that instead and writes no
list: walking every event cost more than the trace export it was meant to get ahead of (480,000 operator
events on the CPU machine: the list 2.2-3.5 s, against a stop 0.4-2.5 s shorter without the events;
``nsighttc.runtime.launch.trace_only_config``). The list remains for a torch with strides but without ``trace_only``.
Runs inside the user's program: imports nothing beyond the standard library and torch, and any failure
only means no early list (``write`` returns the reason). Fields are those ``parse.kineto_ops.OpCall`` reads
from the trace (``Input type`` names, dims, strides, concrete values as text), so the replay treats both
alike.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

VERSION = 1
# Kineto activity type of GPU kernels (`_KinetoEvent.activity_type()`: torch 2.13 has it, 2.11 does not, seen with
# benchmarks/probes/gpu_kernel_ops_probe.py, which also lacks the input strides: ``write`` needs both)
KERNEL_ACTIVITY = "kernel"
NEEDED = ("structured_input_strides", "activity_type")


def _text(v) -> str:
    """A recorded value as the trace writes it in ``Concrete Inputs`` (None: ""), readable back by
    ``ast.literal_eval`` (strings are quoted, unlike the trace, so the replay can pass them)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_text(x) if x is not None else "None" for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    return ""  # a value the replay could not pass anyway (a tensor, an object)


def _call(e) -> dict | None:
    """The operator event ``e`` as ``OpCall.to_json`` writes it, or None without recorded arguments."""
    types = list(e.dtypes())
    if not types:
        return None
    dims, strides = e.structured_input_shapes(), e.structured_input_strides()
    concrete = [_text(c) for c in e.concrete_inputs()]
    return {"name": e.name(), "types": [str(t) for t in types], "dims": [list(d) for d in dims],
            "strides": [list(s) for s in strides], "concrete": concrete}


def collect(events, cuda, cpu) -> list[dict]:
    """Distinct kernels (first launch, total time, launches) with their first launch's operator call.
    ``cuda``/``cpu``: the ``DeviceType`` values. Two passes over the events: kernels, then the operators
    of the first launches (by id)."""
    first: dict[str, list] = {}  # name -> [start, operator id, device, launches, time]
    for e in events:
        if e.device_type() != cuda or e.activity_type() != KERNEL_ACTIVITY:
            continue
        name, start = e.name(), e.start_ns()
        f = first.get(name)
        if f is None:
            first[name] = [start, e.linked_correlation_id(), e.device_index(), 1, e.duration_ns()]
            continue
        f[3] += 1
        f[4] += e.duration_ns()
        if start < f[0]:
            f[0], f[1], f[2] = start, e.linked_correlation_id(), e.device_index()
    wanted = {f[1] for f in first.values() if f[1] > 0}
    calls: dict[int, dict | None] = {}
    for e in events:
        # operators: CPU events linked to nothing (runtime calls are linked to their operator)
        if e.device_type() == cpu and e.linked_correlation_id() == 0:
            cid = e.correlation_id()
            if cid in wanted and calls.get(cid) is None:
                calls[cid] = _call(e)
    return [{"name": n, "device": int(f[2]), "first_ns": int(f[0]), "launches": int(f[3]), "time_ns": int(f[4]),
             "op": calls.get(f[1])} for n, f in first.items()]


def write(prof, path: Path) -> str:
    """Write the list for a stopped ``torch.profiler.profile`` to ``path`` (atomically: nsighttc polls for
    it). Returns a line for the launcher's log; never raises."""
    t0 = time.perf_counter()
    try:
        from torch._C._autograd import _KinetoEvent
        from torch.autograd import DeviceType
        if not all(hasattr(_KinetoEvent, a) for a in NEEDED):
            # torch 2.11 (H100 machine, benchmarks/probes/gpu_kernel_ops_probe.py): no strides per event, and the
            # replay needs them (a transposed GEMM operand made contiguous picks another cuBLAS kernel: 2 of
            # ResNet-50 AMP's 49 kernels were missed that way). Its event tree has them, but walking it took
            # 5.7 s there for 252,651 events.
            return ("no kernel list (this torch's profiler events carry no input strides or activity types; "
                    "the trace has them)")
        events = prof.profiler.kineto_results.events()
        kernels = collect(events, DeviceType.CUDA, DeviceType.CPU)
        doc = {"version": VERSION, "kernels": kernels, "seconds": round(time.perf_counter() - t0, 3)}
        tmp = path.with_name(path.name + ".tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except Exception as exc:  # only the early start of the replay is lost: the plan from the trace follows
        return f"no kernel list ({type(exc).__name__}: {exc})"
    with_op = sum(1 for k in kernels if k["op"] is not None)
    return (f"kernel list: {len(kernels)} kernel(s), {with_op} with their operator, from {len(events)} events "
            f"in {time.perf_counter() - t0:.2f} s")
