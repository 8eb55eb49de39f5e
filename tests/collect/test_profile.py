"""`nsighttc profile` end to end with fake tools (launching is what is tested; parsing stays real)."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsighttc import ncu_metrics
from nsighttc.collect import tools
from nsighttc.profile import Options, profile, resolve_target, new_run_dir
from tests.collect.fakes import alive as _alive, calls, make_bin

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "import sys\nprint('workload ran', sys.argv[1:])\n"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)

    def setup(**kw):
        b = make_bin(tmp_path, **kw)
        monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}")
        return script
    return setup


# The nsys fixture's kernels that need hardware evidence (matrix work), as ncu's ==PROF== lines print them.
NVJET = "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
# Under the fake ncu the workload prints the profiling lines ncu would, then would run for a minute more.
PROFILED_THEN_LONG = f"""import os, sys, time
print('workload ran', sys.argv[1:], flush=True)
if os.environ.get('FAKE_TOOL') == 'ncu':
    for name in {[NVJET, "Kernel2", XMMA]!r}:
        print(f'==PROF== Profiling "{{name}}": 0%....50%....100% - 7 passes', flush=True)
    time.sleep(60)
"""


def _ncu_calls(tmp_path):
    return [c for c in calls(tmp_path) if Path(c[0]).name == "ncu" and "-o" in c]


def test_default_run_is_timeline_then_ncu_for_the_missing_kernels_stopped_early(env, tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    script.write_text(PROFILED_THEN_LONG)
    t0 = time.monotonic()
    res = profile(resolve_target(str(script), ["--x", "1"], None), Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert time.monotonic() - t0 < 40, "the program was not stopped once its kernels were profiled"
    assert res.engines == ["nsys", "ncu"] and res.exit_code == 0
    ncu_call = _ncu_calls(tmp_path)[0]
    launcher = ncu_call[ncu_call.index("nsighttc.runtime.launch"):]
    assert "--wait-for" in launcher and "--pid-file" in launcher  # started beside the timeline, gated
    assert "--filter-mode" in ncu_call and launcher[-3:] == [str(script), "--x", "1"]
    ncu_own = ncu_call[:ncu_call.index("nsighttc.runtime.launch")]
    # the one-pass instruction set for the fake's H200 (cc 9.0), and no NVTX tracking: ranges come from the timeline
    assert ncu_own[ncu_own.index("--metrics") + 1].split(",") == ncu_metrics.one_pass_metrics_for_cc("9.0")
    assert "--nvtx" not in ncu_own
    # one steady step per phase: ncu profiles only between the launcher's cudaProfilerStart/Stop, one window step
    assert ncu_own[ncu_own.index("--profile-from-start") + 1] == "off"
    assert "--cuda-profiler" in launcher and launcher[launcher.index("--window-steps") + 1] == "1"
    doc = res.verdict.to_json()
    ev = doc["provenance"]["evidence"]
    assert ev["kernels_needing_hardware"] == 3 and ev["from_cache"] == 0 and ev["to_measure"] == 3
    assert ev["hardware_pass"] == "overlapped" and ev["stopped_early"] and ev["measured"] == 3
    # every ncu pass's frontend is looked for (running.start_pass, collect.yield_cores): this fake ncu is Python
    # itself, so nothing stands between it and the program and nothing is lowered
    assert ev["ncu_frontends"] == [{"pass": "overlapped", "supported": True, "lowered_processes": 0}]
    assert doc["timeline"]["verdict"] == "cpu-bound"  # the real nsys recording's verdict
    # nvjet is in the ncu recording: its time is hardware-confirmed; the other two keep their names' answer
    src = doc["tensor_cores"]["evidence_sources"]
    assert src["ncu_this_run"] > 0 and src["kernel_names"] > 0 and src["ncu_cache"] == 0
    assert any("stopped after the 3 kernel(s)" in n for n in res.notes)
    for f in ("verdict.json", "report.md", "run.json", "nsys.sqlite", "ncu.ncu-rep"):
        assert (res.run_dir / f).exists(), f
    assert not (res.run_dir / ".ncu-gate").exists()
    cache = json.loads(next((tmp_path / "cache" / "evidence").glob("*.json")).read_text())
    assert cache["gpu"] == "NVIDIA H200" and any(e["name"] == NVJET and e["tensor_core"] for e in cache["kernels"].values())
    assert "matrix-work time:" in (res.run_dir / "report.md").read_text()


def test_second_run_takes_the_evidence_from_the_cache_and_runs_no_ncu(env, tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env(nsys_drop=["Kernel2", XMMA])  # the recording keeps one matrix kernel: nvjet, which ncu measures
    script.write_text(PROFILED_THEN_LONG)
    target = resolve_target(str(script), [], None)
    first = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert first.engines == ["nsys", "ncu"]
    assert first.verdict.to_json()["tensor_cores"]["evidence_sources"]["ncu_this_run"] == 1.0
    n_ncu = len(_ncu_calls(tmp_path))
    second = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert second.engines == ["nsys"] and len(_ncu_calls(tmp_path)) == n_ncu  # ncu not even started
    doc = second.verdict.to_json()
    assert doc["provenance"]["evidence"]["hardware_pass"] == "not needed (cache)"
    assert doc["tensor_cores"]["evidence_sources"] == {"ncu_this_run": 0.0, "ncu_cache": 1.0, "kernel_names": 0.0}
    assert doc["tensor_cores"]["evidence"] == "hardware"
    assert doc["tensor_cores"]["verdict"] == first.verdict.to_json()["tensor_cores"]["verdict"]
    assert any("came from the evidence cache" in n for n in second.notes)
    # --hardware measures again; --no-cache neither reads nor writes
    third = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys", hardware=True))
    assert third.engines == ["nsys", "ncu"]
    fourth = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys", cache=False))
    assert fourth.engines == ["nsys", "ncu"]
    # entries measured by instruction counts (dtype from the name) serve the default run, but not --counters
    # full, which then measures with the FLOP counters
    path = next((tmp_path / "cache" / "evidence").glob("*.json"))
    doc = json.loads(path.read_text())
    for e in doc["kernels"].values():
        e["dtype_named"] = True
    path.write_text(json.dumps(doc))
    n_ncu = len(_ncu_calls(tmp_path))
    fifth = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert fifth.engines == ["nsys"] and len(_ncu_calls(tmp_path)) == n_ncu
    assert "dtype from the kernel name" in " ".join(fifth.verdict.launches["evidence_detail"].astype(str).unique())
    assert fifth.verdict.to_json()["tensor_cores"]["dtype_from_names_share"] == 1.0
    sixth = profile(target, Options(out=tmp_path / "runs", timeline_engine="nsys", counters="full"))
    assert sixth.engines == ["nsys", "ncu"] and len(_ncu_calls(tmp_path)) == n_ncu + 1
    call = _ncu_calls(tmp_path)[-1]
    assert call[call.index("--metrics") + 1].split(",") == ncu_metrics.metrics_for_cc("9.0")


def test_fast_is_the_timeline_alone(env, tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    code, _, err = run_cli("profile", "--fast", "--timeline-engine", "nsys", "--out", tmp_path / "runs", script)
    assert code == 0 and not _ncu_calls(tmp_path)
    assert "--fast: timeline only" in err and "GPU busy" in err and "report: " in err
    code, _, err = run_cli("profile", "--fast", "--hardware", script)
    assert code == 2 and "contradict" in err
    code, _, err = run_cli("profile", "--engine", "ncu", "--counters", "full", script)
    assert code == 2 and "--counters" in err and "Traceback" not in err


def test_default_picks_torch_profiler_for_python_programs_with_torch(env, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    from nsighttc.profile import default
    monkeypatch.setattr(default, "_cores", lambda: default.MIN_CORES_BESIDE)
    script = env()
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs"))
    assert res.engines == ["torch"]  # CPU torch: no GPU kernel needs evidence, the ncu pass is stopped
    assert (res.run_dir / "torch_trace.json").exists()
    # the trace was read once the launcher said it was written; the pass' end (exit code 0) came after
    timeline = json.loads((res.run_dir / "run.json").read_text())["passes"][0]
    assert timeline["engine"] == "torch" and 0 < timeline["trace_written_s"] <= timeline["seconds"]
    assert json.loads((res.run_dir / "run.json").read_text())["exit_codes"]["torch"] == 0
    # with a replay to plan, only its kernel scan reads the trace while it is written (nothing to replay on a CPU)
    evidence = json.loads((res.run_dir / "run.json").read_text())["evidence"]
    assert evidence["early_plan"]["source"] == "trace kernel events, read while written"
    assert "trace_parse" not in evidence
    # without one (--fast), the whole trace is parsed while it is written, and the verdict is made from that parse
    fast = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", fast=True))
    evidence = json.loads((fast.run_dir / "run.json").read_text())["evidence"]
    assert evidence["trace_parse"]["while_written"] is True and "error" not in evidence["trace_parse"]
    assert "early_plan" not in evidence
    verdict = json.loads((fast.run_dir / "verdict.json").read_text())
    assert verdict["timeline"] and verdict["tensor_cores"]["kernel_time_ns"] == 0
    ncu = _ncu_calls(tmp_path)
    # the replay process and the program's ncu pass both wait beside the timeline (the program at its first CUDA
    # use); with nothing missing after the replay, the program's pass was stood down
    assert len(ncu) == 2
    replay = [c for c in ncu if "nsighttc.runtime.replay" in c]
    assert replay and replay[0][replay[0].index("--gate-at") + 1] == "warm"
    assert replay[0][replay[0].index("--nvtx-include") + 1] == "nsighttc-replay/"
    program = [c for c in ncu if "nsighttc.runtime.launch" in c]
    assert program and program[0][program[0].index("--gate-at") + 1] == "cuda" and "--wait-for" in program[0]
    assert json.loads((res.run_dir / "run.json").read_text())["evidence"]["hardware_pass"] != "overlapped"
    # a host with fewer cores: only the replay waits beside; the program's pass would start after it
    monkeypatch.setattr(default, "_cores", lambda: default.MIN_CORES_BESIDE - 1)
    profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", cache=False))  # (a first run)
    ncu = _ncu_calls(tmp_path)[2:]
    assert len(ncu) == 1 and "nsighttc.runtime.replay" in ncu[0]


LOOP = """
import os, sys, time, torch
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(int(os.environ.get("ITERATIONS", "3000"))):
    time.sleep(0.004)
    opt.zero_grad(); m(x).sum().backward(); opt.step()
