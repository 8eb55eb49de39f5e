"""Findings from the timeline: each cause of idle GPU time that matters, turned into a fix.

Findings are drawn per phase (step family) whose verdict is CPU-bound or mixed, or from the window when
the program has no steps, so a program of several phases gets the fix of each slow phase.
"""
from __future__ import annotations

import re

from ...durations import duration
from ...model import Finding
from ..kernel_keys import short_kernel
from .base import TimelineResult
from . import in_use as in_use_mod, per_item
from .idle import frame_words
from .idle.causes import top_host_row
from .steps import shape_costs
from .steps.steady import BEFORE_WINDOW
from .state_findings import CHECKPOINT_FIX, EVERY_STEP_COPIES_FIX, checkpoint_finding
from .launch_advice import launch_fix

FINDING_SHARE = 0.2  # a cause (or a host-frames row) holding this share of a scope's idle time gets a finding
DATA_WORDS = re.compile(r"data|load|batch|prep|augment|collate|fetch|decode", re.I)


WINDOW_SCOPE = in_use_mod.WINDOW_SCOPE  # the scope name of a program without steps (analysis.gain)
# The hooks' marks around the main model's calls (runtime.steps): host time inside them with the GPU idle is the
# model's own Python launching its kernels one by one, which CUDA graphs remove with the launch gaps themselves.
MODEL_CALL_MARKS = ("nsighttc.forward", "nsighttc.prefill", "nsighttc.decode")
# Where the batch's number of rows is what changes (a server's dynamic batching), the padding rows must not bring in an
# attention mask the unpadded batch had none of: transformers skips the mask of a batch with no padding token
# (``masking_utils._ignore_bidirectional_mask_sdpa``: "allowing to dispatch to the flash attention kernel"), so rows of
# no tokens move every call onto a masked attention kernel. H200, BERT-base fp16, 1-64 requests of 128 tokens bucketed
# to 16/32/64 rows (``wrappers/varlen_infer.py --vary batch --bucket``, reports/steps_time novel8): filler rows 3,439
# and 3,448 requests/s; rows of no tokens 1,215 on a fresh machine's first run (its kernel compiled), 2,292 the next.
PAD_TO_FEW = ("Give the model a few input shapes, not one per batch: pad (or bucket) each batch to one of a few "
              "lengths (`pad_to_multiple_of=64` in a tokenizer's padding, or batches grouped by length), and where "
              "the number of requests in a batch is what changes, to a few batch sizes with filler requests (give "
              "them a full attention mask: rows of no tokens make transformers pass a mask it skips for a batch "
              "without padding, and attention leaves its flash kernel)")
SHAPE_FIX = (PAD_TO_FEW + "; for compiled code mark the changing dimension dynamic (`torch.compile(model, "
             "dynamic=True)`, `torch._dynamo.mark_dynamic(x, 1)`), else each new shape recompiles. No CUDA graphs or "
             "`reduce-overhead` here: a graph replays one shape, and these change.")
# ... where the steps recorded CUDA graphs at their shapes (``slow.capture_times``): the program already replays graphs,
# one per shape, and pays a recording for each.
SHAPE_FIX_CAPTURES = (PAD_TO_FEW + ". The program records a CUDA graph for each shape ({n} recorded in these steps; "
                      "`torch.compile(mode=\"reduce-overhead\")` records one at a shape's second call and runs its "
                      "first eagerly), so a few shapes also mean a few graphs; with shapes that keep changing, "
                      "`mode=\"max-autotune-no-cudagraphs\"` or the default mode with the dimension dynamic "
                      "(`torch._dynamo.mark_dynamic(x, 1)`) records none.")


