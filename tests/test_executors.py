"""The executor that runs a job's per-rank analyses here (``executors.Local``): what it does to the cyclic collector."""
from __future__ import annotations

import subprocess
import sys
import textwrap

# In a process of its own: a thread another test left running (a verdict made ahead) may collect or freeze meanwhile.
CHECK = textwrap.dedent("""
    import gc, weakref
    from nsighttc.executors import Local

    class Node:
        pass

    freezes, refs = [], []

    def task(i):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        refs.append(weakref.ref(a))
        freezes.append(gc.get_freeze_count())
        return i * 10

    gc.disable()  # as the analysis runs
    assert gc.get_freeze_count() == 0
    assert Local().map(task, [(i, (i,)) for i in range(3)]) == {0: 0, 1: 10, 2: 20}
    assert all(r() is None for r in refs), "a task's cycle was not freed"
    # what the process held before the tasks is frozen before the first, what survived each before the next
    assert 0 < freezes[0] <= freezes[1] <= freezes[2], freezes
    assert gc.get_freeze_count() == 0, "left frozen"
    gc.freeze()  # something else froze objects (a forked trace writer): they stay frozen, cycles are still freed
    held = gc.get_freeze_count()
    assert Local().map(task, [(7, (7,))]) == {7: 70} and refs[-1]() is None
    assert gc.get_freeze_count() == held, "another's freeze undone"
    print("ok")
""")


def test_each_tasks_cycles_are_freed_and_the_next_task_is_collected_without_walking_what_survived():
    """The analysis pauses the cyclic collector, so ``Local`` collects after each task. A collection walked every
    object of the process (0.12 s a task beside the suite's heap); what the process held before, and what survived each
    task, is now frozen, so each collection walks only its own task's objects, and the process is left as it was
    found."""
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