print("RAN TO THE END")
sys.exit(3)
"""


def test_the_default_run_records_a_window_and_stops_the_program(env, tmp_path, monkeypatch, run_cli):
    pytest.importorskip("torch")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    script.write_text(LOOP)
    t0 = time.monotonic()
    from nsighttc.profile import default
    monkeypatch.setattr(default, "_cores", lambda: default.MIN_CORES_BESIDE)  # the figures drawn by workers
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", fast=True, steps=15))
    assert time.monotonic() - t0 < 60 and res.exit_code == 0  # stopped by nsighttc: 0, not the program's 3
    phases = json.loads((res.run_dir / "run.json").read_text())["phase_seconds"]
    assert set(phases["figures_by_workers"]) == {"timeline", "kernel_time"}
    linked = {f for f in ("timeline.png", "kernel_time.png") if f"]({f})" in (res.run_dir / "report.md").read_text()}
    assert linked == {f for f in ("timeline.png", "kernel_time.png") if (res.run_dir / f).exists()}
    assert ("timeline.png" in linked) == phases["figures_by_workers"]["timeline"]
    marks = phases["marks"]
    assert set(marks) == {"timeline_started", "timeline_written", "trace_read", "planned"}
    assert 0 <= marks["timeline_started"] < marks["timeline_written"] <= marks["trace_read"] <= marks["planned"]
    log = (res.run_dir / "torch.log").read_text()
    assert "RAN TO THE END" not in log
    window = json.loads((res.run_dir / "run.json").read_text())["passes"][0]["window"]
    assert window["stopped_after_window"] and window["phases"][0]["steps"] == 15 and window["phases"][0]["complete"]
    steps = res.verdict.to_json()["timeline"]["steps"]
    assert steps["source"] == "hook" and steps["count"] - steps["warmup_steps"] >= 15
    assert any(n.startswith("recorded a window of steady steps: 15 steps") for n in res.notes)
    # the run's own cost beside the verdict (profile.run_cost): its time to the verdict, the program's part of it and
    # a plain run of what it ran, estimated from the steps it ran unrecorded
    cost = json.loads((res.run_dir / "verdict.json").read_text())["provenance"]["run_cost"]
    assert 0 < cost["program_s"] <= cost["elapsed_s"] < 60
    assert abs(cost["elapsed_s"] - cost["program_s"] - cost["after_program_s"]) < 0.02
    assert steps["unrecorded"]["median_ns"] > 0 and 0 < cost["plain_estimate_s"] <= cost["program_s"]
    assert cost["ratio"] == pytest.approx(cost["elapsed_s"] / cost["plain_estimate_s"], abs=0.01)
    assert cost["lower_bound"] is False  # (--fast: no operators recorded before the window)
    assert f"This run took {cost['elapsed_s']:.1f} s to its verdict, {cost['ratio']:.2f}x a plain run" in \
        (res.run_dir / "report.md").read_text()
    # --full-run: the program finishes (its own exit code), the window alone is recorded: 400 of its 4 ms steps (not
    # the 3000 a stopped run never reaches: 12 s of sleeping)
    monkeypatch.setenv("ITERATIONS", "400")
    full = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", fast=True, steps=15,
                                                                   full_run=True))
    assert full.exit_code == 3 and "RAN TO THE END" in (full.run_dir / "torch.log").read_text()
    assert full.verdict.to_json()["timeline"]["steps"]["count"] < 100
    code, _, err = run_cli("profile", "--whole-program", "--steps", "5", script)
    assert code == 2 and "--whole-program" in err and "Traceback" not in err
    code, _, err = run_cli("profile", "--warmup", "many", script)
    assert code == 2 and "many" in err


def test_without_ncu_the_default_is_the_timeline_with_name_evidence(env, tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env(ncu=None)
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert res.engines == ["nsys"]
    assert any("ncu was not found" in n for n in res.notes)


def test_counter_permission_denied(env, tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env(ncu="perm")
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", tmp_path / "runs", script)
    assert code == 6 and "ERR_NVGPUCTRPERM" in err and "CAP_SYS_ADMIN" in err and "Traceback" not in err
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs2", timeline_engine="nsys"))
    assert res.engines == ["nsys"] and any("refused the performance counters" in n for n in res.notes)
    assert res.verdict.to_json()["timeline"]["verdict"] == "cpu-bound"


def test_broken_nsys_importer_is_diagnosed(env, tmp_path, run_cli):
    script = env(ncu=None, nsys="qdstrm")
    code, _, err = run_cli("profile", "--engine", "nsys", "--out", tmp_path / "runs", script)
    assert code == 4 and ".qdstrm" in err and "libdw.so.1" in err


def test_no_gpu(env, tmp_path, run_cli):
    script = env(gpu=False)
    code, _, err = run_cli("profile", script)
    assert code == 5 and "no NVIDIA GPU" in err and "nsighttc analyze" in err


def test_script_not_found_and_tool_not_found(env, tmp_path, run_cli):
    env(ncu=None, nsys=None)
    code, _, err = run_cli("profile", tmp_path / "missing.py")
    assert code == 2 and "script not found" in err
    code, _, err = run_cli("profile", "--engine", "ncu", tmp_path / "work.py")
    assert code == 3 and "ncu not found" in err and "$PATH" in err


def test_workload_exit_code_is_returned(env, tmp_path, run_cli):
    script = env()
    script.write_text("import sys; sys.exit(3)\n")
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", tmp_path / "runs", script)
    assert code == 3 and "exited with code 3" in err


def test_run_directories_are_never_reused(tmp_path):
    a = new_run_dir(tmp_path, "x")
    b = new_run_dir(tmp_path, "x")
    assert a != b and a.exists() and b.exists()


def test_module_and_command_targets(tmp_path):
    t = resolve_target(None, [], ["python3", "-m", "mypkg.train", "--epochs", "1"])
    assert t.module and t.python_program and t.argv == ["mypkg.train", "--epochs", "1"]
    script = tmp_path / "s.py"
    script.write_text("")
    t = resolve_target(None, [], ["python", str(script), "a"])
    assert not t.module and t.argv == [str(script), "a"]


def test_timeout_kills_the_process_group_and_still_reports(env, tmp_path):
    script = env()
    pidfile = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    t0 = time.monotonic()
    res = profile(resolve_target(str(script), [], None), Options(engine="ncu", out=tmp_path / "runs", timeout=3))
    assert time.monotonic() - t0 < 30
    assert res.timed_out and res.exit_code == 124
    time.sleep(0.5)
    assert not _alive(int(pidfile.read_text()))
    assert (res.run_dir / "run.json").exists()
    assert any("--timeout" in n for n in res.notes)


# Ctrl-C as a terminal delivers it: SIGINT to the process running nsighttc. That process is a child of the test
# started with SIGINT at its default handler, so the test holds whatever pytest's runner does with SIGINT (ignored in
# a background job, taken by pytest-xdist's workers) and never waits out the program's sleep.
CTRL_C_DRIVER = """import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from nsighttc.profile import Options, profile, resolve_target
res = profile(resolve_target(sys.argv[1], [], None), Options(engine="ncu", out=sys.argv[2]))
print(json.dumps({"interrupted": res.interrupted, "exit_code": res.exit_code, "notes": res.notes}))
"""


def test_ctrl_c_kills_the_process_group(env, tmp_path):
    script = env()
    pidfile = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    driver = subprocess.Popen([sys.executable, "-c", CTRL_C_DRIVER, str(script), str(tmp_path / "runs")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    t0 = time.monotonic()
    while not pidfile.exists() and time.monotonic() - t0 < 60:  # a loaded 2-core machine: >10 s to start once
        time.sleep(0.05)
    assert pidfile.exists(), "the program never started"
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=60)
    res = json.loads(out.strip().splitlines()[-1])
    assert res["interrupted"] and res["exit_code"] == 130, err[-2000:]
    assert time.monotonic() - t0 < 40  # not the program's 60 s
    time.sleep(0.5)
    assert not _alive(int(pidfile.read_text()))
    assert any("interrupted" in n for n in res["notes"])


def test_sigterm_to_the_command_stops_the_programs_process_group_as_ctrl_c_does(env, tmp_path):
    """`timeout`, a cancelled CI job: SIGTERM to `nsighttc profile` stops the profiled program's whole group (two
    H200s: a torchrun job left running kept its port, and the next job failed with EADDRINUSE)."""
    script = env()
    pidfile = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    cmd = [sys.executable, "-m", "nsighttc", "profile", "--engine", "ncu", "--out", str(tmp_path / "runs"), str(script)]
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    t0 = time.monotonic()
    while not pidfile.exists() and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    assert pidfile.exists(), "the program never started"
    driver.send_signal(signal.SIGTERM)
    out, err = driver.communicate(timeout=60)
    assert driver.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert time.monotonic() - t0 < 40  # not the program's 60 s
    time.sleep(0.5)
    assert not _alive(int(pidfile.read_text()))


def test_a_later_pass_that_fails_is_a_note_not_the_exit_code(env, tmp_path, monkeypatch):
    """The program's own run (the timeline pass) exits 0; under ncu it crashes with 11 after two of the three
    kernels were profiled (the Trainer under ncu on H100 did): the run exits 0 and says what happened."""
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    script.write_text(f"""import os, sys
print('workload ran', flush=True)
if os.environ.get('FAKE_TOOL') == 'ncu':
    for name in {[NVJET, "Kernel2"]!r}:
        print(f'==PROF== Profiling "{{name}}": 0%....50%....100% - 1 passes', flush=True)
    sys.exit(11)
