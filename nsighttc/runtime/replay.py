"""Launch the kernels a program ran, without the program: ``python -m nsighttc.runtime.replay --ops OPS.json``.

The default ``profile`` run needs hardware evidence (Nsight Compute) for the matrix-work kernels its
timeline found. Running the program again under ncu costs as much as the program up to the last new kernel
(a program whose later phases bring new GEMMs runs almost whole, every launch serialised). But a kernel is
chosen by the operator that launched it, from its arguments: cuBLAS/cuDNN heuristics see the shapes,
strides, dtypes and flags, not the values. The timeline (torch.profiler with ``record_shapes``) recorded
those for the operator around each launch (``parse.kineto_ops``); this process calls the same operators
again on random data, inside an NVTX range ``nsighttc-replay`` that ncu is told to profile. A kernel
measured here is the same function (same name, same library, same GPU and driver) as in the program: its
Tensor Core counters are the program's. Whatever this process does not launch (another algorithm chosen,
an operator it cannot rebuild, a CUDA graph or a compiled kernel with no operator) is left to ncu on the
program itself; nothing is assumed from a near miss: evidence is matched by exact kernel name.

Like ``nsighttc.runtime.launch``, it starts while the timeline pass runs and waits at a gate (``--wait-for``), so
the interpreter, torch's import, ncu's start-up and the set-up of ncu's first profile (``WARM_RANGE``) are off
the critical path; once the gate opens, the calls
are made as nsighttc lists them (``read_calls``: JSON lines appended while the trace is still written).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .lines import say
from .replay_args import call_op, in_safe_order, make_tensor, prepare
from .replay_settings import set_globals, settings

from ..record_format import REPLAY_RANGE as RANGE, WARM_RANGE  # noqa: F401 - (WARM_RANGE: the warm-up's profile)

OPS_WAIT_S = 120.0
CALLING = "nsighttc.replay: calling "  # printed before each call


class _profiled:
    """The NVTX range ncu profiles, around the operator alone (its inputs are made and filled before)."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def __enter__(self):
        self.torch.cuda.synchronize(self.device)
        self.torch.cuda.nvtx.range_push(RANGE)

    def __exit__(self, *exc):
        try:
            self.torch.cuda.synchronize(self.device)
        finally:
            self.torch.cuda.nvtx.range_pop()
        return False


def replay(calls: list[dict], device_index: int = 0, log=sys.stderr, flags: dict | None = None) -> dict:
    """Call each operator (inside the NVTX range ncu profiles); what could not be called is reported and
    skipped. Returns counts for the log. ``flags``: the program's switches (``backend_flags``, set already); a call
    whose kernel they choose by timing is made once outside the range first (``backend_flags.autotuned``)."""
    import torch
    from .backend_flags import autotuned
    flags = flags or {}
    done = failed = 0
    t0 = time.monotonic()
    for call in in_safe_order(torch, calls):
        waited = time.monotonic()  # the list may still be growing: the call's arrival, for the log
        # the device the recording's rank used (another rank's recording may hold the call: ``replay_plan.write_ops``),
        # where this process sees it
        index = int(call.get("device", device_index) or 0)
        device = torch.device("cuda", index if index < torch.cuda.device_count() else device_index)
        # said before the call: should it crash the process, nsighttc names it (``CALLING``)
        print(f"{CALLING}{call['name']}", file=log, flush=True)
        for s in settings(call):
            try:
                with set_globals(torch, s), torch.no_grad():
                    prepared = prepare(torch, call, device)
                    tuned = autotuned(call, flags)
                    if tuned:  # the algorithms tried, unprofiled; the profiled call runs the one kept
                        call_op(torch, call, device, prepared)
                    made = time.monotonic()
                    overload = call_op(torch, call, device, prepared, around=lambda: _profiled(torch, device))
                done += 1
                # (its inputs' making apart: what a slow call spent before ncu's profiles)
                print(f"nsighttc.replay: +{waited - t0:.3f}s {call['name']}.{overload} {s or ''} "
                      f"({time.monotonic() - waited:.3f} s; inputs{' and autotuning' if tuned else ''} "
                      f"{made - waited:.3f} s)", file=log)
            except Exception as exc:
                failed += 1
                print(f"nsighttc.replay: could not call {call['name']}: {str(exc).splitlines()[0][:200]}", file=log)
    return {"called": done, "failed": failed}


