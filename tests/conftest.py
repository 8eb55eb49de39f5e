"""Shared test helpers. Fixtures are real H200 recordings (see fixtures/README-h200.md)."""
from __future__ import annotations

import csv
import gzip
import io
import lzma
import os
import shutil
from pathlib import Path

import pytest

# The suite starts ~490 Python processes (launcher runs, torchrun ranks, analyses), and each imports tens of nsighttc's
# modules. Where the environment says PYTHONDONTWRITEBYTECODE (this project's CPU machines do), every one of them
# compiled those modules from source again: collection alone took 8.3 s of a worker's CPU against 4.0 s with the
# bytecode kept, and a fresh-clone run used ~25 CPU-seconds more (14m26s of user time against 14m01s, 2026-12-01). The
# suite's processes write it as Python does by default, in the checkout's __pycache__ folders (.gitignore'd; the
# installed packages' own are written at install). A pycache prefix instead would bypass torch's installed bytecode and
# compile all of torch again. (Read here, before pytest-xdist starts its workers: they and every program the tests
# start inherit it.)
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    import sys
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    sys.dont_write_bytecode = False

FIXTURES = Path(__file__).parent / "fixtures"
RAW = FIXTURES / "ncu_raw_tensor_metrics.csv.gz"
DETAILS = FIXTURES / "ncu_details_tensor_metrics.csv.xz"
VGG_BASIC = FIXTURES / "ncu_details_vgg16_fp16_basic_set.csv.xz"
NCU_REP = FIXTURES / "mm_fp16_fp32.ncu-rep.xz"  # (xz-compressed: 15x smaller, read as it is)
# the H200 nsys export of mm/relu loops: the copy the package ships for `nsighttc demo` (one file, not two)
NSYS_SQLITE_GZ = Path(__file__).resolve().parents[1] / "nsighttc" / "data" / "h200_loops_nsys.sqlite.xz"
KINETO = FIXTURES / "kineto_trace_cases_loops.json.xz"
# wrappers/multi_phase.py recorded on an H100 (benchmarks/gpu/gpu_multi_phase.sh, reports/multi_phase/)
MULTI_GRAPH = FIXTURES / "multi_phase_nsys_graph.sqlite.xz"   # nsys --cuda-graph-trace=graph
MULTI_NODE = FIXTURES / "multi_phase_nsys_node.sqlite.xz"     # nsys --cuda-graph-trace=node
MULTI_TORCH = FIXTURES / "multi_phase_torch.json.xz"          # torch.profiler
H100_ONE_PASS = FIXTURES / "h100_ncu_raw_one_pass_set.csv.gz"  # ncu raw page: hmma, hfma2, imma, dmma only
# The default run's replay pass on H100 (benchmarks/probes/gpu_replay_probe.sh): wrappers/multi_phase.py's timeline
# recorded with record_shapes, the operator list written from it, and ncu's raw page of the replayed operators
MULTI_SHAPES = FIXTURES / "h100_multi_phase_torch_shapes.json.xz"
MULTI_REPLAY_OPS = FIXTURES / "replay_ops_multi_phase.json"
MULTI_REPLAY_NCU = FIXTURES / "h100_multi_phase_replay_ncu_raw.csv.gz"
RESNET_REPLAY_OPS = FIXTURES / "replay_ops_resnet_amp.json"     # ResNet-50 AMP: convolutions, BN, GEMMs
RESNET_REPLAY_NCU = FIXTURES / "h100_resnet_amp_replay_ncu_raw.csv.gz"
# The same replay with the warm-up's profile (range nsighttc-warm, ncu's set-up paid before the gate) first:
# a default run of this code on H100 (benchmarks/gpu/gpu_ab_first_run.py), `ncu --import --csv --page raw`
RESNET_REPLAY_WARM_NCU = FIXTURES / "h100_resnet_amp_replay_warm_ncu_raw.csv.gz"


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command): on a machine of up to 4 CPUs, one worker more than its CPUs. About a
    seventh of the suite's worker time is spent waiting on programs its tests started (ranks that sleep a step, a
    timeout that runs out), and with one worker per CPU that CPU idled: on a 2-core machine, 474 s with 2 workers, 459 s
    with 3 (2026-11-30). Larger machines keep a worker per CPU."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus + 1 if cpus <= 4 else cpus


def fixture_open(path, mode: str = "rb", **kw):
    """A fixture opened for reading, decompressed by what its bytes are: the big recordings are xz-compressed (40%
    smaller than gzip: what keeps a clone small), the small ones gzip-compressed, some plain."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head == b"\xfd7zXZ\x00":
        return lzma.open(path, mode, **kw)
    return gzip.open(path, mode, **kw) if head[:2] == b"\x1f\x8b" else open(path, mode, **kw)


def extract_fixture(archive: Path, dest: Path) -> None:
    """Unpack a fixture archive of this repository: with the tarfile ``data`` filter where this Python has it
    (3.11.4+), else after checking that every member stays under ``dest`` as a plain file or folder (3.11.0-3.11.3)."""
    import tarfile
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
            return
        root = Path(dest).resolve()
        for m in tf.getmembers():
            if not (m.isfile() or m.isdir()) or not (root / m.name).resolve().is_relative_to(root):
                raise ValueError(f"{archive}: {m.name} is not a plain file under the archive's folder")
        tf.extractall(dest)


def fixture_bytes(path) -> bytes:
    """A fixture's decompressed content (``fixture_open``)."""
    with fixture_open(path) as fh:
        return fh.read()


def gunzip_text(path: Path) -> str:
    return fixture_open(path, "rt", encoding="utf-8").read()


def read_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gunzip_text(path))))


def write_rows(rows: list[list[str]], dest: Path) -> Path:
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    dest.write_text(buf.getvalue(), encoding="utf-8")
    return dest


@pytest.fixture
def nsys_sqlite(tmp_path) -> Path:
    dest = tmp_path / "nsys_mm_relu_loops.sqlite"
    with fixture_open(NSYS_SQLITE_GZ, "rb") as src, dest.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return dest


@pytest.fixture
def run_cli(capsys):
    """Call the CLI in-process: returns (exit code, stdout, stderr)."""
    from nsighttc.cli import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return _run


# The recordings under tests/fixtures are inputs no test changes, and many tests read the same ones (a DDP job's ranks
# by up to 13 tests, multi_phase_torch.json.xz by 20): each is parsed once a worker, and every test gets a deep copy
# of its own to change. A test that uses ``monkeypatch`` may have changed how files are parsed (a block size, a reader
# made to fail): it parses for itself. (A fresh clone's analysis, parse and render tests read 474 files, 168 of them
# distinct: 42 of their 70 CPU-seconds of parsing were files read before, 2026-12-02.)
_READ_ONLY = (Path(__file__).parent / "fixtures").resolve()
_PARSED: dict = {}
_PARSE_ONCE = {"on": True}


@pytest.fixture(autouse=True)
def _fixtures_parsed_once(request):
    _PARSE_ONCE["on"] = "monkeypatch" not in request.fixturenames
    yield
    _PARSE_ONCE["on"] = True


def _parse_fixtures_once() -> None:
    import copy

    import nsighttc.parse as parse
    read = parse._read

    def _read(path):
        p = Path(path).resolve()
        if not _PARSE_ONCE["on"] or not p.is_relative_to(_READ_ONLY):
            return read(path)
        st = p.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _PARSED:
            _PARSED[key] = read(path)
        return copy.deepcopy(_PARSED[key])
    parse._read = _read


_parse_fixtures_once()
