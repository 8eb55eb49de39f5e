#!/usr/bin/env python3
"""Record a whole program with torch.profiler as a user does it by hand (no nsighttc): CPU and CUDA activities, input
shapes, no schedule, the Chrome trace exported at the end. The recordings of programs whose time is not in a typical
step (``gpu_steps_time.sh``) are made this way beside nsighttc's own runs.

    python3 benchmarks/gpu/record_torch.py OUT.json PROGRAM.py [ARGS...]
"""
import runpy
import sys


def main() -> None:
    out, program, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    from torch.profiler import ProfilerActivity, profile
    sys.argv = [program, *args]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        try:
            runpy.run_path(program, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
    prof.export_chrome_trace(out)
    print(f"record_torch: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