def shape_churn_finding(f: dict) -> Finding | None:
    """The loop's steps at new input shapes (``steps.slow``): what they cost beyond a step at a known shape, which
    kernels were first launched there, and the fix (a few shapes)."""
    acc = f.get("shape_churn")
    if not acc:
        return None
    share = acc["new_shape_excess_ns"] / acc["loop_ns"]
    per = acc["new_shape_excess_ns"] / max(acc["new_shape_steps"], 1)
    kernels = [k["name"] for k in acc.get("new_shape_kernels") or []]
    named = (", first launched there: " + ", ".join(f"`{short_kernel(k)}`" for k in kernels[:2])) if kernels else ""
    return Finding(
        "shape-churn", "high" if share >= 0.3 else "medium",
        f"New input shapes hold {100 * share:.0f}% of `{f['name']}`'s time",
        f"{acc['new_shape_steps'] - int(acc.get('capture_steps') or 0)} of {acc['steps']} steady steps ran at an "
        f"input shape the recording had not seen before (each launched a kernel configuration first seen "
        f"there{named})" + _captures(acc) + f"; they took {duration(per)} more each than "
        f"a step at a known shape ({duration(acc['base_ns'])}; the median step {duration(acc['median_ns'])}): "
        f"{duration(acc['new_shape_excess_ns'])} of the loop's {duration(acc['loop_ns'])} (its mean step "
        f"{duration(acc['mean_ns'])}); the host prepares each new shape "
        "(a cuDNN/cuBLAS plan, autotuning, a recompilation) while the GPU idles" + shape_costs.evidence_words(acc),
        (SHAPE_FIX_CAPTURES.format(n=acc["capture_steps"]) if acc.get("capture_steps") else SHAPE_FIX)
        + shape_costs.fix_words(acc), acc["new_shape_excess_ns"], kernels, per_step_ns=None)


def _captures(acc: dict) -> str:
    """', and 7 at a shape seen once before recorded a CUDA graph for it (...)' where steps recorded graphs."""
    n = acc.get("capture_steps") or 0
    return (f", and {n} at a shape seen once before recorded a CUDA graph for it "
            f"({duration(acc.get('capture_excess_ns') or 0.0)} beyond a step at a known shape)") if n else ""


DATA_FIX = ("Load and preprocess in parallel: `DataLoader(ds, num_workers=8, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=4)`; move host preprocessing off the critical path "
            "(GPU transforms, or pre-processed data), and do not compute in numpy float16 on the CPU "
            "(it is emulated and slow): preprocess in float32 and cast on the GPU.")
# What the host's stacks say it was doing (host_topics.TOPICS) -> (finding id, severity, what to do). "forward" and
# "backward" are the model's Python launching kernels one by one: the launch-bound fix of the workload.
TOPIC_FIX = {
    "data": ("gpu-starved-by-data-loading", "high", DATA_FIX),
    "optimizer": ("host-bound-optimizer-step", "high",
                  "Step the optimizer in a few large kernels, not a Python loop over parameters: "
                  "`torch.optim.AdamW(params, fused=True)` (or `foreach=True`); with AMP, GradScaler's unscale and "
                  "inf checks then run fused too. `nsighttc try --variant compile` measures a compiled step."),
    "logging": ("per-step-logging", "medium",
                "Log less often (every N steps: `logging_steps`, `log_every_n_steps`), and keep values on the GPU "
                "until then: each tensor logged is read back with a synchronising copy."),
    "checkpoint": ("host-bound-checkpoint", "high", CHECKPOINT_FIX),
    "sync": ("synchronising-line", "high",
             "This line waits for the GPU (`.item()`, `.cpu()`, `.tolist()`, `print(tensor)`, `synchronize()`): keep "
             "the value on the GPU and read it once every N steps, or copy with `non_blocking=True` into pinned "
             "memory; `torch.cuda.set_sync_debug_mode(\"warn\")` points at each such call."),
}


def _topic(c: dict) -> str | None:
    """The kind of work most of a cause's host samples were doing (half of them at least), else its top frame's."""
    topics = c.get("topics") or {}
    if topics:
        t, share = max(topics.items(), key=lambda kv: kv[1])
        if share >= 0.5:
            return t
    return (c.get("frames") or [{}])[0].get("topic")


def _frames_words(c: dict) -> str:
    """A cause's top host frames with their shares, and the program's line they ran under."""
    parts = []
    for f in c.get("frames") or []:
        src = f" `{f['source']}`" if f.get("source") else ""
        parts.append(f"{frame_words(f)}{src} {100 * f['share']:.0f}%")
    prog = (c.get("frames") or [{}])[0].get("program_line")
    return "; ".join(parts) + (f" (the program's line: {prog})" if prog else "")


def workload(res: TimelineResult) -> str:
    """"generation" (the hooks saw decode calls), "training" (optimizer steps, a backward pass or their kernels in
    the recording: ``TimelineResult.training``), else "inference"."""
    if res.inference:
        return "generation"
    if res.training is not None:
        return "training" if res.training else "inference"
    src = (res.steps or {}).get("name") or ""
    return "inference" if src in ("model calls", "DataLoader iterations") else "training"


