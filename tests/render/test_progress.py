"""Progress lines that suit a CI log (issue 31): the start and end lines, at most one progress line per pass every
10 s, nothing with -q, everything with -v; the lines are the ones a real profile run says (its log)."""
from __future__ import annotations

from nsighttc.render.progress import Progress

# what a multi-phase program's first default run said, in order (a CI log's worth: one replay, 40 kernels)
RUN = (["[torch] running: python -m nsighttc.runtime.launch --annotate script -- wrappers/multi_phase.py",
        "[1/2 timeline: torch] running the program (torch.profiler) ... 0s", "  | phase train_bf16: 160.2 steps/s",
        "[timeline] `multi_phase.py/train_bf16` steady after 5 warm-up steps (6.1 ms/step): recording 100 steps",
        "[1/2 timeline: torch] done in 17.3s", "[2/2 ncu] replaying 18 operator call(s) for 19 of the 19 kernel(s)"]
       + [f"[2/2 ncu] replay: profiled {i} kernel(s) ..." for i in range(1, 41)]
       + [f"[2/2 ncu] profiled {i} kernel(s); {i}/40 of those needed ... {20 + i}s" for i in range(1, 41)]
       + ["[2/2 ncu] replay measured 19 of 19 kernel(s) in 0.8s"])


def _run(level: int, tty: bool = False, step: float = 0.1) -> list[str]:
    out, clock = [], [0.0]

    def tick() -> float:
        clock[0] += step
        return clock[0]
    p = Progress(level, tty=tty, echo=out.append, clock=tick)
    for line in RUN:
        p(line)
    p.close()
    return out


def test_a_log_gets_at_most_one_progress_line_per_pass_every_ten_seconds():
    shown = _run(1)
    assert len(shown) <= 30
    assert "[1/2 timeline: torch] done in 17.3s" in shown and RUN[-1] in shown  # start and end lines stay
    assert not any(s.startswith("  | ") or " running: " in s for s in shown)  # workload output, commands: -v
    # 81 progress lines over 8.1 s of the clock: one per pass (replay, program)
    assert sum(" profiled " in s for s in shown) == 2
    slow = _run(1, step=1.0)  # the same lines over 81 s: one every 10 s per pass
    assert 2 < sum(" profiled " in s for s in slow) <= 2 + 81 // 10


def test_quiet_says_nothing_and_verbose_everything():
    assert _run(0) == []
    assert _run(2) == RUN
