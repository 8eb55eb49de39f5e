"""The gate a launcher waits at (nsighttc/runtime/gate.py): what nsighttc writes there is read whole or not at all."""
from __future__ import annotations

import threading

from nsighttc.runtime import gate as gate_mod

WORDS = "go window-warmup=3"


def test_a_gate_that_exists_already_says_all_its_words(tmp_path):
    """A reader polls for the gate and reads it as soon as it exists. Written in place, the file existed empty for a
    moment (the suite read '' there, test_replay's job gate; 221 of 300 reads here were not whole): a launcher could
    take 'go' without the settings after it. Written beside it and renamed, every read is whole and nothing is left."""
    torn = []
    for i in range(300):
        gate = tmp_path / f"gate{i}"
        writer = threading.Thread(target=gate_mod.write_gate, args=(gate, WORDS))
        writer.start()
        while not gate.exists():
            pass
        text = gate.read_text()
        if text != WORDS:
            torn.append(text)
        writer.join()
        assert gate_mod._words(gate) == WORDS.split()
    assert torn == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"gate{i}" for i in range(300))


def test_a_gate_that_cannot_be_written_leaves_nothing_behind(tmp_path):
    """The run's folder gone (a user removed it mid-run): the writer says nothing and raises nothing."""
    gate = tmp_path / "gone" / ".ncu-gate"
    gate_mod.write_gate(gate, "stop")
    assert not gate.parent.exists()