def _is_model_call(path: str) -> bool:
    """A range path whose innermost range is a main-model call mark (``prog.py/nsighttc.forward``)."""
    return path.rsplit("/", 1)[-1] in MODEL_CALL_MARKS


def _launch_with_model_host_time(causes: list[dict]) -> tuple[list[dict], bool]:
    """The launch-overhead cause with the idle time the host spent inside the main model's calls (``MODEL_CALL_MARKS``)
    added, and whether it was: both are the model's Python issuing kernels one at a time, and a CUDA graph removes
    both."""
    model = [c for c in causes if c["kind"] == "host-range" and _is_model_call(c["name"])]
    launch = next((c for c in causes if c["kind"] == "launch-overhead"), None)
    if not model or launch is None:
        return causes, False
    extra = sum(c["idle_ns"] for c in model)
    merged = dict(launch, idle_ns=launch["idle_ns"] + extra,
                  detail=launch["detail"] + f"; and {duration(extra)} more while the host ran the model's own "
                                            f"calls ({', '.join(c['name'] for c in model)}) with the GPU idle")
    return sorted([merged] + [c for c in causes if c is not launch], key=lambda c: -c["idle_ns"]), True


def _scopes(res: TimelineResult) -> list[tuple[str, str, str, list[dict], int, list[dict]]]:
    """(label, name, verdict, causes, steady steps, host-frames rows) of every scope that is judged: each step family,
    else the window (one "step")."""
    if res.families:
        return [(f"`{f['name']}`", f["name"], f["verdict"], f.get("causes") or [],
                 max(f["count"] - f["warmup_steps"], 1), f.get("host_frames") or []) for f in res.families]
    return [("the profiled window", WINDOW_SCOPE, res.verdict, res.causes, 1, [])]


def _host_frames_finding(add, c: dict, label: str, verdict: str, share: float, cost: dict, work: str,
                         fix: str | None = None) -> None:
    """A host-range cause whose samples say where the host was: the finding names the frame, and its fix follows what
    the frame was doing (``TOPIC_FIX``; the model's own forward or backward: the workload's launch fix). Its time is
    the part of the cause's idle time spent on that kind of work."""
    top = c["frames"][0]
    topic = _topic(c)
    fix = fix if fix is not None else launch_fix(work, {}, {})
    part = (c.get("topics") or {}).get(topic, 1.0) if topic else 1.0
    idle = c["idle_ns"] * part
    evidence = (f"in {label} ({verdict}): {duration(c['idle_ns'])} of GPU idle time in steady state "
                f"({100 * share:.0f}% of it) with the host in `{c['name']}`; its stacks ({c.get('samples', 0)} samples "
                f"taken while the GPU idled) were in {_frames_words(c)}")
    if topic in TOPIC_FIX:
        fid, sev, fix = TOPIC_FIX[topic]
        what = {"data": "loads data", "optimizer": "steps the optimizer", "logging": "logs",
                "sync": "waits for the GPU", "checkpoint": "saves a checkpoint"}[topic]
        add(topic, c["name"], Finding(fid, sev, f"The GPU waits while the host {what} in {frame_words(top)}",
                                      evidence, fix, idle, []), {k: v * part for k, v in cost.items()})
    elif topic in ("forward", "backward"):
        add("host", c["name"], Finding(
            "host-bound-model-code", "high", f"The GPU waits while the host runs the model's {topic} in "
            f"{frame_words(top)}", evidence + ": the model's Python issues its kernels one at a time, slower than "
            "the GPU runs them", fix, idle, []), {k: v * part for k, v in cost.items()})
    else:
        add("host", c["name"], Finding(
            "gpu-idle-during-host-range", "medium", f"The GPU idles while the host runs {frame_words(top)}", evidence,
            "Overlap this host work with GPU work (DataLoader workers, a background thread), move it to the GPU, or "
            "cut it; the frames above say which code it is (host_idle_stacks.collapsed in the run directory opens in "
            "speedscope).", c["idle_ns"], []), cost)


