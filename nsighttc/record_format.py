"""The record format: what the code inside the profiled program writes and the tool reads back.

Two sides of the house share these names: ``nsighttc/runtime/`` (the launcher, the step hooks, the host sampler, the
replay: code that runs inside the user's process) writes marks, ranges, lines and files; ``parse/``, ``analysis/``
and ``profile/`` read them. They live here, in one small module that imports nothing but the standard library, so
that each side imports the format and neither imports the other (``tests/test_structure.py`` checks that ``parse/``
imports nothing from ``runtime/`` or ``collect/``). A name changed here changes on both sides at once.
"""
from __future__ import annotations

# --- the step hooks' marks (``runtime.steps``): record_function labels (torch.profiler) and NVTX ranges (nsys) -----
PREFIX = "nsighttc."  # every mark's name starts with it (the replay's ranges use "nsighttc-")
STEP = "nsighttc.step"
OPTIMIZER = "nsighttc.optimizer"
DATA = "nsighttc.data"
FORWARD = "nsighttc.forward"
COMPILE = "nsighttc.compile"
BACKWARD = "nsighttc.backward"
WINDOW = "nsighttc.window"
PREFILL = "nsighttc.prefill"
DECODE = "nsighttc.decode"
REQUEST = "nsighttc.request"  # each generate() call (``runtime.model_calls``)
MARK_NAMES = (STEP, OPTIMIZER, DATA, FORWARD, BACKWARD, COMPILE, WINDOW, PREFILL, DECODE, REQUEST)
HOOK_PHASE = (STEP,)  # the phase of the hooks' steps (``runtime.window``)

# --- the host sampler (``runtime.host_samples``) ---------------------------------------------------------------------
HOST_SAMPLES_SCHEMA = "nsighttc.host-samples/1"
CLOCK_MARK = "nsighttc.clock#"  # + the anchor's number: the mark that ties the samples to the recording's clock
# Frame kinds, decided where the paths are known (the program's process): the program's own files, installed
# libraries, the standard library, and this tool's own frames (never shown).
OWN, LIBRARY, STDLIB, TOOL = "own", "library", "stdlib", "tool"

# --- the plain runs' step times (``runtime.step_timer``) -------------------------------------------------------------
STEP_TIMES_SCHEMA = "nsighttc.step-times/1"

# --- the replay (``runtime.replay``) ---------------------------------------------------------------------------------
REPLAY_RANGE = "nsighttc-replay"
# The warm-up's own profiled range: ncu's first profile in a process pays its one-time set-up, 0.6-1.2 s on H100
# (ResNet-50 AMP's replay: first call 0.69-1.24 s, later ones 17-150 ms; with one GEMM profiled in the warm-up,
# 0.02-0.07 s: benchmarks/probes/gpu_replay_first_call_probe.py, reports/profile_overhead/first_call_probe.json).
# Its result measured no kernel of the program: the parsers drop it (``parse._without_warm_up``).
WARM_RANGE = "nsighttc-warm"

# --- the launcher's lines on stderr (one write each: ``runtime.lines``) ---------------------------------------------
# Printed just before the trace is written at the program's end: the exit code the launcher will return.
EXIT_SAID = "nsighttc.launch: program exit code "
# Printed once the torch.profiler trace is complete on disk: the default run reads the trace from that moment.
TRACE_WRITTEN = "nsighttc.launch: wrote "
# (Where the program runs on for a few unrecorded steps after its window, the launcher writes the trace after them:
# ``runtime.trace_writing``; the line then says how long they ran, and nothing reads the trace while they run.)
NOTHING_RECORDED = "nsighttc.launch: no trace: "  # --record-from window, and no window started
OPS_WRITTEN = "nsighttc.launch: wrote operators "  # a first run's operators until the window are on disk
# A trace is being written by a forked copy of the process (``runtime.trace_writer``): + its path. The copy then says
# TRACE_WRITTEN / OPS_WRITTEN, or WRITE_FAILED + the path and why; until then the trace is not complete.
TRACE_WRITING = "nsighttc.launch: writing "
WRITE_FAILED = "nsighttc.launch: could not write "
# + the rank's trace path: a distributed first run's other rank changed sessions with the rank that records operators,
# and dropped what it had recorded before (``runtime.recording.OperatorsUntilWindow``)
DROPPED_BEFORE_WINDOW = "nsighttc.launch: dropped the recording before the window, for "
# + the rank's trace path: a change of sessions still waiting when the window started was given up, and the session
# recording then holds the window to the end (``runtime.recording.OperatorsUntilWindow.hold_window``); the line says
# whether operators were recorded for the replay ("no operators were recorded" where none were)
SESSION_KEPT = "nsighttc.launch: kept the window's session, for "
# A rank whose lead change to the operators' session could not run records them by a dispatch mode instead
# (``runtime.op_capture``): each call inside a range named CAPTURED_OP + its number in the list CAPTURE_FILE, beside
# the rank's trace. The ranges are bookkeeping, not the program's: the parsers drop them (``parse.marks``).
CAPTURED_OP = "nsighttc.op#"
CAPTURE_FILE = "torch_ops_capture.json"
# + the program's line: a torch.profiler the program made was held off while the launcher recorded with its own
# (``runtime.guest_profiler``: one process holds one Kineto session); said once, at its first action
OWN_PROFILER_HELD = "nsighttc.launch: the program's own torch.profiler held off, at "
# + seconds: a program waiting at its gate paused the profiler frontends above it that long (``runtime.paused_frontends``)
FRONTENDS_PAUSED = "nsighttc.gate: paused the frontends above the program while it waited at its gate, for "
WINDOW_EVENT = "nsighttc.launch: window "  # + a JSON object: what the window did (start/end/stop per phase)