# The warm-up's convolutions, outside any profiled range: a call that brings cuDNN kernels no earlier call loaded
# pays their loading inside the replay's time. Seen on two H200s (torch 2.11, DDP ResNet-50 AMP's first runs,
# reports/profile_overhead/torchrun_cost call 27): the replay's first forward convolution, the 3-channel 7x7 first
# layer in channels-last fp16 (cuDNN pads its channels, ``nhwcAddPaddingKernel``, and runs its first-layer kernel),
# took 0.32-0.39 s against 0.015-0.08 s for every later one, wherever it came in the list (0.30 s as the 17th call,
# reports/window call47). Image models start with such a layer.
# Each: (batch, input channels, height = width, output channels, kernel size, stride, channels-last)
WARM_CONVS = ((1, 8, 8, 8, 3, 1, False), (2, 3, 64, 64, 7, 2, True))
WARM_DTYPES = ("float", "c10::Half", "c10::BFloat16")  # the inputs' dtypes ``make_tensor`` fills (randn, then cast)


def warm_up(torch, convs=WARM_CONVS, opened=lambda: False) -> None:
    """Make the CUDA context and load cuBLAS(Lt) and cuDNN with tiny calls, outside the profiled range:
    ~2-3 s under ncu on H100 (context, injection, libraries) that otherwise come after the gate; the inputs are
    made once as the calls make theirs (``make_tensor``), and ``convs`` are run in fp16 and bf16. Then one small
    GEMM inside ``WARM_RANGE``, which ncu also profiles: its first profile's set-up is paid here. Each part is
    only a head start: one that fails (a GPU without bf16 convolutions) is said and the others still run.
    ``opened()``: the gate has opened already (a program shorter than this process' start under ncu): the parts
    that only some lists need are left to the calls that need them, the calls being what is waited for now; the
    context, fp16/fp32 cuBLAS and cuDNN and the profiled GEMM, which every list pays, are made all the same."""
    def part(what: str, fn, some_lists: bool = False) -> None:
        if some_lists and opened():
            return
        try:
            with torch.no_grad():
                fn()
        except Exception as exc:  # the calls themselves report real problems
            say(f"nsighttc.replay: warm-up ({what}): {str(exc).splitlines()[0][:200]}")

    def gemm(dt):
        a = torch.ones(16, 16, device="cuda", dtype=dt)
        a @ a

    def inputs():
        for name in WARM_DTYPES:
            make_tensor(torch, name, [4, 4], None, "cuda")

    def conv(shape, dt):
        n, c, hw, k, ks, stride, channels_last = shape
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        x = torch.ones(n, c, hw, hw, device="cuda", dtype=dt).to(memory_format=fmt)
        w = torch.ones(k, c, ks, ks, device="cuda", dtype=dt).to(memory_format=fmt)
        torch.nn.functional.conv2d(x, w, stride=stride, padding=ks // 2)

    for dt in (torch.float16, torch.float32, torch.bfloat16):
        part(f"GEMM {str(dt).replace('torch.', '')}", lambda: gemm(dt), some_lists=dt == torch.bfloat16)
    if torch.backends.cudnn.is_available():  # (the first one: cuDNN's loading, which every convolution pays)
        for i, shape in enumerate(convs):
            for dt in (torch.float16, torch.bfloat16):
                part(f"convolution {shape} {str(dt).replace('torch.', '')}", lambda: conv(shape, dt),
                     some_lists=i > 0 or dt != torch.float16)
    part("inputs", inputs, some_lists=True)

    def profiled():
        a = torch.ones(256, 256, device="cuda", dtype=torch.float16)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(WARM_RANGE)
        try:
            a @ a
            torch.cuda.synchronize()
        finally:
            torch.cuda.nvtx.range_pop()
    part("profiled GEMM", profiled)
    try:
        torch.cuda.synchronize()
    except Exception as exc:
        say(f"nsighttc.replay: warm-up: {str(exc).splitlines()[0][:200]}")


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nsighttc.runtime.replay", description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=Path, required=True, help="the operators to call (JSON list; written by nsighttc)")
    ap.add_argument("--wait-for", type=Path, help="wait until FILE says 'go' (replay) or 'stop' (exit 0 at once)")
    ap.add_argument("--backend-flags", type=Path,
                    help="the program's kernel-choosing switches (JSON, written by its launcher: "
                         "nsighttc.runtime.backend_flags), set before the first call where the file exists by then")
    ap.add_argument("--gate-at", choices=["start", "warm"], default="start",
                    help="wait before CUDA is touched (start), or once the CUDA context exists and cuBLAS/cuDNN "
                         "are loaded (warm: a few tiny kernels outside the profiled range)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = _parse(sys.argv[1:] if argv is None else argv)
    import torch  # the import is the slow part: done before the gate
    from .gate import said as _said, wait_at_gate as _wait_at_gate
    if ns.gate_at == "warm" and torch.cuda.is_available():
        warm_up(torch, opened=lambda: ns.wait_for is not None and _said(ns.wait_for))
    if ns.wait_for is not None and not _wait_at_gate(ns.wait_for):
        return 0
    if not torch.cuda.is_available():
        say("nsighttc.replay: no CUDA device")
        return 3
    t_gate = time.monotonic()
    torch.zeros(1, device="cuda")  # the context (and ncu's set-up of it) before the list arrives
    try:
        calls = read_calls(ns.ops)
        first = next(calls, None)
    except TimeoutError as exc:
        say(f"nsighttc.replay: {exc}")
        return 4
    t_list = time.monotonic()
    from . import backend_flags
    flags = backend_flags.read(ns.backend_flags)  # (written before the list: where the operators' recording stopped)
    set_now = backend_flags.apply(torch, flags)
    if set_now:
        say(f"nsighttc.replay: the program's switches: {', '.join(set_now)}")
    counts = replay(_chain(first, calls), flags=flags)
    say(f"nsighttc.replay: {counts['called']} call(s) made, {counts['failed']} could not be made; the list came "
          f"{t_list - t_gate:.2f} s after the gate, the calls took {time.monotonic() - t_list:.2f} s")
    return 0


def _chain(first, rest):
    if first is not None:
        yield first
        yield from rest


def read_calls(path: Path, wait_s: float = OPS_WAIT_S, poll_s: float = 0.005):
    """The operator calls to make, as they come: a JSON list written at once, or JSON lines that nsighttc
    appends while it still plans (``profile.replay_plan.StreamPlan``) and ends with ``{"end": true}``; the
    calls already listed run meanwhile. ``TimeoutError`` when the file does not appear within ``wait_s``; a
    list that stops growing for ``wait_s`` (or whose nsighttc is gone) ends with the calls it had."""
    from .gate import owner_alive as _owner_alive
    deadline = time.monotonic() + wait_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(poll_s)
    polls = 0
    with path.open("rb") as fh:
        pending = b""
        while True:
            chunk = fh.read()
            if chunk:
                pending += chunk
                deadline = time.monotonic() + wait_s
                if pending.lstrip()[:1] == b"[":  # a whole list, written atomically
                    yield from json.loads(pending)
                    return
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    entry = json.loads(line)
                    if entry.get("end"):
                        return
                    yield entry
                continue
            polls += 1
            if time.monotonic() > deadline or (polls % 200 == 0 and not _owner_alive()):
                say(f"nsighttc.replay: {path}: the list did not end; stopping after the calls made")
                return
            time.sleep(poll_s)


def _exit_now(code: int) -> None:
    """End the process without the interpreter's shutdown and C++ static destructors: every profile is already
    with ncu (its ==PROF== line is printed as each kernel is measured). From the replay's end to ncu's exit:
    0.90-1.04 s with that shutdown, 0.24-0.30 s without (H100, ResNet-50 AMP's 39 calls, 58 profiles in the report
    both ways: benchmarks/probes/gpu_replay_tail_probe.sh, reports/profile_overhead/replay_tail_probe.txt)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
