"""Issue 55: the per-rank analyses on a Dask cluster (a 2-worker LocalCluster on loopback here): the same verdict as
the local run, a worker killed mid-run (its tasks run again elsewhere), a missing rank file and a task past its timeout
named as incomplete ranks, an unreachable scheduler as a one-line error, URL inputs read through fsspec."""
from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

pytest.importorskip("distributed")

import nsighttc  # noqa: E402
from nsighttc import executors  # noqa: E402
from nsighttc.errors import UsageError  # noqa: E402
from tests.conftest import fixture_open

FIX = Path(__file__).resolve().parent / "fixtures"
JOB = FIX / "ddp" / "straggler_torch"   # two ranks of a DDP job on 2 H200s (rank 1 the straggler)


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster
    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0")
    yield c
    c.close()


@pytest.fixture(scope="module")
def local_doc():
    return nsighttc.analyze([JOB], executor="local").to_json()


def _dask(cluster, **kw):
    return executors.Dask(cluster.scheduler_address, **kw)


def _first_difference(a, b, path: str = "") -> str:
    """Where two JSON documents first differ (a long verdict's diff is truncated before the point)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'the cluster run' if k in a else 'the local run'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:300]} != {str(b)[:300]}"


def test_a_cluster_gives_the_local_runs_verdict(cluster, local_doc):
    ex = _dask(cluster)
    seen = []
    try:
        v = nsighttc.analyze([JOB], executor=ex, progress=lambda *a: seen.append(a))
    finally:
        ex.close()
    got = json.loads(json.dumps(v.to_json(), sort_keys=True))
    assert got == json.loads(json.dumps(local_doc, sort_keys=True)), _first_difference(got, local_doc)
    assert [r["rank"] for r in v.ranks] == [0, 1] and v.distributed["straggler"]["rank"] == 1
    assert seen[-1] == (2, 2, 0) and len(seen) == 2  # the progress of every rank: done, total, failed
    assert v.launches.empty  # the client receives the ranks' summaries, not a launch table


NSYS_JOB = FIX / "ddp" / "straggler_nsys"  # the same job under nsys: the exports name no rank, their folders do


def _job_of(tmp_path: Path, ranks: int) -> Path:
    """A job directory of ``ranks`` ranks: the nsys job's two real ranks repeated, each in its own rank<N>/ folder, its
    session start moved by its rank in nanoseconds (the same recording twice is refused: ``parse.same_job``)."""
    import gzip
    import sqlite3
    job = tmp_path / "job"
    for r in range(ranks):
        d = job / f"rank{r}"
        d.mkdir(parents=True)
        db = d / "nsys.sqlite"
        with fixture_open(NSYS_JOB / f"rank{r % 2}" / "nsys.sqlite.xz", "rb") as src, db.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(db)
        con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (r,))
        con.commit()
        con.close()
    return job


def test_a_worker_killed_mid_run_loses_no_rank(cluster, tmp_path):
    job = _job_of(tmp_path, 8)
    killed = []
    client_ex = _dask(cluster)

    def kill_one(done, total, failed):
        if not killed:  # a worker dies once the first rank is back: the rank it was analysing runs again elsewhere
            busy = {a: ts for a, ts in client_ex.client.processing().items() if ts}
            if not busy:
                return
            addr = sorted(busy)[0]
            pid = client_ex.client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, len(busy[addr])))
    try:
        v = nsighttc.analyze([job], executor=client_ex, progress=kill_one)
    finally:
        client_ex.close()
    assert killed and killed[0][1] >= 1  # it held at least one rank when it died
    assert v.distributed["incomplete_ranks"] == [] and [r["rank"] for r in v.ranks] == list(range(8))


def test_a_missing_rank_file_is_named_and_the_job_is_incomplete(cluster, tmp_path, run_cli):
    job = _job_of(tmp_path, 3)
    missing = job / "rank2" / "nsys.sqlite"
    missing.unlink()
    files = [str(job / f"rank{r}" / "nsys.sqlite") for r in range(3)]
    ex = _dask(cluster)
    try:
        v = nsighttc.analyze(files, executor=ex)
    finally:
        ex.close()
    inc = v.distributed["incomplete_ranks"]
    assert [i["rank"] for i in inc] == [2] and "could not be analysed" in inc[0]["reason"]
    assert str(missing) in inc[0]["reason"] or "no such file" in inc[0]["reason"].lower()
    assert {r["rank"] for r in v.ranks} == {0, 1, 2}
    assert any("rank 2" in w and "left out" in w for w in v.warnings)


def test_a_rank_past_the_timeout_is_given_up_not_waited_for(cluster, tmp_path):
    job = _job_of(tmp_path, 2)
    ex = _dask(cluster, timeout_s=0.01)
    try:
        with pytest.raises(nsighttc.NsighttcError, match="no rank could be analysed.*not analysed within"):
            nsighttc.analyze([job], executor=ex)
    finally:
        ex.close()


def test_an_unreachable_scheduler_is_a_one_line_error(run_cli):
    with pytest.raises(UsageError, match="no Dask scheduler answered within 1 s"):
        executors.Dask("tcp://127.0.0.1:9", connect_timeout_s=1)
    code, _, err = run_cli("analyze", "--executor", "dask://nowhere", str(JOB))
    assert code == 2 and "dask://HOST:PORT" in err and "Traceback" not in err


def test_url_inputs_are_read_through_fsspec(cluster, local_doc):
    """file:// URLs take the path real object stores take (s3://, gs://): listed, sniffed and fetched by fsspec."""
    ex = _dask(cluster)
    try:
        v = nsighttc.analyze([f"file://{JOB}/"], executor=ex)
    finally:
        ex.close()
    doc = v.to_json()
    assert [i["path"] for i in doc["inputs"]] == [f"file:///{str(JOB / f'rank{r}' / 'torch_trace.json.xz').lstrip('/')}"
                                                  for r in (0, 1)]
    assert doc["distributed"]["straggler"]["rank"] == local_doc["distributed"]["straggler"]["rank"]
    assert [r["own_step_ns"] for r in doc["ranks"]] == [r["own_step_ns"] for r in local_doc["ranks"]]
