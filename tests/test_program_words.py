"""Issue 53: what a failing program says on its way out reaches the user, through ``profile`` and ``try`` alike: a
``sys.exit("message")``, an uncaught exception, a kill by a signal. The launcher keeps the exit code and prints the
message as Python would; the one-line failure names the exit code (or the signal) and the program's last words.
``try`` exits non-zero (7) when its baseline failed."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from nsighttc.collect import tools
from tests.collect.fakes import make_bin

pytest.importorskip("torch")  # (the launcher's torch.profiler engine: the profile and try runs here use it)

PROGRAMS = {
    "exit-message": ("import sys\nprint('working')\nsys.exit('error: --device cuda but no CUDA device here')\n",
                     "exit code 1: error: --device cuda but no CUDA device here"),
    "raises": ("print('working')\nraise RuntimeError('kaboom in the program')\n",
               "exit code 1: RuntimeError: kaboom in the program"),
    "killed": ("import os, signal\nprint('about to die', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n",
               "signal 9 (SIGKILL)"),
}


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """Fake nvidia-smi/ncu/nsys (what is tested is what the program said, not the tools)."""
    monkeypatch.setattr(tools, "_SEARCH", {"ncu": [], "nsys": []})
    monkeypatch.setenv("NSIGHTTC_CACHE_DIR", str(tmp_path / "cache"))
    b = make_bin(tmp_path)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{Path(sys.executable).parent}")


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_profile_says_what_the_program_said(case, tmp_path, fake_gpu, run_cli):
    body, words = PROGRAMS[case]
    script = tmp_path / f"{case}.py"
    script.write_text(body)
    code, _, err = run_cli("profile", "--engine", "torch", "--out", tmp_path / "runs", script)
    assert code != 0 and "Traceback" not in err.replace("Traceback (most recent call last)", "")
    if case == "killed":
        assert "died of signal 9 (SIGKILL); the program's last words: about to die" in err
    else:
        assert f"the workload exited with code {words.split('exit code ', 1)[1]}" in err
    run = next((tmp_path / "runs").iterdir())
    logs = "".join(p.read_text() for p in run.glob("torch*.log"))
    assert words.split(": ", 1)[-1].split(" (")[0] in logs or case == "killed"
    # the report, read alone (a pull request's comment), leads with the failure: its verdict covers a part of the run
    # (a program killed at once wrote no trace: no verdict)
    if case == "killed" and not (run / "verdict.json").exists():
        return
    import json
    exited = json.loads((run / "verdict.json").read_text())["provenance"]["program_exit"]
    assert exited["code"] == (-9 if case == "killed" else 1)
    lead = (run / "report.md").read_text().split("\n")[2]
    assert lead.startswith("**The program failed (") and "this verdict covers what it ran before that" in lead
    assert ("died of signal 9 (SIGKILL)" if case == "killed" else words) in lead


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_try_says_what_the_program_said_and_exits_non_zero(case, tmp_path, run_cli):
    body, words = PROGRAMS[case]
    script = tmp_path / f"{case}.py"
    script.write_text(body)
    code, out, err = run_cli("try", "--out", tmp_path / "runs", "--variant", "tf32", script)
    assert code == 7, err
    assert words in out and "the baseline failed: " in err and words in err
    run = next((tmp_path / "runs").iterdir())
    stderr_log = (run / "baseline" / "plain1" / "program.stderr.log").read_text()
    if case == "exit-message":
        assert "error: --device cuda but no CUDA device here" in stderr_log  # the launcher printed it, as Python does
