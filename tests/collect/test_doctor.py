"""`nsighttc doctor` with fake nvidia-smi / ncu / nsys (how we launch probes, not what we parse): the slow
checks run side by side, a good result is cached until something changes, --refresh probes again."""
import os
import sys
import time
from pathlib import Path

import pytest

from nsighttc.collect import doctor, tools
from tests.collect.fakes import calls, make_bin


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(doctor, "_torch_info", lambda: ("2.11.0", "13.0", True))  # a CUDA torch, as on the GPU machine
    monkeypatch.setattr(doctor, "PROBE", "print('probe')")

    def setup(**kw):
        b = make_bin(tmp_path, **kw)
        monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}")
        return b
    return setup


def _by_name(checks):
    return {c.name: c for c in checks}


def test_probes_then_cache_then_refresh(env, tmp_path, run_cli):
    env(ncu="perm", nsys="ok")
    checks = _by_name(doctor.run_checks())
    assert checks["ncu counters"].status == "broken" and "ERR_NVGPUCTRPERM" in checks["ncu counters"].detail
    assert checks["nsys import"].status == "OK"
    assert not (tmp_path / "cache" / "doctor.json").exists()  # broken setups are never cached
    env(ncu=None, nsys="ok")  # the user removed the broken ncu from PATH
    (tmp_path / "bin" / "ncu").unlink()
    first = _by_name(doctor.run_checks())
    assert first["ncu"].status == "missing" and first["nsys import"].status == "OK"
    n = len(calls(tmp_path))
    code, out, _ = run_cli("doctor")
    assert code == 0 and "cache" in out and "--refresh" in out and "nsys import" in out
    assert len(calls(tmp_path)) == n  # answered from the cache: no tool was started
    code, out, _ = run_cli("doctor", "--refresh")
    assert code == 0 and len(calls(tmp_path)) > n and "nothing changed since" not in out


def test_a_changed_tool_invalidates_the_cache(env, tmp_path):
    b = env(ncu=None, nsys="ok")
    doctor.run_checks()
    n = len(calls(tmp_path))
    assert _by_name(doctor.run_checks())["cache"].status == "OK" and len(calls(tmp_path)) == n
    time.sleep(0.01)
    (b / "nsys").touch()  # a new nsys (another mtime): probe again
    checks = _by_name(doctor.run_checks())
    assert "cache" not in checks and len(calls(tmp_path)) > n


def test_probes_run_side_by_side(env, tmp_path, monkeypatch):
    env(ncu=None, nsys="ok")

    def sleepy(path):
        time.sleep(1.0)
        return doctor.Check("nsys import", "OK", "slept")
    monkeypatch.setattr(doctor, "_probe_nsys", sleepy)
    monkeypatch.setattr(doctor, "_torch_info", lambda: (time.sleep(1.0), ("2.11.0", "13.0", True))[1])
    t0 = time.monotonic()
    doctor.run_checks(refresh=True)
    assert time.monotonic() - t0 < 1.9  # two 1 s checks overlapped


def test_doctor_ends_with_what_this_machine_can_do_and_the_next_command(env, tmp_path, run_cli, monkeypatch):
    """Issue 53: one closing line, from what the checks found."""
    env(ncu="perm", nsys="ok")
    code, out, _ = run_cli("doctor")
    last = out.strip().splitlines()[-1]
    assert code == 1 and last.startswith("nsighttc doctor: needs a fix: ncu counters") and "--refresh" in last
    (tmp_path / "bin" / "ncu").unlink()  # no ncu: a timeline, and Tensor Cores by kernel names
    code, out, _ = run_cli("doctor", "--refresh")
    last = out.strip().splitlines()[-1]
    assert code == 0 and "ready to profile with torch.profiler" in last and "kernel names only" in last
    assert "next: `nsighttc profile" in last
    ok = [doctor.Check("GPU 0", "OK", "H100"), doctor.Check("torch", "OK", ""), doctor.Check("ncu", "OK", ""),
          doctor.Check("ncu counters", "OK", "")]
    assert "hardware counters decide" in doctor.conclusion(ok)
    no_gpu = [doctor.Check("GPU", "missing", "no NVIDIA GPU found")]
    assert "next: `nsighttc demo`" in doctor.conclusion(no_gpu)
