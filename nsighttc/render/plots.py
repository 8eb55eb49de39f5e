"""PNG plots beside the report, drawn from the verdict JSON alone (so `nsighttc report` can redraw them).

- ``timeline.png``: GPU activity over the profiled window (share of each time bin the GPU was busy, and
  the part of it in Tensor Core kernels) with the NVTX ranges above it;
- ``kernel_time.png``: GPU kernel time per range, split by Tensor Core dtype / CUDA cores / unknown; each
  kernel counted once, in its innermost range (a parent shows only what ran outside its children).
Sizes are chosen to stay readable when a PR comment scales them to ~800 px wide.
"""
from __future__ import annotations

from pathlib import Path

DTYPE_COLORS = {"fp16": "#2ca02c", "bf16": "#17becf", "tf32": "#9467bd", "fp8": "#e377c2", "int8": "#bcbd22",
                "fp64": "#8c564b", "unknown": "#7fbf7f"}
CUDA_CORE = "#d62728"
UNKNOWN = "#b0b0b0"


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def warm(full: bool = False) -> None:
    """Draw one small figure, thrown away: the first figure of a process loads fonts and sets up the renderer
    (this repository's 2-core machine: the default run's two plots took 0.46 s first, 0.19-0.21 s after it). The
    default run calls it while the program runs (``profile.default._preload``). ``full``: draw both of the
    report's figures from a small made-up verdict instead, so every font size, artist and code path they use is
    loaded (a plot worker, ``render.plot_workers``, has the time while the program runs)."""
    import io
    plt = _plt()
    if full:
        ranges = [{"path": "p", "depth": 0, "start_ns": 0.0, "end_ns": 4e6},
                  {"path": "p/step", "depth": 1, "start_ns": 1e5, "end_ns": 2e6}]
        doc = {"timeline": {"verdict": "mixed", "activity": {"bin_ns": 1e5, "busy": [0.5] * 40,
                                                            "tensor_core_busy": [0.2] * 40, "ranges": ranges,
                                                            "scope": "warm-up", "phase": "p"}},
               "tensor_cores": {"kernel_time_ns": 3e6, "tc_time_share": 0.5, "by_dtype": {"fp16": 0.5},
                                "unknown_time_share": 0.1},
               "ranges": [{"name": "p", "kernel_time_ns": 3e6, "by_dtype": {"fp16": 0.5}, "unknown_time_share": 0.1},
                          {"name": "p/step", "kernel_time_ns": 2e6, "by_dtype": {"bf16": 0.4},
                           "unknown_time_share": 0.0}]}
        timeline_png(doc, io.BytesIO())
        kernel_time_png(doc, io.BytesIO())
        return
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.barh(["a"], [1.0])
    ax.set_xlabel("ms")
    ax.set_title("warm")
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


