"""A GPU-bound step family that one idle cause still holds back: "mixed", with that cause named (``held_back``).
Run after the causes (and, on rank recordings, the communication) are final."""
from __future__ import annotations

from . import idle


# A step family whose GPU is busy enough to be called GPU-bound is not, while one cause of its idle time holds at least
# this much of its steps: removing that cause alone would make the steps this much faster (1 / (1 - share) >= 1.1x).
# the same Trainer program (a dataset built in Python) measured 69% busy on one H100 run and 80% on the next,
# "mixed" with its data loading named, then "GPU-bound" with no cause, while DataLoader workers made plain runs 1.22x
# faster; a threshold on the busy share alone flips on run-to-run noise and hides the cause.
HELD_BACK_GAIN = 1.1
HOLDING_KINDS = ("host-range", "sync", "launch-overhead", "pageable-copy", "communication")


def held_back(f: dict) -> None:
    """A GPU-bound family one of whose idle causes holds its steps back by ``HELD_BACK_GAIN`` or more is "mixed"
    (``held_back_by`` says by what, and how much removing it alone could give), and its headline names that cause."""
    if f.get("verdict") not in ("gpu-bound", "mixed") or f.get("median_verdict", f.get("verdict")) != "gpu-bound" \
            or not f.get("steady_wall_ns"):
        return  # (busy enough by its median step, whether or not three steps in four were: steps.most_steps_agree)
    c = next((c for c in f.get("causes") or () if c["kind"] in HOLDING_KINDS and c["idle_ns"] > 0), None)
    share = c["idle_ns"] / f["steady_wall_ns"] if c else 0.0
    if share <= 0 or 1 / max(1 - share, 1e-9) < HELD_BACK_GAIN:
        return
    f["verdict"] = "mixed"
    f["held_back_by"] = {"kind": c["kind"], "name": c["name"], "step_share": float(share),
                         "gain_up_to": float(1 / (1 - share)), "busy_verdict": "gpu-bound"}
    f["headline_cause"] = idle.headline(f["causes"], f["verdict"], f.get("host_frames"))
