"""The side of nsighttc that runs *inside the profiled program's process* (or, for the replay, inside a PyTorch
process of its own under Nsight Compute), as opposed to the tool that plans, parses and judges.

- ``launch``: ``python -m nsighttc.runtime.launch``, the launcher every engine runs the program in (runpy, the
  top-level range, the gate of the overlapped Nsight Compute pass, torch.profiler for the torch engine);
- ``rankexec``: behind torchrun/srun, starts the profiler inside each rank (and runs the launcher in its own process
  where no profiler comes first); ``rank_env``: the rank and world size the job's launcher set;
- ``group_backends``: which backends a rank's process groups used (what the launcher frees at the program's end);
- ``annotate``: the public range API users import (``from nsighttc import annotate``);
- ``kernel_ops``: the launcher's early kernel list, from the profiler's events in memory;
- ``cupti_quiet``: the runtime calls that do no GPU work, left out of CUPTI's records (a shorter profiler stop);
- ``variants``: what ``nsighttc try`` changes in the program (flags, autocast, DataLoader defaults);
- ``replay``: ``python -m nsighttc.runtime.replay``, the recorded operators called again under ncu.

The rule for every module here: import only the standard library at module level, and torch and nvtx at call
time; never pandas, numpy-heavy helpers or ``nsighttc.analysis`` / ``nsighttc.parse`` (their import alone costs
the program ~1 s and they are not the program's business). ``tests/test_structure.py`` enforces it, and that
nothing outside this folder is imported from here.
"""
