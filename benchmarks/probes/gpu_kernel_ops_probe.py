#!/usr/bin/env python3
"""GPU probe (issue 10): what reading the profiler's in-memory results costs in the timeline launcher, and
which accessors this torch has. Runs a program (default wrappers/resnet_amp.py) under torch.profiler with
record_shapes, then times: profiler stop, ``kineto_results.events()``, ``nsighttc.kernel_ops.collect`` over
them, ``experimental_event_tree()`` walked whole (and whether GPU kernels hang under the operator that launched
them there, with the operators' input strides), and the trace export.

    python3 benchmarks/probes/gpu_kernel_ops_probe.py [PROGRAM.py [ARGS]]
"""
from __future__ import annotations

import runpy
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch
    from torch.autograd import DeviceType
    from nsighttc import kernel_ops
    prog = sys.argv[1:] or ["wrappers/resnet_amp.py"]
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                  record_shapes=True)
    prof.__enter__()
    sys.argv = list(prog)
    try:
        runpy.run_path(prog[0], run_name="__main__")
    except SystemExit:
        pass
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    prof.__exit__(None, None, None)
    t1 = time.perf_counter()
    res = prof.profiler.kineto_results
    evs = res.events()
    t2 = time.perf_counter()
    kernels = kernel_ops.collect(evs, DeviceType.CUDA, DeviceType.CPU)
    t3 = time.perf_counter()
    print(f"torch {torch.__version__}: stop {t1 - t0:.2f} s, events() {t2 - t1:.2f} s ({len(evs)} events), "
          f"collect {t3 - t2:.2f} s ({len(kernels)} kernels, {sum(k['op'] is not None for k in kernels)} with op)")
    print("KinetoEvent accessors:", sorted(m for m in dir(evs[0]) if not m.startswith("_")))
    # the event tree
    from torch._C._profiler import _EventType
    t4 = time.perf_counter()
    roots = res.experimental_event_tree()
    stack, n, by_tag, kin_under_op, example = list(roots), 0, {}, 0, None
    while stack:
        e = stack.pop()
        n += 1
        tag = e.tag
        by_tag[str(tag)] = by_tag.get(str(tag), 0) + 1
        if tag == _EventType.Kineto:
            p = e.parent
            if p is not None and p.tag == _EventType.TorchOp:
                kin_under_op += 1
                if example is None and ("gemm" in e.name or "nvjet" in e.name):
                    example = (e.name, p.name, p.correlation_id,
                               [(type(i).__name__, getattr(i, "sizes", None), getattr(i, "strides", None),
                                 str(getattr(i, "dtype", ""))) if hasattr(i, "sizes") else repr(i)
                                for i in p.typed[1].inputs])
        stack.extend(e.children)
    t5 = time.perf_counter()
    print(f"event tree: {n} nodes walked in {t5 - t4:.2f} s, by tag {by_tag}, kineto events under a TorchOp: "
          f"{kin_under_op}")
    print("example:", example)
    t6 = time.perf_counter()
    prof.export_chrome_trace(str(Path(tempfile.mkdtemp()) / "t.json"))
    print(f"trace export {time.perf_counter() - t6:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
