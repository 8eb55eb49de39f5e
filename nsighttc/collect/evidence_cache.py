"""A cache of hardware Tensor Core evidence, so the same kernels are profiled by Nsight Compute once.

Whether a kernel issues Tensor Core instructions, and with which source dtype, is a property of its code,
which its name fixes (the mangled name carries every template argument), on one GPU model and driver
(the driver's JIT and the library build decide which code runs). So an ncu measurement of a kernel stays
true for every later run on the same GPU and driver: ``profile`` looks the timeline's kernels up here
first and runs the ncu pass only for those still missing. Files: ``<cache>/evidence/<gpu>--<driver>.json``
(``<cache>`` = ``$NSIGHTTC_CACHE_DIR`` or ``~/.cache/nsighttc``), one entry per kernel name and launch
configuration (grid, block); a lookup takes the same configuration first, else any configuration of the
same kernel (the code is the same; only ``tc_flop_per_call``, which depends on the problem size, is then
left out). A cache that cannot be read or written is ignored with a note: it only ever saves time.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from .doctor import cache_dir

if TYPE_CHECKING:
    import pandas as pd

# pandas and the analysis modules are imported where a table is handled: reading the file and a program's
# record (what the default run asks before its timeline starts) needs neither (~0.5-1 s of imports).

SCHEMA = "nsighttc.evidence-cache/1"
MAX_ENTRIES = 50_000  # oldest dropped beyond this: a few MB of JSON


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "unknown"


def _config(s: pd.Series) -> pd.Series:
    """'(1, 2, 3)', '[1, 2, 3]' and '1,2,3' are one configuration."""
    return s.astype("string").fillna("").str.replace(r"[^\d,]", "", regex=True)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def program_key(argv: list[str], cwd: str | None = None) -> str:
    """Which program a run was of: its command line and working directory."""
    return hashlib.sha1(json.dumps([list(map(str, argv)), cwd or os.getcwd()]).encode()).hexdigest()[:16]


@dataclass
class Lookup:
    """The outcome of looking a timeline's kernels up: evidence rows found and kernels still missing."""
    hardware: pd.DataFrame            # rows shaped like classified ncu launches (name = the timeline's name)
    missing: pd.DataFrame             # name, grid, block, time_ns: kernels that need an ncu measurement
    candidates: int = 0               # distinct kernel names that need hardware evidence at all
    notes: list[str] = field(default_factory=list)