def timeline_png(doc: dict, path) -> Path | None:
    tl = doc.get("timeline") or {}
    act = tl.get("activity") or {}
    busy = act.get("busy")
    if not busy:
        return None
    plt = _plt()
    import numpy as np
    bin_ms = act["bin_ns"] / 1e6
    x = np.arange(len(busy)) * bin_ms
    ranges = act.get("ranges") or []
    depths = sorted({r["depth"] for r in ranges})
    fig, (ax_r, ax) = plt.subplots(2, 1, figsize=(10, 3.6 + 0.3 * len(depths)), sharex=True,
                                   gridspec_kw={"height_ratios": [max(1, len(depths)), 3]})
    ax.fill_between(x, 0, np.asarray(busy) * 100, step="post", color="#9ecae1", label="GPU busy")
    ax.fill_between(x, 0, np.asarray(act.get("tensor_core_busy", [0] * len(busy))) * 100, step="post",
                    color=DTYPE_COLORS["fp16"], label="Tensor Core kernels")
    ax.set_ylim(0, 100)
    ax.set_ylabel("GPU busy (%)")
    ax.set_xlabel("time since the window start (ms)")
    ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)
    names = sorted({r["path"] for r in ranges})
    palette = plt.get_cmap("tab20")
    color = {n: palette(i % 20) for i, n in enumerate(names)}
    labelled = set()
    span = x[-1] + bin_ms if len(x) else 1
    for d in depths:  # one collection per depth, not one bar artist per range instance (up to 400 of them)
        at = [r for r in ranges if r["depth"] == d]
        ax_r.broken_barh([(r["start_ns"] / 1e6, (r["end_ns"] - r["start_ns"]) / 1e6) for r in at], (d - 0.4, 0.8),
                         facecolors=[color[r["path"]] for r in at], edgecolor="white", linewidth=0.3)
    for r in ranges:
        s, e = r["start_ns"] / 1e6, r["end_ns"] / 1e6
        if (e - s) > span * 0.06 and r["path"] not in labelled:
            ax_r.text(s + (e - s) / 2, r["depth"], r["path"].rsplit("/", 1)[-1][:24], ha="center", va="center",
                      fontsize=7, clip_on=True)
            labelled.add(r["path"])
    ax_r.set_xlim(left=0)  # the window starts at 0 (bars pinned it there; collections leave a margin)
    ax_r.set_yticks(depths or [0])
    ax_r.set_yticklabels([f"depth {d}" for d in depths] or [""], fontsize=8)
    ax_r.invert_yaxis()
    ax.set_xlabel(f"time (ms) since the start of the {act.get('scope', 'profiled window')}")
    phase = f" (phase `{act['phase']}`)" if act.get("phase") else ""
    ax_r.set_title(f"GPU activity and NVTX ranges — {tl.get('verdict', '')}, GPU busy {100 * float(np.mean(busy)):.0f}%\n"
                   f"over the {act.get('scope', 'profiled window')}{phase}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def self_ranges(ranges: list[dict]) -> list[dict]:
    """Each range's own kernel time: its total minus its direct children's, so that a kernel launched in
    ``a/b`` is drawn once (in ``a/b``), not again in ``a``. A parent keeps what ran outside its children,
    labelled as such. Dtype and unknown shares are recomputed for the remainder."""
    by_name = {r["name"]: r for r in ranges}
    kids: dict[str, list[dict]] = {}
    for r in ranges:
        if "/" in r["name"] and r["name"].rsplit("/", 1)[0] in by_name:
            kids.setdefault(r["name"].rsplit("/", 1)[0], []).append(r)
    out = []
    for r in ranges:
        total = r.get("kernel_time_ns") or 0.0
        ch = kids.get(r["name"], [])
        own = total - sum(c.get("kernel_time_ns") or 0.0 for c in ch)
        if own <= max(total, 1.0) * 1e-6:
            continue
        dt = {d: s * total - sum((c.get("by_dtype") or {}).get(d, 0.0) * (c.get("kernel_time_ns") or 0.0) for c in ch)
              for d, s in (r.get("by_dtype") or {}).items()}
        unk = (r.get("unknown_time_share") or 0.0) * total - sum(
            (c.get("unknown_time_share") or 0.0) * (c.get("kernel_time_ns") or 0.0) for c in ch)
        out.append({"name": r["name"] + (" (outside child ranges)" if ch else ""), "kernel_time_ns": own,
                    "by_dtype": {d: max(v, 0.0) / own for d, v in dt.items()},
                    "unknown_time_share": max(unk, 0.0) / own})
    return out


def kernel_time_png(doc: dict, path, top: int = 12) -> Path | None:
    ranges = self_ranges([r for r in (doc.get("ranges") or []) if (r.get("kernel_time_ns") or 0) > 0])
    floor = 1e-3 * sum(r["kernel_time_ns"] for r in ranges)
    ranges = [r for r in ranges if r["kernel_time_ns"] >= floor]  # slivers under 0.1% of kernel time
    tc = doc["tensor_cores"]
    if not ranges:  # no NVTX ranges: one bar for the whole run (by_dtype are shares of all kernel time)
        ranges = [{"name": "whole run", "kernel_time_ns": tc["kernel_time_ns"], "tc_time_share": tc["tc_time_share"],
                   "by_dtype": dict(tc.get("by_dtype", {})), "unknown_time_share": tc.get("unknown_time_share", 0)}]
    if not ranges or not tc.get("kernel_time_ns"):
        return None
    ranges = sorted(ranges, key=lambda r: -r["kernel_time_ns"])[:top][::-1]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.42 * len(ranges)))
    import numpy as np
    dtypes = sorted({d for r in ranges for d in (r.get("by_dtype") or {})})
    total = np.array([r["kernel_time_ns"] / 1e6 for r in ranges])
    rows = np.arange(len(ranges))
    left = np.zeros(len(ranges))
    for d in dtypes:  # one bar series per segment kind, every range at once
        w = np.array([(r.get("by_dtype") or {}).get(d, 0.0) for r in ranges]) * total
        ax.barh(rows, w, left=left, color=DTYPE_COLORS.get(d, "#2ca02c"), label=f"Tensor Cores {d}")
        left = left + w
    unk = np.array([r.get("unknown_time_share") or 0.0 for r in ranges]) * total
    cuda = np.maximum(total - left - unk, 0.0)
    ax.barh(rows, cuda, left=left, color=CUDA_CORE, label="CUDA cores")
    ax.barh(rows, unk, left=left + cuda, color=UNKNOWN, label="unknown")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="lower right", framealpha=0.9)
    ax.set_yticks(range(len(ranges)))
    ax.set_yticklabels([r["name"] if len(r["name"]) <= 56 else "…" + r["name"][-55:] for r in ranges], fontsize=8)
    ax.set_xlabel("GPU kernel time (ms)")
    ax.set_title("Kernel time by NVTX range (each kernel once, in its innermost range)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# figure name -> (alt text in the Markdown, file name, drawing function); the report lists them in this order
FIGURES = {"timeline": ("GPU activity timeline", "timeline.png", timeline_png),
           "kernel_time": ("Kernel time by range", "kernel_time.png", kernel_time_png)}


def write_plots(doc: dict, out_dir: Path, drawn: dict[str, bool] | None = None) -> dict[str, str]:
    """Write the plots that the verdict has data for; returns {alt text: file name} for the Markdown.
    ``drawn``: figures already drawn elsewhere (``plot_workers``: {name: made}); the others are drawn here."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = drawn or {}
    made = {}
    for name, (alt, file, draw) in FIGURES.items():
        if drawn[name] if name in drawn else draw(doc, out_dir / file) is not None:
            made[alt] = file
    return made
