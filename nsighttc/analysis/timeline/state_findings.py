"""The loop's state leaving the GPU: checkpoints saved in the loop, copies to the host that save nothing, and a save in
every step. Their findings, their advice and the words the headline says them with (``findings`` calls
``checkpoint_finding``; the per-step findings take ``CHECKPOINT_FIX`` and ``EVERY_STEP_COPIES_FIX``)."""
from __future__ import annotations

from ...durations import duration
from ...model import Finding
from .base import TimelineResult
from . import state_copies_host
from .steps import slow as slow_mod, slow_causes

# What makes a loop's checkpoints rarer, or takes them off its critical path (``checkpoint-in-loop``). Rarer first: an
# asynchronous save still copies the state and writes it while the loop runs. H200, wrappers/checkpoint_loop.py
# (1.2 GB of model and AdamW state every 15 of 60 steps, plain loop 12.4-14.2 s; reports/steps_time/checkpoint):
# every 30 steps 7.2 s (1.72-1.98x), a writer thread with pinned copies 8.6 s (1.44-1.65x), none 2.5 s (5.0-5.8x).
CHECKPOINT_FIX = ("Save less often (every few hundred steps, or by wall time: transformers' Trainer `save_steps`, "
                  "Lightning's `ModelCheckpoint(every_n_train_steps=...)`), and save the optimizer's state only where "
                  "you resume from it (AdamW's is twice the model's). Then take the save off the loop's critical path: "
                  "`torch.distributed.checkpoint.async_save(state_dict, checkpoint_id=...)` (Lightning: "
                  "`AsyncCheckpointIO`), or, writing it yourself, copy the tensors into pinned host buffers with "
                  "`non_blocking=True` (pageable copies stall the host) and call `torch.save` from a thread; the copies "
                  "and the write still share the machine with the loop (on an H200 a writer thread took back 38-48% "
                  "of a 1.2 GB checkpoint's cost, saving half as often 50%).")


# ... where every step copies that much to the host (``slow_causes.copies_per_step``) and the host works while the GPU
# idles, with no host samples to name the call
EVERY_STEP_COPIES_FIX = ("Do it every N steps, not every step: a checkpoint saved each step (`torch.save` of a "
                         "`state_dict()`) or large tensors read back each step (`.cpu()`, `.numpy()`, `.tolist()` to log "
                         "or store them). Keep what you need on the GPU until then; what must leave it, copy into pinned "
                         "host buffers with `non_blocking=True` and write from a thread "
                         "(`torch.distributed.checkpoint.async_save` for a checkpoint). `nsighttc profile` samples the "
                         "host's stacks and names the line.")
# ... where the host's stacks showed those steps saving nothing (``state_copies_host``): large copies to the host every
# few steps (H200, wrappers/checkpoint_loop.py --save-mode copy: the weights averaged on the host every 15 steps, plain
# loop 3.3-4.8 s; every 30 steps 2.6 s, never 1.9 s)
HOST_COPIES_FIX = ("Copy less often, and keep on the GPU what you compute from the copies: an average of the weights "
                   "(an EMA: `AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))` from "
                   "`torch.optim.swa_utils`, kept on the GPU), "
                   "metrics reduced there before one `.item()`, predictions gathered there and moved once. What must "
                   "reach the host, copy into pinned buffers with `non_blocking=True` and use once an event recorded "
                   "after the copies is done, so the loop does not wait for them.")
CHECKPOINT_SHARE = 0.02  # checkpoints holding less of the loop's time than this make no finding (the loop's line says them)


def checkpoint_words(ck: dict, loop_ns: float) -> str:
    """'3 of 22 steady steps copied the model's state to the host (1,208.7 MB in 42 copies, as `torch.save` of a
    `state_dict()` does), 1.43 s beyond the typical step (19.2 ms): 53% of the loop's time'. Where the host's stacks in
    them say whether they saved (``state_copies_host``), that instead of what a save would do."""
    every = f", one every {ck['every_steps']} steps" if ck.get("every_steps") else ""
    host = ck.get("host") or {}
    moved = f"{ck['bytes'] / 1e6:,.1f} MB in {ck['copies']:,} copies"
    at = f" in `{host['program_frame']}` ({host['program_line']})" if host.get("program_line") else ""
    if host.get("saved") is False:
        what = (f"copied {moved} to the host{at} and saved nothing (none of the host's {host['samples']:,} stack "
                "samples in them was in a save)")
    elif host.get("saved"):
        what = (f"copied the model's state to the host ({moved}) and saved it{at} ({100 * host['save_share']:.0f}% of "
                f"the host's {host['samples']:,} stack samples in them in a save)")
    else:
        what = f"copied the model's state to the host ({moved}, as `torch.save` of a `state_dict()` does)"
    return (f"{ck['steps']} step{'s' if ck['steps'] != 1 else ''}{every} {what}, "
            f"{duration(ck['cost_ns'])} beyond the typical step ({duration(ck['base_ns'])}): "
            f"{100 * ck['cost_ns'] / max(loop_ns, 1.0):.0f}% of the loop's time")


def checkpoint_finding(res: TimelineResult) -> Finding | None:
    """The loop's checkpoints (``slow_causes``' ``checkpoint``: slow steps that copied the model's state to the host),
    what they cost beyond the typical step and in what, and the fix: rarer and asynchronous saves. Its gain is on the
    loop's whole time (``wide_gain.checkpoint``): a step's median leaves them out."""
    ck = ((res.loop_time or {}).get("slow_causes") or {}).get("checkpoint")
    fam = res.families[0] if res.families else None
    if not ck or not ck.get("cost_ns") or fam is None:
        return None
    loop = float((fam.get("time_accounting") or {}).get("loop_ns") or 0.0)
    share = ck["cost_ns"] / max(loop, 1.0)
    if share < CHECKPOINT_SHARE:
        return None
    parts = ", ".join(f"{r['words']} {duration(r['ns'])}" for r in ck["causes"] if r["share"] >= 0.05)
    severity = "high" if share >= slow_mod.NEW_SHAPE_SHARE else "medium"
    said = (f"{checkpoint_words(ck, loop)} (the loop: {duration(loop)} over {fam['count'] - fam['warmup_steps']} "
            f"steady steps); their time beyond the typical step went to {parts}.")
    if state_copies_host.unsaved(ck):
        return Finding(
            "host-copies-in-loop", severity, f"Copies to the host hold {100 * share:.0f}% of `{fam['name']}`'s time",
            f"{said} A checkpoint's bytes, but no checkpoint: the host's stacks name the line, not what the program "
            "does with the copies. The per-step findings judge the other steps.",
            HOST_COPIES_FIX, ck["cost_ns"], [], per_step_ns=None)
    evidence = ("" if (ck.get("host") or {}).get("saved") else
                " A recording does not name the call: read as a checkpoint for the bytes "
                f"({slow_causes.STATE_BYTES / 1e6:.0f} MB or more a step) with no computing beside them; a large "
                "read-back of another kind (an evaluation's outputs, weights averaged on the host) looks the same "
                "(`nsighttc profile` samples the host's stacks, which tell them apart).")
    return Finding(
        "checkpoint-in-loop", severity, f"Checkpoints hold {100 * share:.0f}% of `{fam['name']}`'s time",
        f"{said}{evidence} The per-step findings judge the other steps.",
        CHECKPOINT_FIX, ck["cost_ns"], [], per_step_ns=None)
