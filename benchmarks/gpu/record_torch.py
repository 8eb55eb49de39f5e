#!/usr/bin/env python3
"""Record a whole program with torch.profiler as a user does it by hand (no nsighttc): CPU and CUDA activities, input
shapes, no schedule, the Chrome trace exported at the end. The recordings of programs whose time is not in a typical
step (``gpu_steps_time.sh``) are made this way beside nsighttc's own runs.

    python3 benchmarks/gpu/record_torch.py [--cuda-only] OUT.json PROGRAM.py [ARGS...]

``--cuda-only``: the CUDA activity alone (``activities=[ProfilerActivity.CUDA]``): kernels, copies and the runtime calls
that launched them, no operators and no ranges, as a user who asks for the GPU's side only records it.
"""
import runpy
import sys


def main() -> None:
    argv = sys.argv[1:]
    cuda_only = argv[:1] == ["--cuda-only"]
    out, program, args = argv[cuda_only], argv[cuda_only + 1], argv[cuda_only + 2:]
    from torch.profiler import ProfilerActivity, profile
    sys.argv = [program, *args]
    activities = [ProfilerActivity.CUDA] if cuda_only else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities, record_shapes=not cuda_only) as prof:
        try:
            runpy.run_path(program, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
    prof.export_chrome_trace(out)
    print(f"record_torch: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
