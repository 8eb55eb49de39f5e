"""The launch-call join (``parse.timeline.launch_times``): the direct (process, correlation id) table and the
sorted-key search it falls back to for sparse ids must find the same host calls on a real recording."""
import numpy as np

from nsighttc.parse import load
from nsighttc.parse.timeline import _API_KEY_CACHE, _CallIndex, launch_times
from tests.conftest import FIXTURES


def test_dense_and_sparse_correlation_ids_find_the_same_calls():
    p = load(FIXTURES / "multi_phase_nsys_node.sqlite.xz")
    k, api = p.kernels, p.timeline.api
    assert _CallIndex(api).dense
    dense = launch_times(k, api)
    assert dense["start_ns"].notna().mean() > 0.9  # nearly every kernel's launch call is found
    spread = api.assign(correlation=api["correlation"].to_numpy() * 1_000_003)  # same calls, sparse ids
    k2 = k.assign(launch_id=k["launch_id"] * 1_000_003)
    _API_KEY_CACHE.clear()
    assert not _CallIndex(spread).dense
    sparse = launch_times(k2, spread)
    np.testing.assert_array_equal(dense["start_ns"].to_numpy(), sparse["start_ns"].to_numpy())
    np.testing.assert_array_equal(dense["end_ns"].to_numpy(), sparse["end_ns"].to_numpy())