""")
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", timeline_engine="nsys"))
    assert res.exit_code == 0 and res.engines == ["nsys", "ncu"]
    assert any("pass (ncu) exited with code 11" in n and "program's own run exited 0" in n for n in res.notes)
    meta = json.loads((res.run_dir / "run.json").read_text())
    assert [(p["engine"], p["returncode"]) for p in meta["pass_exit_codes"]] == [("nsys", 0), ("ncu", 11)]


SLOW_EXIT = """
import atexit, os, sys, time, torch
m = torch.nn.Linear(16, 16); x = torch.randn(8, 16)
for _ in range(20):
    m(x).sum().backward()
def slow_shutdown():
    # a slow shutdown (a CUDA program's took 0.8-2.5 s on H100), here one that lasts until nsighttc's report is
    # written and 1.5 s more: on a loaded 2-core host the analysis took over 3 s, longer than a fixed 4 s sleep did
    import glob
    runs, t = os.environ.get("RUNS_DIR"), time.time()
    while runs and not glob.glob(os.path.join(runs, "*", "report.md")) and time.time() - t < 60:
        time.sleep(0.05)
    time.sleep(1.5)
    if runs:
        open(os.path.join(runs, "ended_at"), "w").write(repr(time.time()))
atexit.register(slow_shutdown)
if os.environ.get("EXIT_IN_SHUTDOWN"):
    atexit.register(lambda: os._exit(int(os.environ["EXIT_IN_SHUTDOWN"])))  # runs first: its end is not the said one
