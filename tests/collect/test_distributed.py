"""Profiling distributed jobs: torchrun targets, one recording per rank (rankexec), Slurm's one nsighttc per
rank, and the wrapper's CPU smoke mode (gloo, world size 2) under the torch engine."""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsighttc import analyze
from nsighttc.runtime import rankexec
from nsighttc.runtime.window_sizing import END_WINDOW_STEPS
from nsighttc.errors import UsageError
from nsighttc.profile import Options, pass_env as _env, plan, profile, rank_run_dir, resolve_target
from tests.collect.fakes import calls, make_bin

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "wrappers" / "ddp_train.py"


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize("command,argv,module,python", [
    (["torchrun", "--nproc_per_node", "2", "--master_port=29500", "train.py", "--lr", "1"], ["train.py", "--lr", "1"],
     False, True),
    (["torchrun", "--standalone", "--nnodes", "1", "-m", "pkg.train", "--x"], ["pkg.train", "--x"], True, True),
    (["python3", "-m", "torch.distributed.run", "--nproc-per-node", "gpu", "train.py"], ["train.py"], False, True),
    (["torchrun", "--nproc_per_node", "2", "--no-python", "sh", "-c", "echo"], ["sh", "-c", "echo"], False, False),
])
def test_torchrun_targets(tmp_path, monkeypatch, command, argv, module, python):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print(1)\n")
    t = resolve_target(None, [], command)
    assert t.distributed and t.argv == argv and t.module is module and t.python_program is python
    prefix_end = len(command) - len(argv) - (1 if module or not python else 0)
    assert t.dist_prefix == command[:prefix_end]


def test_torchrun_without_a_script_is_a_usage_error():
    with pytest.raises(UsageError, match="no training script"):
        resolve_target(None, [], ["torchrun", "--nproc_per_node", "2"])


def test_each_engine_runs_inside_every_rank_and_ncu_on_rank_0(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print(1)\n")
    t = resolve_target(None, [], ["torchrun", "--nproc_per_node", "2", "train.py"])
    run = tmp_path / "run"
    tpl = f"{run}/rank{{nsighttc_rank}}"
    for engine, tool in (("torch", None), ("nsys", "nsys"), ("ncu", "ncu")):
        bin_ = make_bin(tmp_path)
        monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
        p = plan(Options(engine=engine), t, "9.0", run)[0][0]
        a = p.argv
        assert a[:3] == ["torchrun", "--nproc_per_node", "2"] and a[3] == "--no-python"
        assert a[a.index("-m") + 1] == "nsighttc.runtime.rankexec" and a[a.index("--mkdir") + 1] == tpl
        inner = a[a.index("--") + 1:]
        n_tool = int(a[a.index("--tool-args") + 1])
        assert inner[n_tool:n_tool + 3] == [sys.executable, "-m", "nsighttc.runtime.launch"]
        assert inner[-1] == "train.py" and p.ranked
        if tool:
            assert Path(inner[0]).name == tool and p.exe == inner[0]
            assert inner[inner.index("-o") + 1] == f"{tpl}/{engine}"
        else:
            assert n_tool == 0 and inner[inner.index("--torch-trace") + 1] == f"{tpl}/torch_trace.json"
        assert ("--only-ranks" in a) is (engine == "ncu")


def test_rankexec_fills_the_rank_and_drops_the_profiler_where_asked(tmp_path):
    argv = ["ncu", "-o", "r{nsighttc_rank}/ncu", "python", "x.py"]
    assert rankexec.command_for_rank(argv, 0, 3, {0}) == ["ncu", "-o", "r0/ncu", "python", "x.py"]
    assert rankexec.command_for_rank(argv, 1, 3, {0}) == ["python", "x.py"]
    assert rankexec.command_for_rank(argv, 1, 3, None)[2] == "r1/ncu"
    assert rankexec.current_rank({"SLURM_PROCID": "5"}) == 5 and rankexec.current_rank({}) == 0
    # nsighttc's launcher under this interpreter runs in the shim's own process (one interpreter start fewer a rank);
    # another interpreter, one with options of its own, or a profiler in front of it is started as given
    launcher = [sys.executable, "-m", "nsighttc.runtime.launch", "--window", "--", "x.py"]
    assert rankexec.in_process(launcher)
    assert not rankexec.in_process(["/usr/bin/python2", *launcher[1:]])
    assert not rankexec.in_process([sys.executable, "-X", "importtime", *launcher[1:]])
    assert not rankexec.in_process(["nsys", "profile", *launcher])
    out = tmp_path / "out.txt"
    code = ("import sys; open(sys.argv[1], 'w').write(' '.join(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.rankexec", "--mkdir", str(tmp_path / "rank{nsighttc_rank}"),
                        "--tool-args", "2", "--only-ranks", "0", "--", "tool", "--flag", sys.executable, "-c", code,
                        str(out), "rank={nsighttc_rank}"], env={**_env(), "RANK": "3"}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "rank=3" and (tmp_path / "rank3").is_dir()
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.rankexec", "--", "/no/such/tool"], env=_env(),
                       capture_output=True, text=True)
    assert r.returncode == 127 and "cannot run /no/such/tool" in r.stderr


