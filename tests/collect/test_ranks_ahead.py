"""A distributed job's rank analyses started before the replay's evidence exists, handed it later
(``profile.ranks_ahead``, ``later_evidence``): the verdict must be the one every rank would have made reading the
replay's report itself, on real recordings (two H200 ranks of a DDP ResNet-50 AMP job, ``tests/fixtures/ddp``, and
the ResNet-50 AMP replay's Nsight Compute page from an H100, ``conftest.RESNET_REPLAY_NCU``)."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nsighttc.api import analyze
from nsighttc.collect.readable import load
from nsighttc.executors import Local, Processes
from nsighttc.later_evidence import EvidenceAbandoned, LaterEvidence, abandon
from nsighttc.profile.ranks_ahead import EVIDENCE_FILE, RanksAhead, replay_evidence, report_inputs

from ..conftest import RESNET_REPLAY_NCU

JOB = Path(__file__).resolve().parents[1] / "fixtures" / "ddp" / "straggler_torch"
RANKS = [JOB / f"rank{r}" / "torch_trace.json.xz" for r in (0, 1)]


def _same_verdict(ahead, reference) -> None:
    def tc(v):  # (what the profile run adds to it: where the evidence came from)
        return {k: x for k, x in v.tensor_cores.items() if k != "evidence_sources"}
    assert tc(ahead) == tc(reference)
    cols = ["name", "tensor_core", "evidence", "dtype", "total_time_ns"]
    a = ahead.kernels[cols].sort_values(["name", "evidence"]).reset_index(drop=True)
    b = reference.kernels[cols].sort_values(["name", "evidence"]).reset_index(drop=True)
    assert a.equals(b)
    assert ahead.distributed["straggler"] == reference.distributed["straggler"]
    assert [f.id for f in ahead.findings] == [f.id for f in reference.findings]
    keys = ("rank", "tc_time_share", "tc_verdict", "tc_compute_share", "median_step_ns", "own_step_ns", "verdict")
    assert [{k: r[k] for k in keys} for r in ahead.ranks] == [{k: r[k] for k in keys} for r in reference.ranks]


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_ranks_handed_the_replays_evidence_later_make_the_verdict_of_ranks_reading_its_report(tmp_path, executor):
    reference = analyze([*RANKS, RESNET_REPLAY_NCU], executor="local", same_job_check=False)
    assert (reference.kernels["evidence"] == "hardware").any()  # the report's names meet the job's kernels
    parsed = {RESNET_REPLAY_NCU: load(RESNET_REPLAY_NCU)}
    workers = Local() if executor == "local" else Processes(2).warm(preload=("nsighttc.api", "nsighttc.rank_map"))
    try:
        ahead = RanksAhead(RANKS, workers, tmp_path, timeout_s=120)
        time.sleep(0.5)  # the replay measures: the analyses wait for their evidence meanwhile
        assert not ahead.handed and ahead._thread.is_alive()
        ahead.reports = [RESNET_REPLAY_NCU]
        ahead.hand_over(replay_evidence(ahead.reports, parsed, None))
        assert ahead.usable_for([*RANKS, RESNET_REPLAY_NCU]) and not ahead.usable_for(RANKS)
        verdict = ahead.result()
    finally:
        workers.close()
    _same_verdict(verdict, reference)
    assert not (tmp_path / EVIDENCE_FILE).exists()  # the hand-over's file is gone with the analyses
    row = report_inputs([RESNET_REPLAY_NCU], parsed)[0]
    ref_row = next(i for i in reference.inputs if i["kind"].startswith("ncu"))
    assert row == ref_row  # the verdict's inputs name the report as if every rank had read it


def test_an_abandoned_hand_over_ends_the_waiting_analyses_at_once(tmp_path):
    ahead = RanksAhead(RANKS, Local(), tmp_path, timeout_s=300)
    t0 = time.monotonic()
    ahead.abandon("the program's own Nsight Compute pass measures more")
    with pytest.raises(Exception) as err:
        ahead.result()
    assert time.monotonic() - t0 < 60  # not the 300 s it was willing to wait
    assert "will not come" in str(err.value) and "measures more" in str(err.value)
    assert not ahead.usable_for(RANKS) and not (tmp_path / EVIDENCE_FILE).exists()
    ahead.hand_over(None)  # too late: nothing is written after an abandon
    assert not (tmp_path / EVIDENCE_FILE).exists()


def test_later_evidence_waits_for_its_file_and_gives_up_after_its_timeout(tmp_path):
    path = tmp_path / "ev.pkl"
    with pytest.raises(EvidenceAbandoned, match="within 0.05 s"):
        LaterEvidence(path, timeout_s=0.05).wait()
    threading.Timer(0.1, abandon, args=(path, "the run failed")).start()
    with pytest.raises(EvidenceAbandoned, match="the run failed"):
        LaterEvidence(path, timeout_s=30).wait()


def test_the_profile_run_takes_the_verdict_made_ahead_and_writes_it_as_its_own(tmp_path):
    """``profile._conclude`` with the analyses handed their evidence: the verdict written is theirs (the replay's
    report among its inputs), taken once; given other inputs it is made again from them."""
    import json
    from nsighttc.profile import _conclude
    from nsighttc.profile.evidence import Outcome
    from nsighttc.profile.passes import Options
    from nsighttc.profile.target import resolve_target
    reference = analyze([*RANKS, RESNET_REPLAY_NCU], executor="local", same_job_check=False)
    (tmp_path / "job.py").write_text("pass\n")
    target = resolve_target(None, [], ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                       str(tmp_path / "job.py")])
    out = Outcome(parsed={RESNET_REPLAY_NCU: load(RESNET_REPLAY_NCU)})
    out.ranks_ahead = RanksAhead(RANKS, Local(), tmp_path, timeout_s=120)
    out.ranks_ahead.reports = [RESNET_REPLAY_NCU]
    out.ranks_ahead.hand_over(replay_evidence(out.ranks_ahead.reports, out.parsed, None))
    verdict = _conclude(tmp_path, target, Options(out=tmp_path), [], [], [], [*RANKS, RESNET_REPLAY_NCU], out)
    _same_verdict(verdict, reference)
    assert out.ranks_ahead is None  # taken once
    doc = json.loads((tmp_path / "verdict.json").read_text())
    assert [i["kind"] for i in doc["inputs"]] == [i["kind"] for i in reference.inputs]
    assert doc["tensor_cores"]["verdict"] == reference.tensor_cores["verdict"]
    assert doc["tensor_cores"]["evidence_sources"]["ncu_this_run"] > 0  # the replay's measurements, this run's
    # the analyses ahead had no evidence for an input the run added (another pass's report): made again from it all
    out.ranks_ahead = RanksAhead(RANKS, Local(), tmp_path, timeout_s=120)
    out.ranks_ahead.hand_over(None)
    again = _conclude(tmp_path, target, Options(out=tmp_path), [], [], [], [*RANKS, RESNET_REPLAY_NCU], out)
    _same_verdict(again, reference)


def test_the_plan_is_made_from_the_kernel_tables_the_ranks_analyses_told(tmp_path):
    """The analyses start before the plan: each tells the kernel table of the trace it parsed, and the plan made from
    those is the one made from the files; a rank whose analysis failed first is read by the planning itself, which
    says what is wrong with its file."""
    import shutil
    from nsighttc.errors import NsighttcError
    from nsighttc.profile.evidence import planned_needs
    from nsighttc.profile.ranks_ahead import KERNELS_DIR
    reference = planned_needs(RANKS, {})
    workers = Processes(2).warm(preload=("nsighttc.api", "nsighttc.rank_map"))
    try:
        ahead = RanksAhead(RANKS, workers, tmp_path, timeout_s=120)
        tables, parsed = ahead.kernel_tables(), {}
        need = planned_needs(RANKS, parsed, tables)
        assert (tables.told, tables.failed) == (2, 0) and not parsed  # nothing parsed for the plan here
        assert need.reset_index(drop=True).equals(reference.reset_index(drop=True))
        assert need.attrs["order"] == reference.attrs["order"] and need.attrs["first"] == reference.attrs["first"]
        ahead.hand_over(None)
        assert [r["rank"] for r in ahead.result().ranks] == [0, 1]
        assert not (tmp_path / KERNELS_DIR).exists()
        bad = tmp_path / "job" / "rank1" / "torch_trace.json"
        bad.parent.mkdir(parents=True)
        bad.write_text('{"traceEvents": [')  # cut off mid-write
        shutil.copy(RANKS[0], tmp_path / "job" / "rank0.json.gz")
        ranks = [tmp_path / "job" / "rank0.json.gz", bad]
        (tmp_path / "run").mkdir()
        ahead = RanksAhead(ranks, workers, tmp_path / "run", timeout_s=120)
        tables = ahead.kernel_tables()
        with pytest.raises(NsighttcError) as err:
            planned_needs(ranks, {}, tables)
        assert (tables.told, tables.failed) == (1, 1) and str(bad) in str(err.value)
        ahead.finish_abandoned("the timeline could not be read")
    finally:
        workers.close()
