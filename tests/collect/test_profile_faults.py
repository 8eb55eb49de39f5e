"""`nsighttc profile` under faults (issue 14): tools that hang or die mid-write, a workload whose grandchild
ignores SIGTERM, an output directory that cannot be written. Each ends with a clear message, the right exit
code, nothing left running, and what was recorded kept and listed."""
import errno
import os
import sys
import time
from pathlib import Path

import pytest

from nsighttc.collect import process, tools
from nsighttc.profile import Options, profile, resolve_target
from tests.collect.fakes import alive as _alive, make_bin


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    # each signal's wait before the next: what is tested is the order and that nothing is left, not the 5 s a
    # real profiler gets to write its report (two such waits were 10 s of a hanging tool's test)
    monkeypatch.setattr(process, "KILL_GRACE_S", 1.0)
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    script = tmp_path / "work.py"
    script.write_text("print('workload ran')\n")

    def setup(**kw):
        b = make_bin(tmp_path, **kw)
        monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}")
        return script
    return setup


def test_a_hanging_profiler_is_killed_at_the_timeout(fake, tmp_path, run_cli):
    script = fake(ncu="hang")
    t0 = time.monotonic()
    code, _, err = run_cli("profile", "--engine", "ncu", "--timeout", "2", "--out", tmp_path / "runs", script)
    assert code == 124 and time.monotonic() - t0 < 40 and "Traceback" not in err
    assert "--timeout 2s reached" in err
    time.sleep(0.5)
    assert not _alive(int((tmp_path / "ncu.pid").read_text()))  # ignored SIGINT and SIGTERM: SIGKILLed
    run = next((tmp_path / "runs").iterdir())
    assert (run / "run.json").exists() and (run / "ncu.log").exists()


def test_a_profiler_that_dies_mid_write(fake, tmp_path, run_cli):
    script = fake(ncu="dies")
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", tmp_path / "runs", script)
    assert code == 4 and "Traceback" not in err and "internal error" not in err
    assert "ncu died of signal 9 (SIGKILL)" in err
    run = next((tmp_path / "runs").iterdir())
    half = run / "ncu.ncu-rep"
    assert half.exists() and half.stat().st_size > 0  # the partial report is kept ...
    assert "what was recorded is kept" in err and "ncu.ncu-rep (" in err  # ... and listed
    assert not _alive(int((tmp_path / "ncu.pid").read_text()))


def test_a_grandchild_that_ignores_sigterm_is_gone_after_the_timeout(fake, tmp_path):
    script = fake()
    pid_file = tmp_path / "grandchild.pid"
    script.write_text(
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(g.pid))\n"
        "time.sleep(600)\n")
    res = profile(resolve_target(str(script), [], None), Options(engine="ncu", out=tmp_path / "runs", timeout=3))
    assert res.timed_out and res.exit_code == 124
    time.sleep(0.5)
    assert not _alive(int(pid_file.read_text()))


def test_an_output_directory_that_cannot_be_created(fake, tmp_path, run_cli):
    script = fake()
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", blocker / "runs", script)
    assert code == 2 and "cannot create the run directory" in err and str(blocker) in err and "Traceback" not in err
    assert blocker.read_text() == "not a directory"


def test_a_full_disk_while_writing_the_report(fake, tmp_path, run_cli, monkeypatch):
    script = fake()
    real = Path.write_text

    def full(self, *a, **kw):
        if self.name == "verdict.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **kw)
    monkeypatch.setattr(Path, "write_text", full)
    code, _, err = run_cli("profile", "--engine", "ncu", "--out", tmp_path / "runs", script)
    assert code == 4 and "No space left on device" in err and "Traceback" not in err
    assert "what was recorded is kept" in err and "ncu.ncu-rep (" in err
    run = next((tmp_path / "runs").iterdir())
    assert (run / "ncu.ncu-rep").exists()
    assert not _alive(int((tmp_path / "ncu.pid").read_text()))
