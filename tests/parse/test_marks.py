"""parse/marks.py: which ranges of a recording are marks (steps, compilations), which stay the program's ranges."""
import numpy as np
import pandas as pd

from nsighttc.parse import marks
from nsighttc.runtime import steps as hooks


def _ranges(names):
    n = len(names)
    return pd.DataFrame({"pid": [1] * n, "tid": [1] * n, "start_ns": np.arange(n, dtype=float),
                         "end_ns": np.arange(n, dtype=float) + 0.5, "name": names})


def test_marks_leave_the_range_table_and_torch_compile_is_folded():
    r, m = marks.split(_ranges(["train.py", hooks.STEP, hooks.OPTIMIZER, hooks.COMPILE, "entire_frame_compile",
                                "dynamo_data: compile_id=0/0",
                                "entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/0",
                                "CachingAutotuner.benchmark_all_configs_data: kernel_name=triton_poi_fused__to_copy_0, "
                                "is_backward=True, compile_id=0/0",
                                "## Call CompiledFxGraph fko4zrwir6k6 ##", "## Call CompiledFxGraph fwu7fnqjv ##"]))
    assert list(r["name"]) == ["train.py", hooks.OPTIMIZER, marks.COMPILED_GRAPH, marks.COMPILED_GRAPH]
    assert list(m["name"]) == [hooks.STEP, hooks.OPTIMIZER, hooks.COMPILE, hooks.COMPILE]


def test_marks_that_also_stay_ranges_depend_on_what_the_recording_has():
    # torch.profiler's own DataLoader/optimizer ranges: ours are marks only; no step ranges: the model's calls stay
    r, _ = marks.split(_ranges(["t.py", hooks.DATA, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                                hooks.OPTIMIZER, "Optimizer.step#SGD.step", hooks.FORWARD]))
    assert hooks.DATA not in set(r["name"]) and hooks.OPTIMIZER not in set(r["name"]) and hooks.FORWARD in set(r["name"])
    # nsys (no such ranges), a program that marks its steps: data and optimizer stay, the model's calls do not
    r, m = marks.split(_ranges(["t.py", "train", "step", hooks.DATA, hooks.OPTIMIZER, hooks.FORWARD]))
    assert list(r["name"]) == ["t.py", "train", "step", hooks.DATA, hooks.OPTIMIZER]
    assert list(m["name"]) == [hooks.DATA, hooks.OPTIMIZER, hooks.FORWARD]


def test_open_marks_close_at_the_end_except_an_unfinished_step():
    m = pd.DataFrame({"pid": [1, 1], "tid": [1, 1], "start_ns": [1.0, 2.0], "end_ns": [np.inf, np.inf],
                      "name": [hooks.STEP, hooks.COMPILE]})
    out = marks.sanitize(m, 10.0)
    assert list(out["name"]) == [hooks.COMPILE] and out["end_ns"].iloc[0] == 10.0
