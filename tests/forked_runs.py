"""Programs run as ``python SCRIPT ARGS`` would run them, each in a child forked from one process that imported
torch (and the libraries the wrappers use) once.

Why: a fresh interpreter pays 1-4 s of CPU importing torch, ``torch._dynamo`` (any optimizer imports it) and
transformers before a smoke run's first line; on CI's two cores the wrappers' plain runs spent about two thirds of
their time there. A fork gets those modules for free, as DataLoader workers do. What a child still gets of its
own, as ``python SCRIPT`` gives it: ``__main__``, ``sys.argv``, ``sys.path[0]``, its environment, its working
folder, its stdout/stderr (files, read back), its exit code (an uncaught exception: the traceback and 1), its own
process group (a timeout kills the group). What it does not: a program that sets an environment variable before
``import torch`` to change how torch initialises gets torch as the server imported it. Programs run through the
launcher (``nsighttc.runtime.launch``) are not run here: the launcher's import hooks are what those tests check.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# Imported by the server before it forks anything. Each must start no thread that a child would need (torch's one
# native thread is left behind by fork, as for DataLoader workers); a module that is not installed is skipped.
# (What the forked wrappers import: Lightning's and the Trainer's are run through the launcher, not here.)
PRELOAD = ("torch", "torch._dynamo", "torch.distributed", "torch.utils.data", "transformers",
           "transformers.models.bert.modeling_bert", "transformers.models.gpt2.modeling_gpt2",
           "transformers.models.llama.modeling_llama")

_SERVER = r"""
import importlib, json, os, runpy, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
requests, replies = os.fdopen(0, "r"), os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # (what a module prints goes to stderr, not into the replies)
print(json.dumps({"ready": True}), file=replies, flush=True)
for line in requests:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        requests.close(); replies.close()
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, req["stdout"], os.O_WRONLY),
                                (2, req["stderr"], os.O_WRONLY)):
            os.dup2(os.open(path, flags), fd)
        os.environ.clear(); os.environ.update(req["env"]); os.chdir(req["cwd"])
        sys.argv = list(req["argv"]); sys.path[0] = os.path.dirname(os.path.abspath(req["argv"][0]))
        runpy.run_path(sys.argv[0], run_name="__main__")
        sys.exit(0)
    print(json.dumps({"pid": pid}), file=replies, flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), file=replies, flush=True)
"""


class ForkServer:
    """One server process; ``run`` is ``subprocess.run([sys.executable, *argv], capture_output=True, text=True)``
    for a Python script, forked from it. Started on first use; ``close`` ends it (it also ends when this process
    does: its requests pipe closes). ``env``: the server's own (its ``sys.path`` comes from its PYTHONPATH)."""

    def __init__(self, env: dict | None = None, preload=PRELOAD):
        self.env, self.preload, self.proc = env, tuple(preload), None

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, *self.preload], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1, env=self.env)
        assert self._reply(300) == {"ready": True}

    def _reply(self, timeout: float) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (exit code {self.proc.wait()})")
        return json.loads(line)

    def run(self, argv: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        with tempfile.TemporaryDirectory(prefix="forked-run-") as d:
            out, err = Path(d) / "stdout", Path(d) / "stderr"
            out.touch()
            err.touch()
            req = {"argv": [str(a) for a in argv], "env": dict(os.environ if env is None else env),
                   "cwd": str(cwd or os.getcwd()), "stdout": str(out), "stderr": str(err)}
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            pid = self._reply(60)["pid"]
            done = self._reply(timeout)
            if done is None:
                os.killpg(pid, signal.SIGKILL)
                self._reply(60)
                raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text())
            return subprocess.CompletedProcess(argv, done["returncode"], out.read_text(), err.read_text())

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