def findings(res: TimelineResult) -> list[Finding]:
    out: list[Finding] = []
    seen: dict[tuple[str, str], Finding] = {}

    def add(key: str, name: str, f: Finding, cost: dict[str, float]) -> None:
        """One finding per cause; the same cause in several phases adds its cost in each to it."""
        f = seen.setdefault((key, name), f)
        if f not in out:
            out.append(f)
        f.per_step_ns = {**(f.per_step_ns or {}), **cost}

    sync_top = []
    copies = {f["name"]: f["host_copy_bytes_per_step"] for f in res.families if f.get("host_copy_bytes_per_step")}
    work = workload(res)
    churn = {f["name"] for f in res.families if f.get("shape_churn")}
    for f in res.families:
        sc = shape_churn_finding(f)
        if sc is not None:
            out.append(sc)
    ck = checkpoint_finding(res)
    if ck is not None:
        out.append(ck)
    for label, scope, verdict, causes, n_steady, rows in _scopes(res):
        fix = launch_fix(work, res.in_use, res.graphs, scope, shapes_change=scope in churn)
        if verdict not in ("cpu-bound", "mixed") or not causes:
            continue
        idle_total = sum(c["idle_ns"] for c in causes) or 1.0
        causes, folded = _launch_with_model_host_time(causes)
        host_found = False
        for c in causes:
            share = c["idle_ns"] / idle_total
            if share < FINDING_SHARE or c["idle_ns"] <= 0:
                continue
            host_found = host_found or c["kind"] in ("host-range", "launch-overhead")
            cost = {scope: c["idle_ns"] / n_steady}
            if folded and c["kind"] == "host-range" and _is_model_call(c["name"]):
                continue  # the model's own launching: the launch-bound finding holds it (and its fix)
            if c["kind"] == "host-range" and c.get("frames"):
                _host_frames_finding(add, c, label, verdict, share, cost, work, fix)
            elif c["kind"] == "host-range" and DATA_WORDS.search(c["name"].rsplit("/", 1)[-1]):
                add("data", c["name"], Finding(
                    "gpu-starved-by-data-loading", "high", f"The GPU waits for the host in `{c['name']}`",
                    f"in {label} ({verdict}): {duration(c['idle_ns'])} of GPU idle time in steady state "
                    f"({100 * share:.0f}% of it): {c['detail']}", DATA_FIX, c["idle_ns"], []), cost)
            elif c["kind"] == "host-range" and copies.get(scope):
                mb = copies[scope] / 1e6
                add("host", c["name"], Finding(
                    "host-copies-every-step", "high", f"The GPU idles while the host works in `{c['name']}`, each step "
                    f"copying {mb:,.1f} MB to the host", f"in {label} ({verdict}): {c['detail']} ({100 * share:.0f}% "
                    f"of the idle time); the GPU copied {mb:,.1f} MB to the host in the median step (the model's state "
                    "is that large: a checkpoint saved every step, or large tensors read back every step)",
                    EVERY_STEP_COPIES_FIX, c["idle_ns"], []), cost)
            elif c["kind"] == "host-range":
                add("host", c["name"], Finding(
                    "gpu-idle-during-host-range", "medium", f"The GPU idles while the host works in `{c['name']}`",
                    f"in {label} ({verdict}): {c['detail']} ({100 * share:.0f}% of the idle time)",
                    "Overlap this host work with GPU work (DataLoader workers, a background thread), move it to "
                    "the GPU, or cut it; when the range is the step itself, py-spy shows where the host time goes "
                    "(and see launch overhead / synchronising calls).", c["idle_ns"], []), cost)
            elif c["kind"] == "launch-overhead":
                add("launch", label, Finding(
                    "launch-bound", "high", f"Launch-bound in {label}: the host cannot issue kernels as fast as the "
                    "GPU runs them", f"{c['detail']}: {duration(c['idle_ns'])} of idle time ({100 * share:.0f}%)",
                    fix, c["idle_ns"], []), cost)
            elif c["kind"] == "sync":
                sync_top.append((label, c, share, cost))
            elif c["kind"] == "pageable-copy":
                add("pageable", label, Finding(
                    "pageable-host-copies", "medium", f"Pageable host-to-device copies stall {label}",
                    c["detail"], "Pin the source: `DataLoader(..., pin_memory=True)` or `tensor.pin_memory()`, "
                    "then `x.to('cuda', non_blocking=True)`.", c["idle_ns"], []), cost)
        row = top_host_row(rows)
        if not host_found and row is not None and row["share"] >= FINDING_SHARE:
            # The top host-frames row (one frame, whichever ranges its samples fell in; the headline's host cause where
            # the first cause is the host's) gets its finding where each range it spans is under the bar: two H200s,
            # FSDP2, a rank host-bound in the backward (34% of its time without compute in one frame, 18% in its
            # largest range) had a headline and no fix.
            c = {"name": frame_words(row), "idle_ns": row["idle_ns"], "frames": [row],
                 "topics": {row["topic"]: 1.0} if row.get("topic") else {}, "samples": row.get("samples", 0)}
            _host_frames_finding(add, c, label, verdict, row["share"], {scope: row["idle_ns"] / n_steady}, work, fix)
    sync = res.sync
    if sync.get("calls"):
        top = ", ".join(f"{n} ×{v['calls']}" for n, v in sorted(sync["by_name"].items(), key=lambda x: -x[1]["calls"]))
        where = ", ".join(f"`{r}` ×{v['calls']}" for r, v in sorted(sync["by_range"].items(), key=lambda x: -x[1]["calls"])[:3])
        cost = "; ".join(f"in {label} they cost {duration(c['idle_ns'])} of GPU idle time ({100 * s:.0f}%)"
                         + (f", waiting at {_frames_words(c)}" if c.get("frames") else "")
                         for label, c, s, _ in sync_top)
        out.append(Finding(
            "synchronising-calls", "high" if sync_top else "low",
            "Synchronising calls stall the launch queue" if sync_top else "Synchronising calls",
            f"{sync['calls']} calls over the run ({top}) in {where}; host blocked {duration(sync['host_blocked_ns'])}; "
            f"{sync['dtoh_copies']} device-to-host copies" + (f"; {cost}" if cost else ""),
            "Remove per-step syncs: avoid `.item()`, `.cpu()`, `print(tensor)` and `torch.cuda.synchronize()` "
            "inside the loop (accumulate on the GPU, read once per epoch); use `non_blocking=True` copies; "
            "`torch.cuda.set_sync_debug_mode(\"warn\")` points at each one.",
            max([c["idle_ns"] for _, c, _, _ in sync_top] or [sync["host_blocked_ns"]]), [],
            per_step_ns={k: v for *_, per in sync_top for k, v in per.items()} if sync_top else None))
    pg = res.pageable
    if pg.get("copies") and not any(f.id == "pageable-host-copies" for f in out):
        out.append(Finding(
            "pageable-host-copies", "low", "Host-to-device copies from pageable memory",
            f"{pg['copies']} copies, {pg['bytes'] / 1e6:.3g} MB, {duration(pg['ns'])} on the GPU; pageable copies "
            "are staged by the driver and block the host",
            "Pin the source: `DataLoader(..., pin_memory=True)` or `tensor.pin_memory()`, then "
            "`x.to('cuda', non_blocking=True)`.", pg["ns"], []))
    gr = res.graphs
    if gr.get("trace") == "graph":
        out.append(Finding(
            "cuda-graphs-traced-whole", "info", "CUDA graphs were traced as whole graphs",
            f"{gr['launches']} graph launches held {100 * gr['share_of_gpu_busy']:.0f}% of GPU busy time; their "
            "kernels have no names in this recording, so their Tensor Core use is unknown",
            "Record graph nodes one by one: `nsys profile --cuda-graph-trace=node ...` (what `nsighttc profile` "
            "does), or use the torch engine.", 0.0, []))
    warm = [f for f in res.families if f.get("warmup_steps")]
    if warm:
        def why(f: dict) -> str:  # the launcher's window says where the steady steps began; else the rule's causes
            if any(BEFORE_WINDOW in r for r in f.get("warmup_reasons") or []):
                return "before the window of steady steps nsighttc chose"
            return "one-time CUDA/cuBLAS/autograd initialisation"
        lst = "; ".join(f"`{f['name']}`: {f['warmup_steps']} step(s) of "
                        + ", ".join(f"{duration(x)}" for x in f["warmup_ns"][:3])
                        + f" before a median of {duration(f['median_iteration_ns'])} ({why(f)})" for f in warm)
        out.append(Finding(
            "warm-up-excluded", "info", "Warm-up steps were left out", lst,
            "Nothing to fix; profile more steps after warm-up (e.g. `torch.profiler.schedule(wait=1, warmup=2, "
            "active=5)`) for steadier numbers.", 0.0, []))
    per_item.merge((res.host_frames or {}).get("rows"), out)  # a one-input call's parts: one finding
    return out
