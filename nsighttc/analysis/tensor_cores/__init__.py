"""Did the Tensor Cores fire? The per-launch evidence ladder and its roll-ups.

Ladder, per kernel launch (first rung that decides wins):

1. ``hardware`` (ops): any ``tc_ops_<dtype>`` > 0 -> yes; the largest names the dtype, the sum is FLOPs.
   All ops counters collected for every common dtype and all zero -> no (the counters are exact).
2. ``hardware`` (instructions): (hmma - hfma2) + imma + dmma + gmma (+ tcgen05) > 0 -> yes.
   A non-zero hmma alone is *not* evidence: HFMA2.MMA register moves land on the tensor pipe in plain
   elementwise kernels (measured on H200: hmma == hfma2 in every such kernel). All of them zero, with
   hmma's HFMA2 part accounted for -> no.
3. ``kernel-name``: the rule table in ``name_rules``; ``None`` (unknown) when the name carries no signal.

Everything is column arithmetic over the launch table: no per-kernel Python loops.
"""
from __future__ import annotations

from .groups import _first_by, _group_sums, _in_groups, _min_by, _sum_by, packed_groups
from .kernels import (UNKNOWN_LISTED, aggregate_kernels, combine_kernel_rows, compact, dtype_named,
                      off_tc_dtypes, unknown_kernels)
from .ladder import (COUNTER_COLUMNS, DETAIL_INST_NAMED_DTYPE, EVIDENCE_HARDWARE, EVIDENCE_NAME,
                     EVIDENCE_NONE, NO_SIGNAL, OPS_REQUIRED_FOR_NO, STATES, _PER_NAME, _classify_per_name,
                     _classify_rows, classify_launches, state_categorical, tc_states)
from .rollup import path_prefixes, range_table, rollup, verdict_of

# The face of this package: what the rest of nsighttc (and its tests) read from ``analysis.tensor_cores``
__all__ = ["COUNTER_COLUMNS", "DETAIL_INST_NAMED_DTYPE", "EVIDENCE_HARDWARE", "EVIDENCE_NAME", "EVIDENCE_NONE",
           "NO_SIGNAL", "OPS_REQUIRED_FOR_NO", "STATES", "UNKNOWN_LISTED", "_PER_NAME", "_classify_per_name",
           "_classify_rows", "_first_by", "_group_sums", "_in_groups", "_min_by", "_sum_by", "aggregate_kernels",
           "classify_launches", "combine_kernel_rows", "compact", "dtype_named", "off_tc_dtypes", "packed_groups",
           "path_prefixes", "range_table", "rollup", "state_categorical", "tc_states", "unknown_kernels",
           "verdict_of"]
