"""A program waiting at its gate pauses the profiler frontends above it (nsighttc/runtime/paused_frontends.py).

ncu's frontend spins a core while its program waits at the gate, and in the idle scheduling class it still slowed the
timeline run beside it (H200: a transformers pipeline's first run 27.1 ms a step against 12 ms cached; 56.2 images/s
plain against 29.9 beside two idle-class busy loops; reports/steps_time, firstcost). The frontend here is a stand-in
that spins the same way (a fake executable, for how the processes are run, not for what any profiler writes)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsighttc.collect import process
from nsighttc.record_format import FRONTENDS_PAUSED
from nsighttc.runtime import paused_frontends
from nsighttc.runtime.gate import write_gate

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(signal, "SIGSTOP"),
                                reason="needs Linux /proc and SIGSTOP")

# a frontend as ncu's behaves: it starts the program and spins until the program ends
FRONTEND = "import subprocess, sys\nchild = subprocess.Popen(sys.argv[1:])\nwhile child.poll() is None:\n    pass\n" \
           "sys.exit(child.returncode)\n"
# the program: waits at the gate as the launcher and the replay do; 0 for 'go', 3 for 'stop'
PROGRAM = "import sys\nfrom pathlib import Path\nfrom nsighttc.runtime.gate import wait_at_gate\n" \
          "sys.exit(0 if wait_at_gate(Path(sys.argv[1])) else 3)\n"


def _state(pid: int) -> str:
    """The process's state letter (R, S, T stopped, Z), '' once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return raw[raw.rindex(")") + 2]


def _cpu_s(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    f = raw[raw.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _until(check, limit_s: float = 30.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def _scripts(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "frontend.py").write_text(FRONTEND)
    (tmp_path / "program.py").write_text(PROGRAM)
    return tmp_path / "frontend.py", tmp_path / "program.py"


def _env(owner: int, **extra) -> dict:
    here = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "NSIGHTTC_GATE_OWNER": str(owner), **extra}


def test_the_frontend_is_stopped_while_its_program_waits_and_goes_on_when_the_gate_opens(tmp_path):
    frontend, program = _scripts(tmp_path)
    gate = tmp_path / ".ncu-gate"
    run = process.start([sys.executable, str(frontend), sys.executable, str(program), str(gate)],
                        stdout_path=tmp_path / "out.log", stderr_path=tmp_path / "err.log", env=_env(os.getpid()))
    try:
        assert _until(lambda: _state(run.pid) == "T"), "the spinning frontend was never paused"
        used = _cpu_s(run.pid)
        time.sleep(0.5)
        assert _cpu_s(run.pid) == used and _state(run.pid) == "T"  # paused: not one tick of CPU while it waits
        write_gate(gate, "go")
        r = run.wait(timeout=30)
    finally:
        if run.proc.poll() is None:
            run.kill(grace_s=1)
    assert r.returncode == 0  # the frontend went on, saw its program leave the gate and end, and ended too
    said = [ln for ln in (tmp_path / "err.log").read_text().splitlines() if FRONTENDS_PAUSED in ln]
    assert len(said) == 1 and "(1 processes)" in said[0]


def test_a_frontend_paused_for_a_gate_whose_owner_died_is_let_go(tmp_path):
    """nsighttc killed (SIGKILL) while the frontend is stopped: the program sees its owner gone, continues the
    frontend and leaves; nothing stays stopped behind a run that no longer exists."""
    frontend, program = _scripts(tmp_path)
    pid_file = tmp_path / "frontend.pid"
    owner_py = tmp_path / "owner.py"
    owner_py.write_text(
        "import os, subprocess, sys, time\n"
        f"env = dict(os.environ, NSIGHTTC_GATE_OWNER=str(os.getpid()))\n"
        f"fe = subprocess.Popen([sys.executable, {str(frontend)!r}, sys.executable, {str(program)!r}, "
        f"{str(tmp_path / 'gate')!r}], env=env)\n"
        f"open({str(pid_file)!r}, 'w').write(str(fe.pid))\n"
        "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, str(owner_py)], env=_env(0), start_new_session=True)
    try:
        assert _until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        fe = int(pid_file.read_text())
        assert _until(lambda: _state(fe) == "T")
        owner.kill()
        owner.wait()
        # the program notices within its owner checks (every 50 polls of the gate), continues its frontend and ends;
        # the frontend then ends too (a zombie until someone reaps it, never stopped)
        assert _until(lambda: _state(fe) in ("", "Z"), 20.0), _state(fe)
    finally:
        try:
            os.killpg(owner.pid, signal.SIGKILL)
        except OSError:
            pass


def test_ctrl_c_reaches_a_paused_frontend(tmp_path):
    """The profile run's Ctrl-C (SIGINT to the pass's group, then SIGTERM, SIGKILL): a stopped frontend acts on it
    only once continued; the group is continued with each signal, and the program's interrupt continues it too."""
    frontend, program = _scripts(tmp_path)
    run = process.start([sys.executable, str(frontend), sys.executable, str(program), str(tmp_path / "gate")],
                        stdout_path=tmp_path / "out.log", stderr_path=tmp_path / "err.log", env=_env(os.getpid()))
    assert _until(lambda: _state(run.pid) == "T")
    run.kill(grace_s=5)
    assert run.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(run.pid, 0)


def test_nothing_is_paused_without_an_owner_above_or_when_turned_off(monkeypatch):
    monkeypatch.setenv("NSIGHTTC_GATE_OWNER", str(os.getppid()))
    assert paused_frontends.frontends() == []   # the owner is this process's parent: nothing between them
    monkeypatch.setenv("NSIGHTTC_GATE_OWNER", "1")
    chain = paused_frontends.frontends()
    assert os.getppid() in chain or os.getppid() == 1  # everything up to init lies between
    monkeypatch.setenv(paused_frontends.OFF_ENV, "0")
    assert paused_frontends.frontends() == []
    monkeypatch.delenv(paused_frontends.OFF_ENV)
    monkeypatch.setenv("NSIGHTTC_GATE_OWNER", "999999999")  # not an ancestor (gone, or another run's)
    assert paused_frontends.frontends() == []
