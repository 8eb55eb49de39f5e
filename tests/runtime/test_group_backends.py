"""What the launcher reads of a rank's process groups before letting its program's objects go
(``runtime.group_backends``, ``runtime.launch._let_go``): gloo's groups keep the settle and the full collection,
a job of NCCL groups alone is let go as a plain run would be."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nsighttc.runtime import group_backends

GLOO_PROGRAM = """
import tempfile, torch.distributed as dist
from torch.distributed import destroy_process_group   # bound before the program runs: the launcher's wrapper
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
dist.new_group(backend="gloo")
destroy_process_group()
from nsighttc.runtime import group_backends
print("SEEN", sorted(group_backends.SEEN), group_backends.nccl_only())
"""


def test_the_groups_are_read_as_the_program_destroys_them(tmp_path):
    """A rank's program (the launcher told WORLD_SIZE 2, its group of one rank over a file) destroys its gloo groups
    itself: the launcher saw them before they went, so it keeps gloo's settle and collection for them."""
    pytest.importorskip("torch")
    prog = tmp_path / "prog.py"
    prog.write_text(GLOO_PROGRAM)
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "0"}
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "none", "--", str(prog)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SEEN ['cpu:gloo,cuda:gloo'] False" in r.stdout
    assert "freed as the interpreter exits" not in r.stderr


@pytest.mark.parametrize("seen, nccl_only", [
    ({"cuda:nccl"}, True),                       # DDP/FSDP with init_process_group("nccl")
    ({"cpu:gloo,cuda:nccl"}, False),             # init_process_group() without a backend: gloo's threads too
    ({"cuda:nccl", "cpu:gloo,cuda:gloo"}, False),  # a gloo side group
    ({"unknown"}, False),                        # a torch without the table
    (set(), False),                              # no group seen: the careful path
    ({"cpu:ucc,cuda:ucc"}, False),               # nothing known of its threads
])
def test_only_a_job_of_nccl_groups_alone_skips_the_settle(monkeypatch, seen, nccl_only):
    monkeypatch.setattr(group_backends, "SEEN", set(seen))
    monkeypatch.setattr(group_backends, "note", lambda: None)
    assert group_backends.nccl_only() is nccl_only