sys.exit(3)
"""


def test_the_verdict_is_made_while_the_launcher_exits_and_checked_against_its_real_end(env, tmp_path, monkeypatch):
    """The launcher says its exit code before writing the trace; the report is written while its process still
    exits, and the run still waits for that end: its time and its exit code are the process' own."""
    pytest.importorskip("torch")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    script.write_text(SLOW_EXIT)
    monkeypatch.setenv("RUNS_DIR", str(tmp_path / "runs"))
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", fast=True))
    ended = time.time()
    assert res.exit_code == 3 and any("exited with code 3" in n for n in res.notes)
    meta = json.loads((res.run_dir / "run.json").read_text())
    tl = meta["passes"][0]
    assert tl["seconds"] - tl["trace_written_s"] >= 1.5  # the pass' time is its process' end, after the shutdown
    # report.md was written before the process had ended (its shutdown waits for the report, then 1.5 s), and the
    # run waited for that end: the program's last act is before the run returned
    process_end = float((tmp_path / "runs" / "ended_at").read_text())
    assert (res.run_dir / "report.md").stat().st_mtime < process_end <= ended
    assert meta["phase_seconds"]["exit_after_report"] > 1.0 and meta["exit_codes"]["torch"] == 3
    verdict = json.loads((res.run_dir / "verdict.json").read_text())
    assert verdict["provenance"]["passes"][0]["seconds"] == tl["seconds"]  # rewritten with the real end
    # a shutdown that ends with another code than the one the launcher said: the verdict is made again with it
    monkeypatch.setenv("EXIT_IN_SHUTDOWN", "7")
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", fast=True))
    assert res.exit_code == 7 and any("exited with code 7" in n for n in res.notes)
    assert not any("exited with code 3" in n for n in res.notes)
    verdict = json.loads((res.run_dir / "verdict.json").read_text())
    assert any("exited with code 7" in w for w in verdict["warnings"])
    assert json.loads((res.run_dir / "run.json").read_text())["exit_codes"]["torch"] == 7


