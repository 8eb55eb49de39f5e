"""The analysis' faster paths give the same verdicts as the pandas calls they replace, on real recordings:
named aggregations a column at a time (``analysis.grouping``), and the two sides of ``analyze`` one after the other
or side by side."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from nsighttc import api
from nsighttc.analysis.grouping import aggregate
from nsighttc.parse import load

FIX = Path(__file__).resolve().parents[1] / "fixtures"
from tests.conftest import NSYS_SQLITE_GZ  # noqa: E402


@pytest.fixture(scope="module")
def kernels():
    # the H100 multi_phase recording's kernel launches: string, categorical and numeric columns
    return load(FIX / "multi_phase_torch.json.xz").kernels


def test_aggregate_is_pandas_named_aggregation(kernels):
    k = kernels.assign(nvtx_cat=kernels["nvtx"].astype("category"))
    spec = dict(n=("duration_ns", "size"), total=("duration_ns", "sum"), median=("duration_ns", "median"),
                first_start=("start_ns", "min"), last_start=("start_ns", "max"), first_name=("name", "first"),
                names=("name", "nunique"))
    for g in (k.groupby("nvtx"), k.groupby(["nvtx", "device"]), k.groupby("nvtx_cat", observed=True)):
        ours, theirs = aggregate(g, **spec), g.agg(**spec)
        pd.testing.assert_frame_equal(ours, theirs)  # values, dtypes, index and column order
    assert len(aggregate(k.groupby("nvtx"), n=("duration_ns", "size"))) == k["nvtx"].nunique()


def test_aggregate_refuses_what_it_does_not_know(kernels):
    with pytest.raises(ValueError, match="'mean' is not one of"):
        aggregate(kernels.groupby("nvtx"), m=("duration_ns", "mean"))


@pytest.mark.parametrize("recording", ["window/multi_window_torch.json.xz", "unmarked/lightning_torch.json.xz",
                                       str(NSYS_SQLITE_GZ)])
def test_one_side_after_the_other_is_the_same_verdict_as_side_by_side(recording, monkeypatch):
    parsed = load(FIX / recording)
    monkeypatch.setattr(api, "SIDE_BY_SIDE_MIN_LAUNCHES", 0)  # every recording side by side
    both = json.dumps(api.analyze([parsed]).to_json())
    monkeypatch.setattr(api, "SIDE_BY_SIDE_MIN_LAUNCHES", 10 ** 9)  # one after the other
    assert json.dumps(api.analyze([parsed]).to_json()) == both
