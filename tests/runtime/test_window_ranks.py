"""The ranks of a distributed job agree on one window (nsighttc/runtime/window_ranks.py): first two windows driven on
our own clocks through torch's real in-memory store, then a torchrun job of two CPU ranks under the launcher, whose
ranks time their steps very differently and must still stop at the same step."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nsighttc.runtime import window as win
from nsighttc.runtime import window_events
from nsighttc.runtime import window_sizing as sizing
from nsighttc.runtime import window_end
from nsighttc.runtime.window_ranks import KEY_PREFIX, RankAgreement

from .test_window import ROOT, Clock

def _rank(store, rank: int, step_s, steps: int, stop: bool = False, recorder=None, **agreement):
    """One rank's window fed ``steps`` hook steps of ``step_s`` seconds each, or of the times ``step_s`` lists
    (ended by ``finish`` unless ``stop``: then by WindowDone, raised here in the test's main thread)."""
    times = list(step_s) if isinstance(step_s, (list, tuple)) else [step_s] * steps
    clock, lines = Clock(), []
    ranks = RankAgreement(group=lambda: (store, rank), emit=lines.append, **agreement)
    w = win.Window(clock=clock, stop=stop, emit=lines.append, ranks=ranks, recorder=recorder)
    for dt in times[:steps]:
        if not w.enabled:
            break
        clock.t += dt
        try:
            w.hook_boundary()
        except window_end.WindowDone:
            break
    return w, ranks, lines


@pytest.mark.torch
def test_every_rank_takes_rank_0s_window_whatever_its_own_step_times():
    import torch.distributed as dist
    store = dist.HashStore()
    # alone, these ranks would choose windows of 20 and 100 steps (2 s of 0.1 s steps, of 0.01 s steps)
    assert sizing.window_steps(0.1) != sizing.window_steps(0.01)
    leader, _, _ = _rank(store, 0, 0.1, 300)  # rank 0 never waits: it writes its decision for every boundary
    follower, ranks, _ = _rank(store, 1, 0.01, 300)
    starts = [[e for e in w.events if e["event"] == "start"][0] for w in (leader, follower)]
    assert [s["steps"] for s in starts] == [20, 20]  # rank 0's window length on both ranks
    assert starts[0]["step"] == starts[1]["step"]
    assert [s["median_ms"] for s in starts] == [100.0, 10.0]  # each rank still reports its own step time
    ends = [[e for e in w.events if e["event"] in ("end", "finish")][0] for w in (leader, follower)]
    assert ends[0]["step"] == ends[1]["step"] and not leader.enabled and not follower.enabled
    assert ranks.seq == leader.ranks.seq and store.check([f"{KEY_PREFIX}{ranks.seq - 1}"])


class _Preparing(win.Recorder):
    """Rank 0's recorder in a distributed first run: it changes sessions one step before its window."""
    name = "torch"

    def __init__(self):
        self.calls: list[str] = []

    def wants_prepare(self) -> bool:
        return "prepare" not in self.calls

    def prepare(self) -> None:
        self.calls.append("prepare")

    def window_start(self, last: bool = False) -> None:
        self.calls.append("start")


@pytest.mark.torch
def test_rank_0s_change_of_sessions_takes_a_step_before_every_ranks_window():
    import torch.distributed as dist
    alone = win.Window(clock=Clock(), stop=False, emit=lambda _: None)
    for _ in range(100):
        alone.clock.t += 0.1
        alone.hook_boundary()
    start_alone = next(e for e in alone.events if e["event"] == "start")["step"]
    store = dist.HashStore()
    recorder = _Preparing()
    leader, _, _ = _rank(store, 0, 0.1, 300, recorder=recorder)
    follower, _, _ = _rank(store, 1, 0.1, 300)  # a plain recorder: it follows rank 0's "prepare" as a step of warm-up
    assert recorder.calls == ["prepare", "start"]
    starts = [next(e for e in w.events if e["event"] == "start") for w in (leader, follower)]
    # the step that holds rank 0's change (and the other ranks' wait for it) is in nobody's window
    assert starts[0]["step"] == starts[1]["step"] == start_alone + 1
    assert starts[0]["steps"] == starts[1]["steps"] and starts[0]["warmup"] == start_alone + 1


@pytest.mark.torch
def test_inside_the_window_no_rank_waits_for_rank_0():
    """Rank 0 is late (slow steps) and has not reached the window's steps yet: the others count the window alone,
    never waiting for it in the window's steps, and end it at the step rank 0 will."""
    import torch.distributed as dist
    store = dist.HashStore()
    leader, _, _ = _rank(store, 0, 0.1, 300)
    start = next(e for e in leader.events if e["event"] == "start")
    end = next(e for e in leader.events if e["event"] in ("end", "finish"))
    store2 = dist.HashStore()  # rank 0's decisions up to the window's start only: it is still in its window's steps
    for seq in range(start["step"]):  # (boundary k of the hook steps ends step k + 1)
        store2.set(f"{KEY_PREFIX}{seq}", store.get(f"{KEY_PREFIX}{seq}"))
    follower, ranks, lines = _rank(store2, 1, 0.01, 300, timeout_s=0.2)
    assert ranks.following and not any("stopped following" in ln for ln in lines), lines  # a wait there times out
    f_start = next(e for e in follower.events if e["event"] == "start")
    f_end = next(e for e in follower.events if e["event"] in ("end", "finish"))
    assert (f_start["step"], f_start["steps"], f_end["step"]) == (start["step"], start["steps"], end["step"])


@pytest.mark.torch
def test_a_window_started_before_the_process_group_existed_is_still_agreed_on():
    """A window each rank started alone (no process group yet) is counted alone: once the group exists, its
    boundaries are numbered and agreed on like the others, or the ranks' numbers would part."""
    import torch.distributed as dist
    store, seen = dist.HashStore(), {"n": 0}

    def group():  # the group appears at the 8th boundary: inside the window started at the 5th
        seen["n"] += 1
        return (store, 0) if seen["n"] >= 8 else None
    clock, lines = Clock(), []
    ranks = RankAgreement(group=group, emit=lines.append)
    w = win.Window(clock=clock, stop=False, emit=lines.append, ranks=ranks)
    for _ in range(60):
        if not w.enabled:
            break
        clock.t += 0.1
        w.hook_boundary()
    start = next(e for e in w.events if e["event"] == "start")
    end = next(e for e in w.events if e["event"] in ("end", "finish"))
    assert start["step"] < 8 < end["step"]
    assert ranks.seq == end["step"] - 7  # every boundary from the group's on was agreed on, the window's too


@pytest.mark.torch
def test_a_rank_that_outlasts_rank_0_stops_following_and_is_never_stopped():
    import torch.distributed as dist
    store = dist.HashStore()
    w, ranks, lines = _rank(store, 1, 0.1, 40, stop=True, timeout_s=0.2)  # rank 0 never wrote anything
    assert not ranks.following and ranks.seq == 1
    assert any("stopped following rank 0's window" in ln for ln in lines)
    # from then on it decides alone (its own window), and where that ends it ends the recording: the program runs on
    events = [e["event"] for e in w.events]
    assert events[:2] == ["start", "end"] and not w.stopped and not w.enabled
    assert next(e for e in w.events if e["event"] == "end")["stop"] is False


def test_without_a_process_group_each_rank_decides_alone():
    ranks = RankAgreement(group=lambda: None)
    assert ranks.agree(["start", 7]) == ["start", 7] and ranks.seq == 0
    # the launcher agrees only in a job of two ranks or more, as its launcher's environment says
    from nsighttc.runtime.rank_env import world_size
    assert world_size({"WORLD_SIZE": "4"}) == 4 and world_size({"SLURM_NTASKS": "2"}) == 2 and world_size({}) == 1


# Two ranks coupled by a barrier after each step, timed very differently: rank 0's steps take 60 ms inside their
# range, rank 1's 5 ms (it then waits at the barrier, outside the range). Alone they choose windows of 34 and 100
# steps: rank 0 would stop and rank 1 die in its next barrier.
PROGRAM = """
import time, torch.distributed as dist
from nsighttc import annotate
dist.init_process_group("gloo")
rank = dist.get_rank()
for i in range(400):
    with annotate.step():
        time.sleep(0.06 if rank == 0 else 0.005)
    dist.barrier()
print("RAN TO THE END", rank, flush=True)
dist.destroy_process_group()
"""


def _stopped_job(tmp_path, source: str, launcher_args: tuple = (), lines: list | None = None) -> list[dict]:
    """Run ``source`` as a torchrun job of two CPU ranks under the launcher (a window, then stop); it must exit 0
    (a rank stopped alone would have died in its next barrier) without reaching its end. Returns the window events;
    ``lines``: gets the ranks' stderr lines, in the order written."""
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    # with arguments of the launcher's, through the shim the default run puts before it (rank{nsighttc_rank} paths)
    rankexec = [sys.executable, "-m", "nsighttc.runtime.rankexec", "--"] if launcher_args else []
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "--no-python", *rankexec, sys.executable, "-m", "nsighttc.runtime.launch", "--window",
                        "--window-end", "stop", *launcher_args, "--", str(prog)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "RAN TO THE END" not in r.stdout
    if lines is not None:
        lines.extend(r.stderr.splitlines())
    return window_events.read_events((r.stdout + r.stderr).splitlines())


@pytest.mark.torch
def test_a_torchrun_job_of_two_ranks_is_stopped_at_the_same_step_on_both(tmp_path):
    events = _stopped_job(tmp_path, PROGRAM)
    starts = [e for e in events if e["event"] == "start"]
    ends = [e for e in events if e["event"] == "end"]
    assert len(starts) == 2 and len(ends) == 2, events
    medians = sorted(e["median_ms"] for e in starts)
    assert sizing.window_steps(medians[0] / 1e3) != sizing.window_steps(medians[1] / 1e3)  # alone they would differ
    assert starts[0]["steps"] == starts[1]["steps"] and ends[0]["step"] == ends[1]["step"]
    assert all(e["stop"] for e in ends)


# The same inside a named range: after its window the recording goes on for a grace (seconds, on each rank's own
# clock) in case another phase begins, and the stop after it must be rank 0's decision too.
PHASE_PROGRAM = """
import time, torch.distributed as dist
from nsighttc import annotate
dist.init_process_group("gloo")
rank = dist.get_rank()
with annotate.range("train"):
    for i in range(400):
        with annotate.step():
            time.sleep(0.06 if rank == 0 else 0.005)
        dist.barrier()
print("RAN TO THE END", rank, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_a_named_phase_is_stopped_after_its_grace_at_the_same_step_on_every_rank(tmp_path):
    events = _stopped_job(tmp_path, PHASE_PROGRAM)
    ends = [e for e in events if e["event"] == "end"]
    stops = [e for e in events if e["event"] == "stop"]
    assert [e["phase"] for e in ends] == ["prog.py/train"] * 2 and all(e["grace_s"] for e in ends)
    assert ends[0]["step"] == ends[1]["step"] and ends[0]["steps"] == ends[1]["steps"]
    # both stopped after the grace (the window counts no steps past its end): had one stopped a step before the
    # other, that one would have died in its barrier and the job would not have exited 0
    assert len(stops) == 2 and all(e["grace_s"] for e in stops)


# A distributed first run: the replay reads one rank's operators (with their arguments) until the window; every other
# rank, and every rank's window, records the ranges only, so no rank is slowed alone where the verdict looks. A named
# phase's window ends its operators too (a single process keeps them through it: later phases may need them).
SHAPES_PROGRAM = PHASE_PROGRAM.replace("time.sleep(", "torch.ones(16, 16) @ torch.ones(16, 16); time.sleep(").replace(
    "import time,", "import time, torch,")


@pytest.mark.torch
def test_only_rank_0_records_operators_with_their_arguments_and_only_until_the_window(tmp_path):
    import gzip
    import json
    lines: list[str] = []
    events = _stopped_job(tmp_path, SHAPES_PROGRAM, (
        "--torch-trace", str(tmp_path / "rank{nsighttc_rank}" / "trace.json"), "--record-shapes", "--shapes-rank", "0",
        "--no-operators", "--ops-trace", str(tmp_path / "rank{nsighttc_rank}" / "ops.json"),
        "--host-samples", str(tmp_path / "rank{nsighttc_rank}" / "host.json")), lines=lines)
    assert len([e for e in events if e["event"] == "start"]) == 2
    # and each rank's host facts say so: the straggler's comparison of hosts reads them (rank 0 was said to record
    # "operators with their arguments" in a window recorded like rank 1's, on two H200s)
    said = {json.loads((tmp_path / f"rank{r}" / "host.json").read_text())["host"]["profiler_records"] for r in (0, 1)}
    assert said == {"torch.profiler: ranges, CUDA calls and GPU work only"}, said
    # rank 0 changed sessions (stopped the recording of operators, wrote them) a step before the window, and the
    # window started on every rank only after that: the other ranks' waits for it are in no window
    from nsighttc.record_format import DROPPED_BEFORE_WINDOW
    from nsighttc.runtime.recording import OPS_WRITTEN
    from nsighttc.runtime.window import EVENT_PREFIX
    written = [i for i, ln in enumerate(lines) if OPS_WRITTEN in ln]
    started = [i for i, ln in enumerate(lines) if EVENT_PREFIX in ln and '"event": "start"' in ln]
    assert len(written) == 1 and len(started) == 2 and written[0] < min(started), lines
    # rank 1 changed sessions at the same step, its recording until there dropped unwritten; rank 0 recorded the ranges
    # only too until OPERATOR_STEPS steps before that, dropped them, and recorded the operators from there
    dropped = [ln for ln in lines if DROPPED_BEFORE_WINDOW in ln]
    assert len(dropped) == 2 and all(lines.index(d) < min(started) for d in dropped), lines
    own = {r: next(d for d in dropped if str(tmp_path / f"rank{r}" / "trace.json") in d) for r in (0, 1)}
    assert lines.index(own[0]) < written[0] and "for 2 steps" in own[0], lines

    def events_of(path):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            return json.load(fh)["traceEvents"]
    ops_trace = events_of(tmp_path / "rank0" / "ops.json")
    ops = [e for e in ops_trace if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::mm" and e["args"].get("Input Dims") == [[16, 16], [16, 16]] for e in ops)
    # the operators of those steps only, not of the program's start-up and warm-up
    from nsighttc.runtime.recording import OPERATOR_STEPS
    assert sum(1 for e in ops_trace if e.get("cat") == "user_annotation" and e["name"] == "step") == OPERATOR_STEPS
    assert not (tmp_path / "rank1" / "ops.json").exists()
    steps = []
    for rank in (0, 1):
        trace = events_of(tmp_path / f"rank{rank}" / "trace.json")
        assert not [e for e in trace if e.get("cat") == "cpu_op"], rank  # the window: ranges only, on both ranks
        steps.append(sum(1 for e in trace if e.get("cat") == "user_annotation" and e["name"] == "step"))
    # both recordings start a step before the window: the same steps on each rank (a rank records each step once)
    assert steps[0] > 0 and abs(steps[0] - steps[1]) <= 1, steps


@pytest.mark.torch
def test_the_other_ranks_keep_their_whole_recording_where_no_window_starts(tmp_path):
    """Rank 0 records operators for the replay, the others the ranges; where no window starts (a job of one step),
    nobody changes sessions and every rank's trace is its whole run."""
    from nsighttc.record_format import DROPPED_BEFORE_WINDOW
    prog = tmp_path / "prog.py"
    prog.write_text(ONE_STEP_DDP)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "--no-python", sys.executable, "-m", "nsighttc.runtime.rankexec", "--", sys.executable,
                        "-m", "nsighttc.runtime.launch", "--window", "--torch-trace",
                        str(tmp_path / "rank{nsighttc_rank}" / "trace.json"), "--record-shapes", "--shapes-rank", "0",
                        "--no-operators", "--ops-trace", str(tmp_path / "rank{nsighttc_rank}" / "ops.json"), "--",
                        str(prog)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert DROPPED_BEFORE_WINDOW not in r.stderr
    import json
    trace = json.loads((tmp_path / "rank1" / "trace.json").read_text())["traceEvents"]
    assert any(e.get("name", "").startswith("Optimizer.step") for e in trace)  # its one step, recorded
    # rank 0 too, with the ranges only: it records the operators only for the steps just before a window (its lead,
    # runtime.recording.OPERATOR_STEPS), and no window started, so the replay has no operators from this job
    rank0 = json.loads((tmp_path / "rank0" / "trace.json").read_text())["traceEvents"]
    assert any(e.get("name", "").startswith("Optimizer.step") for e in rank0)
    assert not any(e.get("cat") == "cpu_op" for e in rank0) and not (tmp_path / "rank0" / "ops.json").exists()


# A DDP model left in the program's globals when its one step ends: freed inside the launcher, its gloo process group
# deadlocked on the GIL (runtime.launch._PROGRAM_LEFT). Before the launcher kept them, 5 of 6 such jobs hung.
ONE_STEP_DDP = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
opt.zero_grad(); m(torch.randn(8, 16)).sum().backward(); opt.step()
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_a_ddp_job_that_ends_without_a_window_exits_on_every_rank(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(ONE_STEP_DDP)
    for attempt in range(3):
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            "--no-python", sys.executable, "-m", "nsighttc.runtime.rankexec", "--", sys.executable,
                            "-m", "nsighttc.runtime.launch", "--window", "--torch-trace",
                            str(tmp_path / "rank{nsighttc_rank}.json"), "--no-operators", "--", str(prog)],
                           capture_output=True, text=True, cwd=ROOT, timeout=60,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert r.returncode == 0, (attempt, r.stderr[-3000:])
        assert (tmp_path / "rank1.json").exists() and (tmp_path / "rank0.json").exists()


@pytest.mark.torch
def test_a_window_the_ranks_agreed_on_ends_at_the_same_step_on_every_rank_when_their_steps_speed_up_apart():
    """Two H200s, FSDP2 (issue 50, benchmarks/gpu/gpu_distributed_windows.sh): the window started on 130 ms steps that
    then fell to 89 ms; each rank extended its window at its own step (9 and 12), one stopped, and the other waited in
    its next all-gather until the run's timeout. A window the ranks agreed on keeps the length they agreed on."""
    import torch.distributed as dist
    store = dist.HashStore()
    leader, _, _ = _rank(store, 0, [0.13] * 9 + [0.089] * 300, 300, stop=True)
    follower, _, _ = _rank(store, 1, [0.13] * 12 + [0.089] * 300, 300, stop=True)
    ends = [next(e for e in w.events if e["event"] == "end") for w in (leader, follower)]
    assert ends[0]["step"] == ends[1]["step"] and leader.stopped and follower.stopped
    assert not any(e["event"] == "extend" for w in (leader, follower) for e in w.events)
    alone = win.Window(clock=Clock(), stop=False, emit=lambda _: None)  # one process still extends its window
    for dt in [0.13] * 9 + [0.089] * 300:
        alone.clock.t += dt
        alone.hook_boundary()
    assert any(e["event"] == "extend" for e in alone.events)


# A job of two CPU ranks whose last run ended after 40 optimizer steps, a few steps after its window (a cached run):
# its window holds END_WINDOW_STEPS steps, and the steps after it run unrecorded on both ranks to the program's end.
KNOWN_END = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(40):
    time.sleep(0.01)
    opt.zero_grad(); m(x).sum().backward(); opt.step()
    dist.barrier()
print("RAN TO THE END", rank, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_a_job_whose_end_is_known_records_a_short_window_and_every_rank_runs_to_its_end(tmp_path):
    """runtime.window.Window._end_known on a job's ranks: the window and its length are rank 0's decision, so are
    the unrecorded steps timed after it (every step left, and END_SLACK more): no rank is stopped, both end by
    themselves, say after how many optimizer steps, and their traces hold the same window steps."""
    import json
    prog = tmp_path / "prog.py"
    prog.write_text(KNOWN_END)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "--no-python", sys.executable, "-m", "nsighttc.runtime.rankexec", "--", sys.executable,
                        "-m", "nsighttc.runtime.launch", "--window", "--window-end", "stop", "--record-from", "window",
                        "--window-warmup-max", "4", "--window-last-optimizer-step", "40", "--no-operators",
                        "--torch-trace", str(tmp_path / "rank{nsighttc_rank}.json"), "--", str(prog)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("RAN TO THE END") == 2, r.stdout[-2000:] + r.stderr[-3000:]
    events = window_events.read_events((r.stdout + r.stderr).splitlines())
    starts = [e for e in events if e["event"] == "start"]
    ends = [e for e in events if e["event"] == "end"]
    assert len(starts) == len(ends) == 2 and {e["steps"] for e in ends} == {sizing.END_WINDOW_STEPS}
    assert ends[0]["step"] == ends[1]["step"] < 40 and not any(e.get("program_end") for e in ends)
    assert [e["optimizer_steps"] for e in events if e["event"] == "ended"] == [40, 40]
    steps = [sum(1 for e in json.loads((tmp_path / f"rank{r}.json").read_text())["traceEvents"]
                 if e.get("name") == "nsighttc.step") for r in (0, 1)]
    assert steps[0] == steps[1] and sizing.END_WINDOW_STEPS <= steps[0] <= sizing.END_WINDOW_STEPS + 1, steps


# A job as users write them (../shared/programs/ddp_w.py's shape): `train` open around the whole loop, `data` and
# `step` ranges of its own, rank 1 slower in `data`; 24 steps, so the program ends inside its window.
USER_RANGES = """
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01)
with torch.profiler.record_function("train"):
    for i in range(24):
        with torch.profiler.record_function("data"):
            x = torch.randn(8, 16); time.sleep(0.03 if rank == 1 else 0.002)
        with torch.profiler.record_function("step"):
            opt.zero_grad(); m(x).sum().backward(); opt.step()
        dist.barrier()
print("RAN TO THE END", rank, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_a_user_range_open_across_every_step_and_a_program_ending_inside_its_window_keeps_every_ranks_window(
        tmp_path):
    """A first run (rank 0 records the operators for the replay): rank 0's change of sessions waits while the user's
    `train` range is open, and the window starts first. Before, the change ran when `train` closed after the loop,
    stopping the session that held rank 0's window and throwing it away ("rank 0: 0 of the window's 11 steps
    recorded", 2 x H200, ddp_w.py). Now a change still waiting when the window starts is given up: the session
    recording then holds the window, on every rank, to the end; and rank 0, whose change to the operators' recording
    is the one that waits, records the operators by a dispatch mode in that session instead."""
    import json
    prog = tmp_path / "prog.py"
    prog.write_text(USER_RANGES)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "--no-python", sys.executable, "-m", "nsighttc.runtime.rankexec", "--", sys.executable,
                        "-m", "nsighttc.runtime.launch", "--window", "--window-end", "stop", "--torch-trace",
                        str(tmp_path / "rank{nsighttc_rank}" / "trace.json"), "--record-shapes", "--shapes-rank", "0",
                        "--no-operators", "--ops-trace", str(tmp_path / "rank{nsighttc_rank}" / "ops.json"), "--",
                        str(prog)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    events = window_events.read_events((r.stdout + r.stderr).splitlines())
    starts = [e for e in events if e["event"] == "start"]
    assert len(starts) == 2 and starts[0]["step"] == starts[1]["step"], events
    in_window = []
    for rank in (0, 1):
        trace = json.loads((tmp_path / f"rank{rank}" / "trace.json").read_text())["traceEvents"]
        steps = [e for e in trace if e.get("cat") == "user_annotation" and e["name"] == "step"]
        in_window.append(len(steps))
    # both ranks hold the window's steps (to the program's end), the same ones give or take the step before it
    assert min(in_window) >= 24 - starts[0]["step"] - 1 and abs(in_window[0] - in_window[1]) <= 1, (in_window, starts)
    # rank 0's change to the operators could not run (`train` open): it recorded them by a dispatch mode instead, in
    # the session that then held its window, so the replay has them (before: none, and the whole job was launched
    # again under Nsight Compute for the kernels that need evidence: a first run at 2.07-2.34x plain, 2 x H200)
    assert "operators recorded by a dispatch mode" in r.stderr and "for the replay, by a dispatch mode" in r.stderr
    from types import SimpleNamespace
    from nsighttc.profile.timeline_run import rank_recording
    from nsighttc.record_format import CAPTURE_FILE, CAPTURED_OP
    ranks: dict = {}
    for line in r.stderr.splitlines():
        rank_recording(line[line.find("nsighttc.launch:"):] if "nsighttc.launch:" in line else line, ranks)
    assert ranks["0"]["operators_for_replay"] is True and ranks["0"]["session_kept_s"] > 0, ranks
    calls = json.loads((tmp_path / "rank0" / CAPTURE_FILE).read_text())
    assert not (tmp_path / "rank1" / CAPTURE_FILE).exists()
    names = {c["name"] for c in calls if c}
    assert {"aten::addmm", "aten::mm", "aten::sum"} <= names, names  # (a step's forward and backward)
    import torch
    from nsighttc.runtime import replay_args
    for c in calls:  # what the replay does with them: every aten call made again from its recorded arguments
        if c and c["name"].startswith("aten::") and c["name"] not in ("aten::randn",):
            replay_args.call_op(torch, c, torch.device("cpu"))
    # the calls' ranges are in rank 0's trace, before its window, and no reader takes them for the program's
    trace = json.loads((tmp_path / "rank0" / "trace.json").read_text())["traceEvents"]
    ops = [e for e in trace if e.get("cat") == "user_annotation" and e["name"].startswith(CAPTURED_OP)]
    window = min(e["ts"] for e in trace if e.get("name") == "nsighttc.window")
    assert len(ops) == len(calls) and max(e["ts"] + e["dur"] for e in ops) <= window
    from nsighttc.parse import load
    assert not load(tmp_path / "rank0" / "trace.json").timeline.ranges["name"].astype(str).str.startswith(
        CAPTURED_OP).any()
    from nsighttc.profile.replay_pass import no_operators_note
    note = no_operators_note(SimpleNamespace(done=[SimpleNamespace(mode="timeline", ranks_recorded=ranks)]), 3)
    assert "rank 0 recorded no operators" not in note
