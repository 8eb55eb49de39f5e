"""The wrappers' smoke runs are forked from one process (tests/forked_runs.py): each must still see what
``python SCRIPT ARGS`` would give it, and say what it would say."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.forked_runs import ForkServer

PROGRAM = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                  "env": os.environ.get("FORKED_RUNS_TEST"), "stdin": sys.stdin.read()}))
print("to stderr", file=sys.stderr)
if "--fail" in sys.argv:
    raise ValueError("the program's own error")
if "--exit" in sys.argv:
    sys.exit(3)
if "--hang" in sys.argv:
    import time; time.sleep(600)
"""


@pytest.fixture(scope="module")
def server():
    s = ForkServer(preload=("json",))  # (nothing heavy: the mechanism is what is checked here)
    yield s
    s.close()


def test_a_forked_run_gets_its_argv_path_folder_environment_and_streams(server, tmp_path):
    import json
    prog = tmp_path / "sub" / "prog.py"
    prog.parent.mkdir()
    prog.write_text(PROGRAM)
    r = server.run([str(prog), "a", "b"], env={**os.environ, "FORKED_RUNS_TEST": "yes"}, cwd=tmp_path)
    plain = subprocess.run([sys.executable, str(prog), "a", "b"], capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "FORKED_RUNS_TEST": "yes"}, stdin=subprocess.DEVNULL)
    assert r.returncode == plain.returncode == 0 and r.stderr == plain.stderr == "to stderr\n"
    said, plain_said = json.loads(r.stdout), json.loads(plain.stdout)
    assert said == plain_said
    assert said["argv"] == [str(prog), "a", "b"] and said["path0"] == str(prog.parent) and said["name"] == "__main__"
    assert said["cwd"] == str(tmp_path) and said["env"] == "yes" and said["stdin"] == ""
    # the next run does not see the last one's environment
    assert json.loads(server.run([str(prog)], env={k: v for k, v in os.environ.items()
                                                   if k != "FORKED_RUNS_TEST"}).stdout)["env"] is None


def test_a_forked_runs_error_and_exit_code_are_what_python_gives(server, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    failed = server.run([str(prog), "--fail"])
    assert failed.returncode == 1 and "ValueError: the program's own error" in failed.stderr
    assert "Traceback" in failed.stderr
    assert server.run([str(prog), "--exit"]).returncode == 3


def test_a_forked_run_past_its_timeout_is_killed_and_the_server_serves_on(server, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    with pytest.raises(subprocess.TimeoutExpired):
        server.run([str(prog), "--hang"], timeout=1)
    assert server.run([str(prog)]).returncode == 0