WINDOWED = """
import os, sys, time, torch
for _ in range(int(os.environ.get("SETUP_OPS", "200"))):  # set-up work before any step
    with torch.profiler.record_function("setup"):
        torch.randn(4, 4).sum()
m = torch.nn.Linear(16, 16); opt = torch.optim.SGD(m.parameters(), lr=0.01); x = torch.randn(8, 16)
for i in range(int(os.environ.get("STEPS", "3000"))):
    time.sleep(0.004)
    opt.zero_grad(); m(x).sum().backward(); opt.step()
"""


def _ops_named(trace: Path, name: str) -> int:
    return sum(1 for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == name)


def _operators(trace: Path) -> int:
    return sum(1 for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "cpu_op")


def test_a_second_run_records_from_the_window_and_a_program_without_one_is_recorded_again_whole(env, tmp_path,
                                                                                                monkeypatch):
    """The evidence cache knows the program and that it had a window: its next run's profiler records from the
    window's start (the set-up and warm-up unrecorded, their time still in the start-up); if no window starts
    then, the program is run again and recorded whole."""
    pytest.importorskip("torch")
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = env()
    script.write_text(WINDOWED)
    target = resolve_target(str(script), [], None)
    first = profile(target, Options(out=tmp_path / "runs", fast=True, steps=15))
    w1 = json.loads((first.run_dir / "run.json").read_text())["passes"][0]["window"]
    assert w1["recorded_from"] == "start" and w1["phases"]
    assert _ops_named(first.run_dir / "torch_trace.json", "setup") == 200  # the set-up was recorded
    # no replay (--fast): the ranges and the GPU only, not every operator (runtime.recording)
    assert _operators(first.run_dir / "torch_trace.json") == 0 and \
        "--no-operators" in json.loads((first.run_dir / "run.json").read_text())["commands"][0]
    second = profile(target, Options(out=tmp_path / "runs", fast=True, steps=15))
    tl = json.loads((second.run_dir / "run.json").read_text())["passes"][0]
    assert tl["window"]["recorded_from"] == "window" and tl["window"]["recorded_from_s"] > 0
    assert "--record-from" in json.loads((second.run_dir / "run.json").read_text())["commands"][0]
    trace = second.run_dir / "torch_trace.json"
    assert _ops_named(trace, "setup") == 0 and _operators(trace) == 0  # the set-up ran unrecorded
    assert _ops_named(trace, "Optimizer.step#SGD.step") >= 15 and second.exit_code == 0
    doc = second.verdict.to_json()
    # the ranges open when the recording began (the launcher's top range) still name the steps' phase
    assert doc["timeline"]["steps"]["families"] == first.verdict.to_json()["timeline"]["steps"]["families"]
    st = doc["timeline"]["startup"]
    assert st["unrecorded_s"] == tl["window"]["recorded_from_s"] and st["seconds"] >= st["unrecorded_s"]
    assert any("recorded from the window's start" in n for n in second.notes)
    assert "before the recording began at the window" in (second.run_dir / "report.md").read_text()
    # the same program, now too short for a window: nothing was recorded, so it runs again, recorded whole
    monkeypatch.setenv("STEPS", "1")
    third = profile(target, Options(out=tmp_path / "runs", fast=True, steps=15))
    assert any(n.startswith("no window of steady steps started this time") for n in third.notes)
    assert "no trace: the program ended before any window" in (third.run_dir / "torch.window-try.stderr.log").read_text()
    assert _ops_named(third.run_dir / "torch_trace.json", "setup") == 200
    meta = json.loads((third.run_dir / "run.json").read_text())
    assert meta["passes"][0]["window"]["recorded_from"] == "start" and third.exit_code == 0
