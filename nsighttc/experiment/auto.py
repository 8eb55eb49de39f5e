"""``--variant auto``: the variants the baseline's verdict points to, each with the finding that chose it.

Reads only what the baseline run recorded: its verdict (Tensor Core answer, findings, timeline causes) and
the launcher's record of the program's own settings (DataLoaders left at num_workers=0 / pin_memory=False,
TF32 and cuDNN flags at exit, ``nsighttc.runtime.variants.Applied``) and what the recording shows in use (CUDA
graphs: ``analysis.timeline.in_use``). A variant is chosen only when the program left the setting it changes at the
default, so ``auto`` never proposes what the program already does.
"""
from __future__ import annotations

import os

from ..analysis import kernel_arch, peak
from ..analysis.timeline.steps.slow import NEW_SHAPE_SHARE  # (the shape-churn finding's share, on a plain run)
from ..analysis.variant_gain import adopted

HOST_BOUND = ("cpu-bound", "mixed")


def choose(verdict: dict, record: dict | None, workers: int | None = None,
           plain: dict | None = None) -> list[tuple[str, str]]:
    """[(variant, why)] in the order they should run. ``plain``: the baseline's plain run's steps
    (``experiment.measure.read``), where the step timer saw its inputs' shapes: a profiled window of steady steps
    may start after most new shapes were seen, the plain run holds them all."""
    record = record or {}
    flags = record.get("flags_at_exit") or {}
    loaders = record.get("dataloaders") or {}
    tc = verdict.get("tensor_cores") or {}
    found = {f["id"]: f for f in verdict.get("findings") or []}
    tl = verdict.get("timeline") or {}
    out: list[tuple[str, str]] = []

    def add(name: str, why: str) -> None:
        if name not in [n for n, _ in out]:
            out.append((name, why))

    # (a GPU whose Tensor Cores do fp16 only, a V100 or T4, has no TF32 and runs bf16 on its CUDA cores)
    half_only = peak.fp16_only(kernel_arch.device_cc(verdict.get("device")))
    autocast = "fp16-autocast" if half_only else "bf16-autocast"
    if "fp32-matmul-on-cuda-cores" in found:
        f = found["fp32-matmul-on-cuda-cores"]
        if not flags.get("torch.backends.cuda.matmul.allow_tf32", False) and not half_only:
            add("tf32", f"finding `fp32-matmul-on-cuda-cores`: {f['evidence'][:160]}")
        add(autocast, f"finding `fp32-matmul-on-cuda-cores`: {f['evidence'][:160]}")
    by = tc.get("by_dtype") or {}
    if tc.get("matrix_time_share", 0) >= 0.05 and not ({"fp16", "bf16", "fp8"} & set(by)):
        add(autocast, f"matrix work is {100 * tc['matrix_time_share']:.0f}% of kernel time and none of it "
                             f"runs in fp16/bf16 (Tensor Cores: {tc.get('verdict')}, dtypes: "
                             f"{', '.join(by) or 'none'})")
    host = tl.get("verdict") in HOST_BOUND
    if loaders.get("workers_default") and host:
        n = workers or min(8, os.cpu_count() or 1)
        add(f"workers={n}", f"timeline {tl.get('verdict')} ({tl.get('headline_cause') or 'host-bound'}) and "
                            f"{loaders['workers_default']} DataLoader(s) built with num_workers=0")
    pageable = (tl.get("pageable_copies") or {}).get("copies", 0)
    if loaders.get("pin_memory_default") and (pageable or host):
        add("pin-memory", f"{loaders['pin_memory_default']} DataLoader(s) with pin_memory=False"
                          + (f" and {pageable:,} pageable host-to-device copies" if pageable else
                             f", timeline {tl.get('verdict')}"))
    restarts = (loaders.get("iterators") or 0) - (loaders.get("built") or 0)
    if loaders.get("persistent_default") and restarts > 0:
        # (the workers of a loader iterated again start again: each epoch's first batch waits for all of them)
        add("persistent-workers", f"{loaders['persistent_default']} DataLoader(s) with workers and "
                                  f"persistent_workers=False, iterated {loaders['iterators']} times: their workers "
                                  "start again at each epoch")
    graph_variant = "static-cache" if tl.get("inference") else "compile-reduce-overhead"
    churn = next(((p, ph) for p, ph in (plain or {}).items()
                  if (ph.get("new_shape_share") or 0) >= NEW_SHAPE_SHARE), None)
    if "launch-bound" in found and host and not adopted(verdict, graph_variant) and "shape-churn" not in found \
            and churn is None:
        # CUDA graphs remove the launch gaps: for generate(), a static KV cache; never offered where the recording
        # shows graphs replayed already (only variants that change something)
        why = f"finding `launch-bound`: {found['launch-bound']['evidence'][:160]}"
        add(graph_variant, why)
    if "shape-churn" in found:
        # a few input shapes instead of one per batch (a tokenizer's padding from the launcher; `fix` also edits
        # padding written by hand); never a CUDA-graph variant for a loop whose shapes keep changing
        add("pad-buckets", f"finding `shape-churn`: {found['shape-churn']['evidence'][:160]}")
    elif churn is not None:
        p, ph = churn
        add("pad-buckets", f"the plain run's `{p}` steps: the main model's inputs took {ph['shapes']} shapes, and the "
                           f"slow steps at a new one held {100 * ph['new_shape_share']:.0f}% of the loop beyond a "
                           "typical step")
    if "nchw-layout-transposes" in found:
        add("channels-last", f"finding `nchw-layout-transposes`: {found['nchw-layout-transposes']['evidence'][:160]}")
    convs = [k for k in verdict.get("kernels") or [] if any(w in k["name"].lower() for w in
                                                                 ("conv", "fprop", "dgrad", "wgrad"))]
    if convs and not flags.get("torch.backends.cudnn.benchmark", False):
        share = sum(k.get("time_share") or 0 for k in convs)
        add("cudnn-benchmark", f"{len(convs)} convolution kernels ({100 * share:.0f}% of kernel time) with "
                               "torch.backends.cudnn.benchmark off")
    return out
