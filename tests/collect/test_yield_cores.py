"""The frontend of an ncu pass waiting beside the timeline is put in the idle scheduling class, the program under it
is not (collect.yield_cores: ncu's frontend spun a core while its program waited, and a program whose host work
ran on every core slowed 7x beside it on the H200)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from nsighttc.collect import yield_cores
from nsighttc.collect.yield_cores import IdleFrontend, children, frontends_above_program

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or not os.path.isdir("/proc"),
                                reason="Linux scheduling classes")


def _front_with_program():
    """A shell (the frontend: not Python) that forks a Python program and waits for it, as ncu does."""
    program = f"{sys.executable} -c 'import time; time.sleep(30)'"
    return subprocess.Popen(["sh", "-c", f"{program}; true"], start_new_session=True)


def _until(cond, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_the_frontend_is_lowered_once_its_program_runs_and_the_program_keeps_its_class():
    proc = _front_with_program()
    try:
        f = IdleFrontend(proc.pid, "program")
        assert _until(lambda: f.lowered), "the frontend was never lowered"
        assert f.lowered == [proc.pid]
        assert os.sched_getscheduler(proc.pid) == os.SCHED_IDLE
        (program,) = children(proc.pid)
        assert os.sched_getscheduler(program) == os.SCHED_OTHER  # what ncu measures keeps its speed
        assert f.record() == {"pass": "program", "supported": True, "lowered_processes": 1}
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_a_python_process_started_directly_is_nobody_s_frontend():
    """The fake profilers of the tests, and a pass without a profiler in front: nothing to lower."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert _until(lambda: frontends_above_program(proc.pid) == [])
        f = IdleFrontend(proc.pid, "replay")
        time.sleep(0.3)
        assert f.lowered == [] and os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
        assert f.record()["lowered_processes"] == 0
    finally:
        proc.kill()
        proc.wait()


def test_stop_before_the_program_appeared_ends_the_lowering(monkeypatch):
    """The pass was stood down before ncu had started its program: nothing is lowered afterwards."""
    monkeypatch.setattr(yield_cores, "POLL_S", 0.05)
    proc = subprocess.Popen(["sh", "-c", f"sleep 0.5; {sys.executable} -c 'import time; time.sleep(30)'; true"],
                            start_new_session=True)
    try:
        f = IdleFrontend(proc.pid, "program")
        f.stop()
        assert _until(lambda: len(children(proc.pid)) == 1)
        time.sleep(0.3)
        assert f.lowered == [] and os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_a_reading_thread_puts_itself_in_the_idle_class_and_the_others_keep_theirs():
    """The trace's readers beside the program (profile.trace_reader, replay_plan) call idle_thread first."""
    import threading
    seen = {}

    def reader():
        seen["lowered"] = yield_cores.idle_thread()
        seen["policy"] = os.sched_getscheduler(threading.get_native_id())
    t = threading.Thread(target=reader)
    t.start()
    t.join()
    assert seen == {"lowered": True, "policy": os.SCHED_IDLE}
    assert os.sched_getscheduler(threading.get_native_id()) == os.SCHED_OTHER  # (this thread: untouched)


def test_a_kernel_without_children_files_has_the_processes_found_by_their_parent():
    proc = _front_with_program()
    try:
        assert _until(lambda: len(children(proc.pid)) == 1)
        assert yield_cores.children_by_parent(proc.pid) == children(proc.pid)
        assert yield_cores.children_by_parent(os.getpid()).count(proc.pid) == 1
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
