"""The launcher the engines run: ``python -m nsighttc.launch [options] -- SCRIPT.py [ARGS]`` or
``... -m MODULE [ARGS]``. It runs the user's program unchanged (runpy, as ``python SCRIPT`` would:
``__main__``, ``sys.argv``, ``sys.path[0]``) inside a top-level range, optionally annotating every
``nn.Module`` call, and, for the torch engine, under ``torch.profiler`` with the Kineto trace written
even when the program fails or is interrupted.
"""
from __future__ import annotations

import argparse
import runpy
import signal
import sys
from pathlib import Path


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nsighttc.launch", description=__doc__.split("\n")[0])
    ap.add_argument("--annotate", choices=["none", "script", "modules"], default="script")
    ap.add_argument("--range-name", default=None, help="name of the top-level range (default: the script's name)")
    ap.add_argument("--torch-trace", type=Path, help="run under torch.profiler and write the trace here")
    ap.add_argument("-m", dest="module", help="run a module (like python -m)")
    ap.add_argument("target", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    if ns.target and ns.target[0] == "--":
        ns.target = ns.target[1:]
    if not ns.module and not ns.target:
        ap.error("nothing to run: give SCRIPT.py [ARGS] or -m MODULE [ARGS]")
    return ns


def _run_target(ns: argparse.Namespace) -> None:
    if ns.module:
        sys.argv = [ns.module] + ns.target
        runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    else:
        script = ns.target[0]
        sys.argv = list(ns.target)
        sys.path.insert(0, str(Path(script).resolve().parent))
        runpy.run_path(script, run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    ns = _parse(sys.argv[1:] if argv is None else argv)
    from . import annotate

    name = ns.range_name or (ns.module or Path(ns.target[0]).name)
    top = annotate.range(name) if ns.annotate != "none" else annotate.nothing()
    remove_hooks = None
    prof = None
    # SIGTERM (our timeout) becomes KeyboardInterrupt, so the profiler still writes what it has.
    def _interrupt(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    code = 0
    try:
        if ns.annotate == "modules":
            remove_hooks = annotate.annotate_all_modules()
        if ns.torch_trace:
            import torch
            acts = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False)
            prof.__enter__()
        with top:
            _run_target(ns)
    except SystemExit as exc:  # the script called sys.exit(): keep its code
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        if remove_hooks:
            remove_hooks()
        if prof is not None:
            try:
                import torch
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
            except Exception:
                pass
            prof.__exit__(None, None, None)
            ns.torch_trace.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(ns.torch_trace))
            print(f"nsighttc.launch: wrote {ns.torch_trace}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
