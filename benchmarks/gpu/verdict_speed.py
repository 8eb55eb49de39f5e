#!/usr/bin/env python3
"""One line per verdict.json: the steady step and time per output token as recorded and unrecorded (issue 51), for
the GPU scripts' summaries.   python3 benchmarks/gpu/verdict_speed.py RUN/verdict.json"""
import json
import sys

tl = json.load(open(sys.argv[1]))["timeline"]
st, inf = tl.get("steps") or {}, tl.get("inference") or {}
print(sys.argv[1].split("/")[-2], "| step", st.get("median_iteration_ns"), "unrecorded", st.get("unrecorded"),
      "| tpot", inf.get("tpot_ns"), "unrecorded", inf.get("unrecorded"), "| requests", inf.get("requests"))