def test_one_nsighttc_per_rank_writes_rank_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert rank_run_dir(tmp_path / "job") == tmp_path / "job" / "rank3"
    with pytest.raises(UsageError, match="exists already"):
        rank_run_dir(tmp_path / "job")
    with pytest.raises(UsageError, match="give --out DIR"):
        rank_run_dir(None)


def test_cpu_smoke_run_writes_one_trace_per_rank(tmp_path):
    """The wrapper under torchrun (gloo, world size 2, CPU) behind the torch engine's per-rank launcher:
    each rank writes its own trace, which says which rank it is."""
    pytest.importorskip("torch")
    t = resolve_target(None, [], [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                                  "2", str(WRAPPER), "--device", "cpu",
                                  "--straggler-rank", "1", "--delay-ms", "5"])
    run = tmp_path / "run"
    run.mkdir()
    p = plan(Options(engine="torch"), t, None, run)[0][0]
    proc = subprocess.Popen(p.argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and both ranks: nothing may outlive the test
        out, err = proc.communicate()
        raise AssertionError(f"torchrun hung: {err[-3000:]}") from None
    assert proc.returncode == 0, err[-2000:]
    assert out.count("ddp_train rank") == 2 and "straggler=1" in out
    for rank in (0, 1):
        trace = run / f"rank{rank}" / "torch_trace.json"
        info = json.loads(trace.read_text())["distributedInfo"]
        assert info["rank"] == rank and info["world_size"] == 2 and info.get("backend") in (None, "gloo")
    v = analyze([run], jobs=1)
    assert [r["rank"] for r in v.ranks] == [0, 1] and v.distributed["world_size"] == 2
    assert all(r["step_family"] and r["step_family"].endswith("train/step") for r in v.ranks)


def test_profile_of_a_torchrun_job_records_every_rank(tmp_path, monkeypatch):
    """End to end with fake nsys/ncu (the recordings they 'write' are real): the timeline on every rank (torch.profiler
    by default, with rank 0's operators for the replay, nsys where the torch timeline would record every operator),
    Nsight Compute on rank 0 only, then one verdict with a rank table."""
    pytest.importorskip("torch")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    b = make_bin(tmp_path)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin")
    from nsighttc.collect import tools
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    script = tmp_path / "work.py"
    script.write_text("import os\nprint('rank', os.environ['RANK'], 'ran')\n")
    t = resolve_target(None, [], [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                  "--master_port", _free_port(), str(script)])
    # distributed: torch.profiler with the ranges only is the timeline where torch is installed (nsys is found here);
    # this CPU program launches no kernel, so no Nsight Compute pass follows
    res = profile(t, Options(out=tmp_path / "runs"))
    assert res.exit_code == 0, res.notes
    assert res.engines == ["torch"]
    assert sorted(p.parent.name for p in res.run_dir.glob("rank*/torch_trace.json")) == ["rank0", "rank1"]
    timeline = shlex.split(json.loads((res.run_dir / "run.json").read_text())["commands"][0])
    # the replay reads rank 0's operators until the window; the other ranks record the ranges only
    assert "--no-operators" in timeline and timeline[timeline.index("--shapes-rank") + 1] == "0"
    assert timeline[timeline.index("--ops-trace") + 1] == str(res.run_dir / "rank{nsighttc_rank}" / "torch_ops_trace.json")
    # ... and its process (under ncu, one process on rank 0's GPU) waited beside the job; no kernel: stood down
    replays = [c for c in calls(tmp_path) if Path(c[0]).name == "ncu" and "nsighttc.runtime.replay" in c]
    assert replays
    # the switches the recording rank's launcher writes are the ones the replay reads (runtime.backend_flags)
    assert timeline[timeline.index("--backend-flags") + 1] == str(res.run_dir / "rank{nsighttc_rank}" /
                                                                   "backend_flags.json")
    assert replays[0][replays[0].index("--backend-flags") + 1] == str(res.run_dir / "rank0" / "backend_flags.json")
    assert [r["rank"] for r in analyze([res.run_dir], jobs=1).ranks] == [0, 1]
    before = len(calls(tmp_path))
    # where the torch timeline would record every operator (no step hooks), nsys records every rank instead, and
    # its (real) recordings' kernels send rank 0 alone under Nsight Compute
    res = profile(t, Options(out=tmp_path / "runs", step_marks=False))
    assert res.exit_code == 0, res.notes
    assert res.engines == ["nsys", "ncu"]
    assert sorted(p.name for p in res.run_dir.glob("rank*/nsys.sqlite")) == ["nsys.sqlite", "nsys.sqlite"]
    assert not list(res.run_dir.glob("rank1/ncu*"))
    ncu_runs = [c for c in calls(tmp_path)[before:] if Path(c[0]).name == "ncu" and "-o" in c]
    assert len(ncu_runs) == 1 and ncu_runs[0][ncu_runs[0].index("-o") + 1].endswith("rank0/ncu")
    doc = json.loads((res.run_dir / "verdict.json").read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["distributed"]["ranks"] == 2
    assert "## Ranks" in (res.run_dir / "report.md").read_text()
    # the run directory is analysable again as a whole (the fake nsys wrote one fixture for both ranks: identical
    # files, which given by a user are refused as one recording given twice, parse.same_job)
    again = analyze([res.run_dir], jobs=1, same_job_check=False)
    assert [r["rank"] for r in again.ranks] == [0, 1]


DISTRIBUTED_WINDOWED = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
for _ in range(200):  # set-up work before any step
    with torch.profiler.record_function("setup"):
        torch.randn(4, 4).sum()
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(int(os.environ.get("STEPS", "3000"))):
    time.sleep(0.004)
    opt.zero_grad(); m(x).sum().backward(); opt.step()
dist.destroy_process_group()
"""


def _torchrun_job(tmp_path: Path, monkeypatch, source: str):
    """A torchrun job of two CPU ranks running ``source``, with fake profilers on PATH and a cache of its own."""
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    b = make_bin(tmp_path)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from nsighttc.collect import tools
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    script = tmp_path / "job.py"
    script.write_text(source)
    return resolve_target(None, [], [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                     "--master_port", _free_port(), str(script)])


def _setup_ranges(run_dir: Path) -> list[int]:
    return [sum(1 for e in json.loads(t.read_text())["traceEvents"] if e.get("name") == "setup")
            for t in sorted(run_dir.glob("rank*/torch_trace.json"))]


@pytest.mark.torch
def test_a_torchrun_jobs_second_run_records_from_the_window_and_is_recorded_whole_again_without_one(tmp_path,
                                                                                                 monkeypatch):
    """As a single process's: the evidence cache knows the job and that it had a window, so every rank's profiler
    starts at the (agreed) window; rank 0's launcher says when. A job that no longer reaches a window writes no
    trace on any rank, and is run again, recorded whole."""
    t = _torchrun_job(tmp_path, monkeypatch, DISTRIBUTED_WINDOWED)
    first = profile(t, Options(out=tmp_path / "runs", fast=True, steps=15))
    assert first.exit_code == 0, first.notes
    assert json.loads((first.run_dir / "run.json").read_text())["passes"][0]["window"]["recorded_from"] == "start"
    assert _setup_ranges(first.run_dir) == [200, 200]
    second = profile(t, Options(out=tmp_path / "runs", fast=True, steps=15))
    assert second.exit_code == 0, second.notes
    meta = json.loads((second.run_dir / "run.json").read_text())
    assert "--record-from" in meta["commands"][0]
    window = meta["passes"][0]["window"]
    assert window["recorded_from"] == "window" and window["recorded_from_s"] > 0  # rank 0's launcher said when
    assert _setup_ranges(second.run_dir) == [0, 0]  # the set-up ran unrecorded on both ranks
    assert [r["rank"] for r in second.verdict.ranks] == [0, 1]
    # A cached run of a job that ends inside its window (issue 46: rank 0's trace once held nothing then): every
    # rank's recording, started at the window, holds the window's steps up to the program's end
    warm = json.loads((first.run_dir / "run.json").read_text())["passes"][0]["window"]["phases"][0]["warmup_steps"]
    monkeypatch.setenv("STEPS", str(warm + 8))
    # (a window of 100 steps: this run's warm-up may end before the first run's did, on a loaded host, and a window of
    # 15 would then end before the program)
    inside = profile(t, Options(out=tmp_path / "runs", fast=True, steps=100))
    assert inside.exit_code == 0, inside.notes
    w = json.loads((inside.run_dir / "run.json").read_text())["passes"][0]["window"]
    assert w["recorded_from"] == "window" and w["phases"] and not w["phases"][0]["complete"]
    steps = [sum(1 for e in json.loads(t_.read_text())["traceEvents"] if e.get("name") == "nsighttc.step")
             for t_ in sorted(inside.run_dir.glob("rank*/torch_trace.json"))]
    assert len(steps) == 2 and min(steps) >= 4, steps  # both ranks, from the window's start to the end
    assert [r["rank"] for r in inside.verdict.ranks] == [0, 1]
    monkeypatch.setenv("STEPS", "1")  # now too short for a window
    third = profile(t, Options(out=tmp_path / "runs", fast=True, steps=15))
    assert third.exit_code == 0, third.notes
    assert any(n.startswith("no window of steady steps started this time") for n in third.notes)
    assert "no trace: the program ended before any window" in \
        (third.run_dir / "torch.window-try.stderr.log").read_text()
    assert _setup_ranges(third.run_dir) == [200, 200]


SLOW_SWITCH_NOISY_HOST = """
import os, time, torch, torch.distributed as dist, torch.profiler
if os.environ["RANK"] == "0":  # rank 0's profiler stops slowly (on a GPU, seconds: issue 50)
    _exit = torch.profiler.profile.__exit__
    def slow_exit(self, *a):
        time.sleep(1.0)
        return _exit(self, *a)
    torch.profiler.profile.__exit__ = slow_exit
noisy = os.environ.get("NOISY") == "1"  # a host whose speed moves: no three steps agree within 20%
dist.init_process_group("gloo")
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(int(os.environ["STEPS"])):
    time.sleep(0.012 if noisy and i % 2 else 0.006)
    opt.zero_grad(); m(x).sum().backward(); opt.step()
dist.destroy_process_group()
"""


def _window_steps(trace: Path) -> int:
    """The steps a rank's trace holds from its window's start on (its ``nsighttc.window`` mark)."""
    ev = json.loads(trace.read_text())["traceEvents"]
    start = min((e["ts"] for e in ev if e.get("name") == "nsighttc.window"), default=None)
    return 0 if start is None else sum(1 for e in ev if e.get("name") == "nsighttc.step" and e["ts"] >= start)


@pytest.mark.torch
def test_every_ranks_window_is_kept_when_rank_0_switches_slowly_and_the_program_ends_inside_its_window(tmp_path,
                                                                                                   monkeypatch):
    """Issue 50: a rank's recording must not depend on the program running on long enough after a profiler switch.
    First run: rank 0 records operators for the replay until its window, and its change of sessions (profiler stop)
    is slow; the program ends inside the window. Cached run of the same job on a host whose speed moves (no three
    steps agree): the window starts no later than last time's, so the job that ends 12 steps after it still has its
    window on every rank; on main the window never started (the warm-up waits for 50 steps) and the job ran twice."""
    t = _torchrun_job(tmp_path, monkeypatch, SLOW_SWITCH_NOISY_HOST)
    monkeypatch.setenv("STEPS", "40")  # a window of 100 steps wanted: the program ends inside it
    first = profile(t, Options(out=tmp_path / "runs"))
    assert first.exit_code == 0, first.notes
    meta = json.loads((first.run_dir / "run.json").read_text())
    assert "--ops-trace" in meta["commands"][0]  # rank 0 changed sessions (slowly) before its window
    assert "profiler stop 1." in (first.run_dir / "torch.stderr.log").read_text()
    warm = meta["passes"][0]["window"]["phases"][0]["warmup_steps"]
    # what each rank recorded: rank 0 the operators with their arguments for a few steps until a step before the
    # window, then (as rank 1) the ranges only: the window's steps were recorded alike on both
    ranks = meta["passes"][0]["window"]["ranks"]
    assert ranks["0"]["operators_with_arguments_until_s"] > 0 and ranks["0"]["operators_stop_s"] >= 1.0
    assert [ranks[r]["window_recorded"] for r in ("0", "1")] == ["ranges only", "ranges only"]
    assert "operators_with_arguments_until_s" not in ranks["1"]
    # rank 1 changed sessions at the same step and dropped its start-up and warm-up: its trace, like rank 0's, starts
    # a step before the window (it had recorded its whole run, and was the last to write its trace on two H200s)
    assert ranks["1"]["dropped_until_s"] > 0 and ranks["1"]["recorded_from_s"] >= ranks["1"]["dropped_until_s"]
    # rank 0 recorded the ranges only until OPERATOR_STEPS steps before that change, then the operators
    assert ranks["0"]["dropped_until_s"] < ranks["0"]["operators_with_arguments_until_s"]
    traces = sorted(first.run_dir.glob("rank*/torch_trace.json"))
    kept = [_window_steps(p) for p in traces]
    assert len(kept) == 2 and min(kept) >= 40 - warm - 1, (kept, warm)  # from the window's start to the end
    held = [sum(1 for e in json.loads(p.read_text())["traceEvents"] if e.get("name") == "nsighttc.step")
            for p in traces]
    assert held[1] - kept[1] <= 2 and held[0] - kept[0] <= 2, (held, kept)  # no warm-up before the window kept
    assert [r["rank"] for r in first.verdict.ranks] == [0, 1]
    monkeypatch.setenv("NOISY", "1")
    monkeypatch.setenv("STEPS", str(warm + 12))
    cached = profile(t, Options(out=tmp_path / "runs"))
    assert cached.exit_code == 0, cached.notes
    meta = json.loads((cached.run_dir / "run.json").read_text())
    kept = [_window_steps(p) for p in sorted(cached.run_dir.glob("rank*/torch_trace.json"))]
    assert len(kept) == 2 and min(kept) >= 11, kept
    w = meta["passes"][0]["window"]
    assert len(meta["passes"]) == 1 and w["recorded_from"] == "window" and w["phases"][0]["warmup_steps"] <= warm
    # the first run's program ended inside its window after 40 optimizer steps: this one's window was to hold what a
    # window needs (runtime.window: Window._end_known), and the program, shorter this time, ended by itself on every
    # rank (inside that window, at its last step, or, where its warm-up settled a step sooner on a loaded host, during
    # the steps timed unrecorded after it: not said to be stopped, ``Pass.ended_by_itself``)
    assert w["phases"][0]["steps"] == END_WINDOW_STEPS and not w["stopped_after_window"]
    assert "--window-warmup-max" in meta["commands"][0] and "--window-steps-max" in meta["commands"][0]
    # its program ended inside the window too, after warm + 12 optimizer steps: the next run's window ends with that
    # step on every rank (runtime.window: Window._at_last_step), or, where its warm-up settled a step sooner (a loaded
    # host), holds END_WINDOW_STEPS and the steps left after it run unrecorded (Window._end_known); either way the
    # program's end runs unrecorded, on every rank, and is not stopped
    again = profile(t, Options(out=tmp_path / "runs"))
    assert again.exit_code == 0, again.notes
    meta = json.loads((again.run_dir / "run.json").read_text())
    assert f"--window-last-optimizer-step {warm + 12} " in meta["commands"][0]
    w = meta["passes"][0]["window"]
    ended_with_it = w["phases"][0].get("program_end", False)
    assert ended_with_it or w["phases"][0]["steps"] == END_WINDOW_STEPS, w
    assert w["phases"][0]["complete"] and not w["stopped_after_window"]
    kept = [_window_steps(p) for p in sorted(again.run_dir.glob("rank*/torch_trace.json"))]
    assert len(kept) == 2 and min(kept) >= 11, kept
    assert [r["rank"] for r in again.verdict.ranks] == [0, 1]
    log = (again.run_dir / "torch.stderr.log").read_text()
    assert log.count('"program_end": true') == (2 if ended_with_it else 0) and log.count("program exit code 0") == 2
    assert log.count('"event": "ended"') == 2  # (its next run knows the end as well)


RANK_0_RUNS_ON = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
try:
    for i in range(3000):
        time.sleep(0.004)
        opt.zero_grad(); m(x).sum().backward(); opt.step()
finally:
    if os.environ["RANK"] == "0":  # rank 0 does not stop with the others (as a rank waiting in a collective)
        time.sleep(300)
"""


@pytest.mark.torch
def test_a_rank_that_runs_on_after_the_others_stopped_is_stopped_and_the_run_says_so(tmp_path, monkeypatch):
    """Two H200s, FSDP2 (issue 50): one rank stopped after its window, the other never ended, and the run hung until the
    harness' timeout. Once a rank's trace is written after a stop, the others get a grace; then the job is stopped,
    the run analyses what was written, and its notes say why it stopped the job."""
    from nsighttc.profile import timeline_run
    monkeypatch.setattr(timeline_run, "RANKS_END_GRACE_S", 3.0)
    t = _torchrun_job(tmp_path, monkeypatch, RANK_0_RUNS_ON)
    import time
    t0 = time.monotonic()
    res = profile(t, Options(out=tmp_path / "runs", fast=True))
    assert time.monotonic() - t0 < 120  # not rank 0's 300 s
    assert any("still ran 3 s after another rank's window" in n for n in res.notes), res.notes
    assert (res.run_dir / "rank1" / "torch_trace.json").exists()
    assert res.verdict is not None and [r["rank"] for r in res.verdict.ranks] == [0, 1]


@pytest.mark.torch
def test_a_torchrun_jobs_ranks_are_analysed_in_processes_started_while_it_ran(tmp_path, monkeypatch):
    """``--jobs 2``: the ranks' analyses run in worker processes started while the job ran (on two H200s, two FSDP2
    ranks took 3.2-4.8 s one after the other here, after a 15 s job); the verdict is the one made here. And the ranks
    time the same unrecorded steps after their window, so the job has its unrecorded speed."""
    t = _torchrun_job(tmp_path, monkeypatch, DISTRIBUTED_WINDOWED)
    # steps enough for the longest window (MAX_WARMUP_STEPS, the lead's OPERATOR_STEPS, MAX_STEPS) and steps after it:
    # with 120, a busy 2-core CI machine's warm-up settled late and the program ended inside its window
    from nsighttc.runtime.recording import OPERATOR_STEPS
    from nsighttc.runtime.window_sizing import MAX_STEPS, MAX_WARMUP_STEPS
    monkeypatch.setenv("STEPS", str(MAX_WARMUP_STEPS + OPERATOR_STEPS + MAX_STEPS + 40))
    from nsighttc import executors
    warmed = []
    real = executors.Processes.warm
    monkeypatch.setattr(executors.Processes, "warm",
                        lambda self, preload=(): warmed.append((self.jobs, preload)) or real(self, preload))
    res = profile(t, Options(out=tmp_path / "runs", jobs=2))
    assert res.exit_code == 0, res.notes
    assert warmed == [(2, ("nsighttc.api", "nsighttc.rank_map"))] and res.verdict is not None
    # the ranks' analyses started once the traces were complete, and the plan was made from the kernel tables they
    # told (each trace parsed once, there), then they took their evidence (profile.ranks_ahead)
    meta = json.loads((res.run_dir / "run.json").read_text())
    marks = meta["phase_seconds"]["marks"]
    assert marks["trace_read"] <= marks["ranks_ahead"] <= marks["planned"] <= marks["evidence_handed"], marks
    assert meta["evidence"]["ranks_ahead"] == {"kernel_tables_told": 2, "parsed_for_planning": 0}
    assert not list(res.run_dir.glob(".evidence-later*")) and not (res.run_dir / ".kernels-told").exists()
    here = analyze([i["path"] for i in res.verdict.inputs], jobs=1)  # (its inputs, here, one after the other)
    assert [r["rank"] for r in res.verdict.ranks] == [0, 1] == [r["rank"] for r in here.ranks]
    for a, b in zip(res.verdict.ranks, here.ranks):
        assert a["median_step_ns"] == b["median_step_ns"] and a["verdict"] == b["verdict"]
    assert (res.verdict.distributed["straggler"] is None) == (here.distributed["straggler"] is None)
    # every rank timed the same steps after the window, unrecorded (rank 0's count), and stopped with the others:
    # the job's unrecorded step is theirs (issue 51 for a distributed job)
    from nsighttc.runtime.window_events import read_events
    after = [e for e in read_events((res.run_dir / "torch.stderr.log").read_text().splitlines())
             if e["event"] == "unrecorded"]
    assert len(after) == 2 and after[0]["steps"] == after[1]["steps"] >= 2, after
    u = res.verdict.timeline["steps"]["unrecorded"]
    assert "2 ranks" in u["how"] and u["steps"] == after[0]["steps"]
    from nsighttc.profile.default import rank_workers
    assert rank_workers(Options(jobs=1), t, []) is None  # one after the other, here
    assert rank_workers(Options(jobs=4), resolve_target(str(tmp_path / "job.py"), [], None), []) is None  # one process


def test_warm_worker_processes_serve_every_map_until_closed():
    """``Processes.warm``: the workers start (and import the analysis) before any task; every map runs in them, and
    ``close`` ends them."""
    from nsighttc import executors
    ex = executors.Processes(2).warm(preload=("json",))
    try:
        first = ex.map(_pid, [(i, ()) for i in range(4)])
        again = ex.map(_pid, [(i, ()) for i in range(4)])
        assert set(first.values()) | set(again.values()) <= {p.pid for p in ex._pool._processes.values()}
        assert os.getpid() not in set(first.values())
    finally:
        pids = [p.pid for p in ex._pool._processes.values()]
        ex.close()
    import time
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:  # (the pool's own thread reaps them: their pids go)
        pids = [p for p in pids if _exists(p)]
        time.sleep(0.05)
    assert not pids


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not reaped yet is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _pid() -> int:
    return os.getpid()


SLOW_SHUTDOWN_JOB = """
import atexit, os, sys, time, torch
m = torch.nn.Linear(16, 16)
for _ in range(20):
    m(torch.randn(8, 16)).sum().backward()
atexit.register(lambda: time.sleep(4.0))  # each rank's slow exit (a CUDA job's: process groups, CUDA, CUPTI torn down)
if os.environ.get("RANK") == "1" and os.environ.get("EXIT_IN_SHUTDOWN"):
    atexit.register(lambda: os._exit(int(os.environ["EXIT_IN_SHUTDOWN"])))  # its end is not the one it said
"""


@pytest.mark.torch
def test_a_torchrun_jobs_traces_are_read_while_its_ranks_exit_and_checked_against_its_real_end(tmp_path,
                                                                                             monkeypatch):
    """Every rank said its trace is written and its exit code: the verdict is made while the ranks and torchrun still
    exit (issue 50: the exits of two H200 ranks were seconds of the run's cost), and the run still waits for the
    job's end, whose time and code are the job's own."""
    t = _torchrun_job(tmp_path, monkeypatch, SLOW_SHUTDOWN_JOB)
    t0 = time.time()
    res = profile(t, Options(out=tmp_path / "runs", fast=True))
    ended = time.time()
    assert res.exit_code == 0, res.notes
    meta = json.loads((res.run_dir / "run.json").read_text())
    tl = meta["passes"][0]
    assert tl["seconds"] - tl["trace_written_s"] >= 3.0  # the pass' time is the job's end, after the ranks' sleep
    # each rank's trace line, timed on the pass' clock: the job was read once the last of them came
    at = [r["trace_written_at_s"] for r in tl["window"]["ranks"].values()]
    assert len(at) == 2 and max(at) <= tl["trace_written_s"] < max(at) + 1.0
    assert (res.run_dir / "report.md").stat().st_mtime < ended - 2.0  # written before the job had ended
    assert meta["phase_seconds"]["exit_after_report"] > 1.0 and ended - t0 >= 4.0
    doc = json.loads((res.run_dir / "verdict.json").read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert doc["provenance"]["passes"][0]["seconds"] == tl["seconds"]  # rewritten with the job's real end
    # a rank that ends otherwise than it said: the verdict is made again with the job's real exit code
    monkeypatch.setenv("EXIT_IN_SHUTDOWN", "7")
    res = profile(t, Options(out=tmp_path / "runs", fast=True))
    code = json.loads((res.run_dir / "run.json").read_text())["exit_codes"]["torch"]
    assert code != 0 and res.exit_code == code and any(f"exited with code {code}" in n for n in res.notes)
    verdict = json.loads((res.run_dir / "verdict.json").read_text())
    assert any(f"exited with code {code}" in w for w in verdict["warnings"])  # made again with the job's real end