class EvidenceCache:
    def __init__(self, gpu_name: str, driver: str, root: Path | None = None):
        self.gpu, self.driver = gpu_name or "unknown-gpu", driver or "unknown-driver"
        self.path = Path(root or cache_dir()) / "evidence" / f"{_slug(self.gpu)}--{_slug(self.driver)}.json"
        self.notes: list[str] = []
        self._doc = self._read()
        self._rekeyed = False

    def _read(self) -> dict:
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("schema") == SCHEMA and isinstance(doc.get("kernels"), dict):
                doc.setdefault("programs", {})
                return doc
            self.notes.append(f"{self.path}: not an evidence cache of this version; ignored")
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            self.notes.append(f"{self.path}: unreadable evidence cache ({exc}); ignored")
        return {"schema": SCHEMA, "gpu": self.gpu, "driver": self.driver, "kernels": {}, "programs": {}}

    def __len__(self) -> int:
        return len(self._doc["kernels"])

    def _rekey(self) -> None:
        """Entries written with an earlier ``merge_key`` (its spelling rules grow: integer suffixes, ``const``
        placement, spaces, added after a Trainer's kernels went unmatched) are keyed again from their names, once,
        where the analysis is already imported (not when the cache is opened, before the program starts)."""
        if self._rekeyed:
            return
        self._rekeyed = True
        from ..analysis.kernel_keys import kernel_key
        kernels: dict[str, dict] = {}
        for k, e in self._doc["kernels"].items():
            rest = k.partition("|")[2]
            kernels.setdefault(f"{kernel_key(str(e['name']))}|{rest}" if e.get("name") else k, e)
        self._doc["kernels"] = kernels

    # --- reading ----------------------------------------------------------------------------------
    def lookup(self, kernels: pd.DataFrame) -> pd.DataFrame:
        """Hardware evidence for the kernels of ``kernels`` (columns name, grid, block) found in the cache,
        one row per distinct (name, grid, block), shaped for ``merge.apply_hardware_evidence``."""
        import numpy as np
        import pandas as pd
        from ..analysis.merge import CACHE_DETAIL, NAMED_DTYPE, merge_key
        from ..analysis.tensor_cores import EVIDENCE_HARDWARE
        from ..render.names import short_name
        cols = ["name", "grid", "block", "evidence", "evidence_detail", "tensor_core", "dtype", "tc_flop",
                "tensor_pipe_pct", "dtype_named"]
        self._rekey()
        entries = self._doc["kernels"]
        if kernels.empty or not entries:
            return pd.DataFrame(columns=cols)
        d = kernels[["name", "grid", "block"]].drop_duplicates().reset_index(drop=True)
        d["_key"] = merge_key(d["name"]).to_numpy()
        exact = d["_key"] + "|" + _config(d["grid"]) + "|" + _config(d["block"])
        by_name: dict[str, dict] = {}
        by_short: dict[str, list[dict]] = {}
        entries = {k: e for k, e in entries.items() if not e.get("unmeasured")}
        for k, e in entries.items():
            by_name.setdefault(k.split("|", 1)[0], e)
            by_short.setdefault(short_name(e.get("name", ""), width=10_000), []).append(e)
        rows = []
        for key, ex, name, grid, block in zip(d["_key"], exact, d["name"], d["grid"], d["block"]):
            e = entries.get(ex)
            same_config = e is not None
            e = e or by_name.get(key)
            if e is None:  # torch.profiler and ncu demangle differently: the short family name, if unambiguous
                alike = by_short.get(short_name(name, width=10_000), [])
                if len({a.get("name") for a in alike}) == 1:
                    e = alike[0]
            if e is None:
                continue
            named = bool(e.get("dtype_named"))
            rows.append({"name": name, "grid": grid, "block": block, "evidence": EVIDENCE_HARDWARE,
                         "evidence_detail": f"{CACHE_DETAIL} (measured {e.get('measured', '?')[:10]}"
                                            + (f"; {NAMED_DTYPE})" if named else ")"),
                         "tensor_core": e.get("tensor_core"), "dtype": e.get("dtype"), "dtype_named": named,
                         "tc_flop": e.get("tc_flop_per_call") if same_config else np.nan,
                         "tensor_pipe_pct": e.get("tensor_pipe_pct")})
        out = pd.DataFrame(rows, columns=cols)
        out["tc_flop"] = pd.to_numeric(out["tc_flop"], errors="coerce")
        out["tensor_pipe_pct"] = pd.to_numeric(out["tensor_pipe_pct"], errors="coerce")
        return out

    def unmeasured(self, names) -> set[str]:
        """Names an earlier ncu pass was asked to measure and could not (never launched under ncu, or its
        report did not match them): asking again on every run would cost a whole ncu pass each time."""
        self._rekey()
        gone = {k.split("|", 1)[0] for k, e in self._doc["kernels"].items() if e.get("unmeasured")}
        if not gone:
            return set()
        import pandas as pd
        from ..analysis.merge import merge_key
        names = pd.Series(list(names), dtype=object)
        return set(names[merge_key(names).isin(gone).to_numpy()])

    def known(self, names) -> set[str]:
        """The names the cache holds an entry for: measured, or asked for and not measurable."""
        self._rekey()
        keys = {k.split("|", 1)[0] for k in self._doc["kernels"]}
        if not keys:
            return set()
        import pandas as pd
        from ..analysis.merge import merge_key
        names = pd.Series(list(names), dtype=object)
        return set(names[merge_key(names).isin(keys).to_numpy()])

    def add_unmeasured(self, names, source: str) -> None:
        import pandas as pd
        from ..analysis.merge import merge_key
        self._rekey()
        now = _now()
        for n, k in zip(names, merge_key(pd.Series(list(names), dtype=object))):
            self._doc["kernels"].setdefault(f"{k}||", {"name": str(n), "unmeasured": True, "measured": now,
                                                        "source": source})

    def program(self, key: str) -> dict | None:
        return self._doc["programs"].get(key)

    # --- writing ----------------------------------------------------------------------------------
    def add(self, launches: pd.DataFrame, source: str) -> int:
        """Remember every launch with hardware evidence measured in this run (not ones taken from here)."""
        if launches.empty:
            return 0
        self._rekey()
        import pandas as pd
        from ..analysis.merge import CACHE_DETAIL, merge_key
        from ..analysis.tensor_cores import EVIDENCE_HARDWARE
        hw = launches[(launches["evidence"] == EVIDENCE_HARDWARE).to_numpy()]
        if "evidence_detail" in hw:
            hw = hw[~hw["evidence_detail"].astype(str).str.startswith(CACHE_DETAIL).to_numpy()]
        if hw.empty:
            return 0
        g = hw.assign(k_name=merge_key(hw["name"]).to_numpy(), k_grid=_config(hw["grid"]).to_numpy(),
                      k_block=_config(hw["block"]).to_numpy(),
                      _named=hw["dtype_named"].fillna(False).astype(bool) if "dtype_named" in hw else False)
        g = g.groupby(["k_name", "k_grid", "k_block"], sort=False, observed=True).agg(
            name=("name", "first"), tensor_core=("tensor_core", "first"), dtype=("dtype", "first"),
            dtype_named=("_named", "first"),
            states=("tensor_core", lambda s: len({repr(v) for v in s})),
            tc_flop=("tc_flop", "median"), tensor_pipe_pct=("tensor_pipe_pct", "median")).reset_index()
        g = g[g["states"] == 1]  # launches of one configuration that disagree are not cached
        now = _now()
        for r in g.itertuples(index=False):
            self._doc["kernels"][f"{r.k_name}|{r.k_grid}|{r.k_block}"] = {
                "name": str(r.name), "tensor_core": None if r.tensor_core is None or pd.isna(r.tensor_core) else bool(r.tensor_core),
                "dtype": None if r.dtype is None or pd.isna(r.dtype) else str(r.dtype),
                "tc_flop_per_call": None if pd.isna(r.tc_flop) else float(r.tc_flop),
                "tensor_pipe_pct": None if pd.isna(r.tensor_pipe_pct) else float(r.tensor_pipe_pct),
                "dtype_named": bool(r.dtype_named), "measured": now, "source": source}
        return len(g)

    def set_program(self, key: str, complete: bool, label: str, window: bool = False,
                    window_warmup: int | None = None, window_steps: int | None = None,
                    window_last_optimizer_step: int | None = None) -> None:
        """``complete``: every kernel the program ran has its evidence here (or had its chance under ncu);
        ``window``: its timeline's window of steady steps started (its next run records from there);
        ``window_warmup``: after how many warm-up steps it started (the next run's window starts no later:
        ``profile.window.timeline_window``); ``window_steps``: how many steps that window was to hold (the next run's
        holds no more); ``window_last_optimizer_step``: after how many optimizer steps the program ended by itself
        inside that window (the next run's window ends with that one: ``profile.window.timeline_window``)."""
        self._doc["programs"][key] = {"complete": bool(complete), "label": label, "window": bool(window),
                                      **({"window_warmup": int(window_warmup)} if window_warmup is not None else {}),
                                      **({"window_steps": int(window_steps)} if window_steps is not None else {}),
                                      **({"window_last_optimizer_step": int(window_last_optimizer_step)}
                                         if window_last_optimizer_step is not None else {}),
                                      "seen": _now()}

    def save(self) -> bool:
        """Write atomically, merged with what another run may have written meanwhile."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            disk = self._read() if self.path.exists() else {"kernels": {}, "programs": {}}
            kernels = {**disk.get("kernels", {}), **self._doc["kernels"]}
            if len(kernels) > MAX_ENTRIES:
                kernels = dict(sorted(kernels.items(), key=lambda kv: kv[1].get("measured", ""))[-MAX_ENTRIES:])
            programs = {**disk.get("programs", {}), **self._doc["programs"]}
            doc = {"schema": SCHEMA, "gpu": self.gpu, "driver": self.driver, "kernels": kernels,
                   "programs": dict(list(programs.items())[-2000:])}
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".evidence-", suffix=".json")
            try:
                with os.fdopen(fd, "w") as fh:
                    fh.write(json.dumps(doc))
                os.replace(tmp, self.path)
            except OSError:
                os.unlink(tmp)  # a full disk must not leave half a cache beside the real one
                raise
            self._doc, self._rekeyed = doc, False  # another run's entries may carry older keys
            return True
        except OSError as exc:
            self.notes.append(f"{self.path}: could not write the evidence cache ({exc.strerror or exc})")
            return False
