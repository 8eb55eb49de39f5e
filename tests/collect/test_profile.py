"""`nsighttc profile` end to end with fake tools (launching is what is tested; parsing stays real)."""
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from nsighttc.collect import tools
from nsighttc.profile import Options, profile, resolve_target, new_run_dir
from tests.collect.fakes import calls, make_bin

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


def test_auto_runs_one_ncu_pass_and_writes_the_run_directory(env, tmp_path):
    script = env()
    res = profile(resolve_target(str(script), ["--x", "1"], None), Options(out=tmp_path / "runs"))
    assert res.engines == ["ncu"] and res.exit_code == 0
    ncu_call = [c for c in calls(tmp_path) if Path(c[0]).name == "ncu" and "-o" in c][0]
    assert "--filter-mode" in ncu_call and ncu_call[ncu_call.index("--metrics") + 1].startswith("gpu__time_duration.sum,sm__ops_path")
    assert ncu_call[-3:] == [str(script), "--x", "1"]
    d = res.run_dir
    for f in ("verdict.json", "report.md", "run.json", "ncu.log", "ncu.ncu-rep"):
        assert (d / f).exists(), f
    assert "workload ran ['--x', '1']" in (d / "ncu.log").read_text()
    doc = res.verdict.to_json()
    assert doc["tensor_cores"]["evidence"] == "hardware" and doc["tensor_cores"]["basis"] == "sampled"
    assert doc["provenance"]["engines"] == ["ncu"] and "FAKE ncu" in doc["provenance"]["versions"]["ncu"]
    assert doc["provenance"]["gpu"][0]["name"] == "NVIDIA H200"
    report = (d / "report.md").read_text()
    assert "<summary>Provenance</summary>" in report and "NVIDIA H200 (CC 9.0" in report
    assert f"Command: `{doc['provenance']['commands'][0]}`" in report


def test_timeline_flag_adds_an_nsys_pass_and_merges(env, tmp_path):
    script = env()
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs", timeline=True))
    assert res.engines == ["ncu", "nsys"]
    doc = res.verdict.to_json()
    assert doc["timeline"]["verdict"] == "cpu-bound"  # the replayed nsys recording
    assert (res.run_dir / "nsys.sqlite").exists()


def test_auto_without_ncu_uses_nsys(env, tmp_path):
    script = env(ncu=None)
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs"))
    assert res.engines == ["nsys"]
    assert any("Tensor Core evidence comes from kernel names only" in n for n in res.notes)


def test_counter_permission_denied(env, tmp_path, run_cli):
    script = env(ncu="perm")
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", tmp_path / "runs", script)
    assert code == 6 and "ERR_NVGPUCTRPERM" in err and "CAP_SYS_ADMIN" in err and "Traceback" not in err
    res = profile(resolve_target(str(script), [], None), Options(out=tmp_path / "runs2"))  # auto falls back
    assert res.engines == ["nsys"] and any("fell back" in n for n in res.notes)


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


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


def test_ctrl_c_kills_the_process_group(env, tmp_path):
    script = env()
    pidfile = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")

    def interrupt():
        for _ in range(100):
            if pidfile.exists():
                break
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=interrupt, daemon=True).start()
    res = profile(resolve_target(str(script), [], None), Options(engine="ncu", out=tmp_path / "runs"))
    assert res.interrupted and res.exit_code == 130
    time.sleep(0.5)
    assert not _alive(int(pidfile.read_text()))
    assert any("interrupted" in n for n in res.notes)
