"""``python -m nsighttc.render.plot_worker``: one figure of a report, drawn in its own process
(``render.plot_workers`` says why and the protocol). Warms matplotlib first, says it is ready, waits for one
request on stdin, draws, answers, exits. End of file on stdin (the parent went away) ends it at once.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _say(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> int:
    from . import plots
    from .plots import FIGURES
    try:
        plots.warm(full=True)
    except Exception:  # noqa: BLE001 - the request below meets the same problem and answers it
        pass
    _say({"ready": True})
    line = sys.stdin.readline()
    if not line:
        return 0
    t0 = time.monotonic()
    try:
        req = json.loads(line)
        draw = FIGURES[req["plot"]][2]
        doc = json.loads(Path(req["doc"]).read_text())
        made = draw(doc, Path(req["out"])) is not None
    except Exception as exc:  # noqa: BLE001 - the parent draws it itself and reports what fails there
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    _say({"made": made, "seconds": round(time.monotonic() - t0, 3)})  # the verdict's reading and the drawing
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the figure is written and said: no interpreter teardown (matplotlib's) to wait for
