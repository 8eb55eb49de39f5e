"""Why was the GPU idle? Every idle moment gets one cause, read from what the host was doing then.

The GPU's idle time (gaps in the union of its activity) is cut into pieces at every boundary of the
host's ranges and blocking calls, so each piece has one innermost host range and one host state. A piece
is, in this order:

1. ``pageable-copy``: the host was inside the call of a pageable host-to-device copy (staged and
   blocking by CUDA's rules);
2. ``sync``: the host was blocked in a synchronising call (``cudaStreamSynchronize``, ``cudaMemcpy``...);
3. ``gpu-wait``: the work that ended the gap had been launched *before* the GPU went idle: the GPU, not
   the host, was waiting (another stream, an event, a graph dependency); so is the part of a gap from the
   return of the call that launched that work, where the GPU idled ``Thresholds.launch_gap_ns`` or more after it;
4. ``launch-overhead``: a short gap (< ``Thresholds.launch_gap_ns``) ended by work launched after the
   GPU went idle: the host could not launch as fast as the GPU ran (HTA's "host wait"); only where the
   launch call was traced;
5. ``host-range``: the host was in a range the user drew around host work (``data``, ``preprocess``:
   any range that is neither a step nor holds steps), named after it;
6. drained: a synchronising call had emptied the GPU's queue in this gap and the host then ran unnamed
   code. Had the host not waited, that code would have run while the GPU worked, so per scope the
   drained time is blamed on ``sync`` up to the GPU work the scope had to overlap it with, and the rest
   on the host code itself (``host-range``, the innermost range);
7. otherwise ``host-range``: host code in the innermost range, outside any child range.

Pieces are plain numpy arrays (a few per gap); scopes (a range path and everything under it, a step
family's steady iterations, the window) only sum them, so every range gets its own causes for the price
of a group-by.
"""
from __future__ import annotations

from .causes import NO_RANGE, causes, frame_words, headline
from .pieces import (DRAINED, GPU_WAIT, HOST, KINDS, LAUNCH, PAGEABLE, SYNC, HostCalls, Idle, _cut_gaps, cut, finish,
                     host_calls, path_codes, pieces)
from .scopes import Scope, in_intervals, mids_in, range_scopes, scope_of, time_scope

__all__ = ["DRAINED", "GPU_WAIT", "HOST", "KINDS", "LAUNCH", "NO_RANGE", "PAGEABLE", "SYNC", "HostCalls", "Idle",
           "Scope", "causes", "cut", "finish", "frame_words", "headline", "host_calls", "in_intervals", "mids_in",
           "path_codes", "pieces", "range_scopes", "scope_of", "time_scope", "_cut_gaps"]
