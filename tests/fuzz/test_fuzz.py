"""The bounded fuzz run of the test suite: every input kind, mutated real recordings, every promise.

Hypothesis draws the mutations, derandomized: the suite runs the same cases every time, so a CI result
never depends on luck (``python -m tests.fuzz`` is the one that explores). ``NSIGHTTC_FUZZ_EXAMPLES``
(default 40 per kind) bounds the run to well under a minute on a 2-core machine. Files in ``tests/fixtures/bad/`` (every case that ever failed) are replayed.
"""
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from .harness import BAD, bad_bytes, check, seed_of_bad_file
from .mutators import mutate
from .seeds import BY_KIND, SEEDS, seed_bytes

EXAMPLES = int(os.environ.get("NSIGHTTC_FUZZ_EXAMPLES", "40"))


@pytest.mark.parametrize("kind", [s.kind for s in SEEDS])
def test_unmutated_seeds_are_read(kind, tmp_path):
    """The fuzzer starts from inputs the readers accept, so the mutations test the readers' edges."""
    seed = BY_KIND[kind]
    if kind == "ncu-rep":
        pytest.importorskip("ncu_report")
    assert check(seed, seed_bytes(kind), tmp_path) == []


@pytest.mark.parametrize("kind", [s.kind for s in SEEDS])
def test_mutated_inputs_keep_every_promise(kind, tmp_path_factory):
    seed = BY_KIND[kind]
    if kind == "ncu-rep":
        pytest.importorskip("ncu_report")
    examples = max(2, EXAMPLES // 4) if not seed.in_process else EXAMPLES

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed_int=st.integers(0, 2**32 - 1), rounds=st.integers(1, 3))
    def one(seed_int, rounds):
        names, data = mutate(kind, random.Random(seed_int), seed_bytes(kind), rounds)
        broken = check(seed, data, tmp_path_factory.mktemp(kind))
        assert not broken, f"{kind} after {names} (seed {seed_int}): {broken}"

    one()


@pytest.mark.parametrize("bad", sorted(BAD.glob("*")) if BAD.exists() else [], ids=lambda p: p.name)
def test_every_case_that_ever_failed(bad: Path, tmp_path):
    if bad.name.startswith("ncu-rep"):
        pytest.importorskip("ncu_report")
    assert check(seed_of_bad_file(bad), bad_bytes(bad), tmp_path) == []
