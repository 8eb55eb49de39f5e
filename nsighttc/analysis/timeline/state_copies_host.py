"""Whether the steps read as checkpoints saved anything: the host's stacks in them.

A step that copies 64 MB or more to the host while its GPU computes little is read as a checkpoint
(``steps.slow_causes.checkpoint_steps``) from the recording's copies alone. The bytes do not say why: a loop that keeps
an average of its weights on the host (an EMA on the CPU) or sends them to an evaluator copies as many and saves
nothing (H200, ``wrappers/checkpoint_loop.py --save-mode copy``: 403 MB every 15 steps, 40-45% of the loop's time, read
"Checkpoints hold 45%", first and cached runs, with the advice to save less often). Where the launcher sampled the
host's stacks, they decide: samples in a save (``host_topics``' checkpoint topic: ``torch.save``, distributed checkpoint,
safetensors, Lightning's checkpoint IO), on any thread (a writer thread saves while the loop copies), make them a
checkpoint; enough samples and none of them in one make them copies to the host, named at the program's line where the
samples sat. Too few samples, or none (a recording made by hand), leave the bytes to say it, as before.
"""
from __future__ import annotations

import numpy as np

from ...parse.host_samples import HostSamples
from .. import intervals
from .host_frames import _rows, _short, launching
from .host_topics import stack_topic, topics

SAVE_SHARE = 0.1   # of the steps' samples in a save: a checkpoint (torch.save's steps: 90%+ of them, H200)
MIN_SAMPLES = 10   # fewer samples in the steps say nothing either way (the sampler ticks every 5-10 ms)


def evidence(hs: HostSamples | None, starts: np.ndarray, ends: np.ndarray, tids: set[int] | None) -> dict | None:
    """``{"samples", "save_share", "saved", "program_line", "program_frame"}`` for the host's samples taken in the
    steps ``[starts, ends)``: how many, the share of them (all threads) whose stack is in a save, whether that makes
    the steps a checkpoint (True), copies that saved nothing (False) or cannot tell (None), and where the launching
    threads' samples sat most: those in the save where they saved, else those not loading data; the program's line
    and function, else the library's line that called the save. None without placed samples."""
    if hs is None or not hs.placed or hs.samples.empty or not len(starts):
        return None
    s = hs.samples
    inside = intervals.inside(s["t_ns"].to_numpy(dtype="float64"), starts, ends)
    n = int(inside.sum())
    if not n:
        return {"samples": 0, "save_share": None, "saved": None, "program_line": None, "program_frame": None}
    stack = s["stack"].to_numpy()[inside]
    frame_topic = topics(hs.frames)
    uniq, which = np.unique(stack, return_inverse=True)  # (per distinct stack of these samples: a few hundred)
    in_save = np.array([(frame_topic[hs.stacks[k]] == "checkpoint").any() for k in uniq], dtype=bool)[which]
    fetching = np.array([stack_topic(frame_topic, hs.stacks[k]) == "data" for k in uniq], dtype=bool)[which]
    share = float(in_save.mean())
    saved = True if share >= SAVE_SHARE else (False if n >= MIN_SAMPLES else None)
    mine = launching(hs, tids)[inside]
    # where: the samples of the save itself where it saved, else (copies, or a save on another thread: a writer
    # thread's loop copies) those not fetching the next batch: a step's data loading is no part of its copies (the
    # Trainer's checkpoint steps, H200, held 40-46% in the save and most of the rest in the dataset's __getitem__,
    # which named the save's line before)
    tries = ([mine & in_save] if saved else []) + [mine & ~fetching]
    sel = next((m for m in tries if m.any()), mine)
    line = frame = None
    if sel.any():
        row_of, rows, _ = _rows(hs, stack[sel])
        r = int(np.argmax(np.bincount(row_of[stack[sel]], minlength=len(rows))))
        if isinstance(rows["program_line"].iat[r], str):  # the program's own line
            line, frame = rows["program_line"].iat[r], rows["program_frame"].iat[r]
        elif rows["line"].iat[r]:  # else the site in the library that called it (a Trainer's own save)
            line, frame = f"{_short(rows['file'].iat[r])}:{int(rows['line'].iat[r])}", rows["frame"].iat[r]
    return {"samples": n, "save_share": share, "saved": saved, "program_line": line, "program_frame": frame}


def unsaved(ck: dict | None) -> bool:
    """Whether the host's stacks showed the checkpoint steps (``slow_causes``' ``checkpoint``) saving nothing."""
    return bool(ck) and (ck.get("host") or {}).get("saved") is False
