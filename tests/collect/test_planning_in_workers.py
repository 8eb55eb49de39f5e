"""A torchrun job's ranks parsed for planning in the rank workers, side by side, only their kernel tables sent back
(``profile.evidence.planned_needs``), on two H200 ranks' real FSDP2 traces (``tests/fixtures/fsdp``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nsighttc.executors import Failed, Local
from nsighttc.profile.evidence import planned_needs

FSDP = Path(__file__).resolve().parents[1] / "fixtures" / "fsdp" / "even_cached"
RANKS = [FSDP / f"rank{r}" / "torch_trace.json.xz" for r in (0, 1)]


class _Counting(Local):
    """Local, counting what it was given, failing the ranks named in ``fail``."""

    def __init__(self, fail=()):
        self.given, self.fail = [], set(fail)

    def map(self, fn, tasks, on_done=None):
        self.given += [args[0] for _, args in tasks]
        return {key: Failed("a worker died") if args[0] in self.fail else fn(*args) for key, args in tasks}


def test_the_ranks_are_planned_from_kernel_tables_made_in_the_workers():
    here = planned_needs(RANKS, {})
    ex, parsed = _Counting(), {}
    there = planned_needs(RANKS, parsed, ex)
    assert ex.given == RANKS and not parsed  # parsed there, nothing kept here: the workers analyse the files
    assert not here.empty and "name" in here
    pd.testing.assert_frame_equal(here.reset_index(drop=True), there.reset_index(drop=True), check_exact=True)
    assert here.attrs["order"] == there.attrs["order"] and here.attrs["matrix_ns"] == there.attrs["matrix_ns"]


def test_a_rank_parsed_already_is_not_sent_and_a_rank_that_failed_there_is_read_here():
    first = planned_needs(RANKS[:1], {})
    parsed = {}
    planned_needs(RANKS[:1], parsed)  # (as the trace reader leaves rank 0, parsed while it was written)
    ex = _Counting(fail={RANKS[1]})
    with_one = planned_needs(RANKS, parsed, ex)
    assert ex.given == [] and set(parsed) == set(RANKS)  # one rank left to parse: no worker round-trip for it
    assert len(with_one) >= len(first)
    parsed = {}
    ex = _Counting(fail={RANKS[1]})
    planned_needs(RANKS, parsed, ex)
    assert ex.given == RANKS and list(parsed) == [RANKS[1]]  # the failed one read here, where its error would show


def test_a_broken_pool_leaves_every_rank_to_be_read_here():
    class Broken(Local):
        def map(self, fn, tasks, on_done=None):
            raise RuntimeError("A child process terminated abruptly")
    parsed = {}
    need = planned_needs(RANKS, parsed, Broken())
    assert set(parsed) == set(RANKS) and not need.empty


def test_a_rank_that_cannot_be_read_still_names_its_file(tmp_path):
    from nsighttc.errors import NsighttcError
    broken = tmp_path / "rank1" / "torch_trace.json"
    broken.parent.mkdir()
    broken.write_text("not json at all")
    with pytest.raises(NsighttcError, match="torch_trace.json"):
        planned_needs([RANKS[0], broken], {}, _Counting())
