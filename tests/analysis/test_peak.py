"""% of the GPU's dense Tensor Core peak, on real recordings (ncu counters on an H200)."""
import math

import pytest

from nsighttc.analysis import peak
from nsighttc.api import analyze
from tests.conftest import RAW, MULTI_TORCH


@pytest.mark.parametrize("name,sms,gpu", [
    ("NVIDIA H200", None, "H200 SXM"), ("NVIDIA H100 80GB HBM3", None, "H100 SXM"), ("NVIDIA H100 PCIe", None, "H100 PCIe"),
    ("NVIDIA H100", 114, "H100 PCIe"), ("NVIDIA H100 NVL", 132, "H100 NVL"), ("NVIDIA A100-SXM4-80GB", None, "A100"),
    ("NVIDIA A100 80GB PCIe", None, "A100"), ("NVIDIA L4", None, "L4"), ("NVIDIA L40S", None, "L40S"),
    ("NVIDIA B200", None, "B200"), ("NVIDIA GeForce RTX 4090", None, "RTX 4090")])
def test_gpus_are_matched_by_name_and_sm_count(name, sms, gpu):
    assert peak.match(name, sms).gpu == gpu


def test_unknown_gpus_get_no_percentage():
    assert peak.match("NVIDIA GeForce GTX 1080") is None and peak.match("NVIDIA H100") is None  # SM count unknown
    assert peak.match("NVIDIA L40") is None  # not an L40S


def test_pct_of_peak_per_kernel_and_time_weighted_on_real_counters():
    v = analyze([RAW])
    doc = v.to_json()
    p = doc["tensor_cores"]["peak"]
    assert v.device["name"] == "NVIDIA H200" and p["gpu"] == "H200 SXM"
    rows = [k for k in doc["kernels"] if k["tflops"] is not None and k["dtype"] in p["dense_tflops"]]
    assert rows
    for k in rows:
        assert math.isclose(k["pct_of_peak"], k["tflops"] / p["dense_tflops"][k["dtype"]])
        assert 0 < k["pct_of_peak"] < 1.0  # the datasheet's boost-clock peak bounds what the H200 measured
    w = sum(k["total_time_ns"] for k in rows)
    assert math.isclose(p["pct_of_peak"], sum(k["pct_of_peak"] * k["total_time_ns"] for k in rows) / w)
    from nsighttc.render import markdown
    assert "of the H200 SXM's dense Tensor Core peak" in markdown.render(doc)


def test_a_timeline_without_counters_has_no_tflops_and_no_percentage():
    doc = analyze([MULTI_TORCH]).to_json()
    assert doc["tensor_cores"]["peak"]["pct_of_peak"] is None
    assert all(k["pct_of_peak"] is None for k in doc["kernels"])
