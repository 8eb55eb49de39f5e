"""Nsight Compute CSV exports -> the kernel table.

Two page layouts exist:

* ``--page raw``: header row, a units row, then one row per kernel launch with one column per metric;
* ``--page details``: long form, one row per (launch, section, metric) with ``Metric Name``,
  ``Metric Unit``, ``Metric Value`` (newer versions append rule columns); section pages use display
  names such as ``Duration`` in ``us``.

What real exports contain and we handle: every value quoted, numbers with locale thousands separators,
a units row, NVTX context columns, instanced values, metrics absent on a chip (missing column or
``n/a``), and, when the CSV was captured from ncu's stdout, the workload's own output and ``==PROF==``
lines around it. The clean case goes straight through pandas' C parser (100k launches in about a
second); only a file that fails that falls back to line filtering.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from .. import ncu_metrics
from ..errors import ParseError
from ..model import INST_KINDS, TC_DTYPES, conform
from . import nvtx, textio
from .numbers import detect_separators, to_float, unit_factor

ID, NAME = "ID", "Kernel Name"
NVTX_PUSHPOP_PREFIX = "thread Domain:Push/Pop_Range"
NVTX_STARTEND_PREFIX = "Id:Domain:Start/Stop_Range"
IDENTITY = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC"]
DETAILS_COLUMNS = {"Metric Name", "Metric Unit", "Metric Value"}


def is_ncu_csv_header(line: str) -> bool:
    return line.startswith('"ID",') and '"Kernel Name"' in line


def read(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Parse an ncu CSV export (raw or details page). Returns (kernel table, warnings)."""
    warnings: list[str] = []
    frame, units, converted = _read_frame(path, warnings)
    if DETAILS_COLUMNS <= set(frame.columns):
        wide, units = _details_to_wide(frame, path)
    else:
        wide = frame
        if converted:
            units = {**units, "__numbers__": "1"}
    if NAME in wide.columns:
        unnamed = wide[NAME].isna()
        if unnamed.any():
            warnings.append(f"{path}: dropped {int(unnamed.sum())} row(s) without a kernel name")
            wide = wide[~unnamed].reset_index(drop=True)
    if wide.empty:
        raise ParseError("ncu CSV has a header but no kernel rows", path)
    table = _to_kernel_table(wide, units, path)
    if table["duration_ns"].isna().all():
        warnings.append(f"{path}: {NO_DURATION} in this export; time shares are by launch count")
    return table, warnings


NO_DURATION = "no kernel duration metric (gpu__time_duration)"  # moot beside a timeline (its times are real)


# --- reading -----------------------------------------------------------------------------------
def _wanted(column: str) -> bool:
    """Columns the kernel table may be built from; the other few hundred are never converted."""
    return (column in IDENTITY or column.startswith((NVTX_PUSHPOP_PREFIX, NVTX_STARTEND_PREFIX))
            or column in DETAILS_COLUMNS or column == "device__attribute_display_name"
            or column in ncu_metrics.DURATION_ALIASES or column.startswith("sm__ops_path_tensor")
            or column.startswith(("sm__inst_executed_pipe_tensor", "sm__inst_executed_pipe_tc"))
            or column in ncu_metrics.PIPE_PCT_ALIASES)


def _used(header: list[str]) -> list[str]:
    """Of a raw page's columns, exactly those ``_to_kernel_table`` will read: identity and NVTX text, the
    first duration / instruction / pipe alias present, the chosen ops columns. The .avg/.min/.max twins
    of every counter are left unread (1M-launch benchmark: 16 of 64 metric columns converted)."""
    have = set(header)
    metrics = {c for names in ncu_metrics.choose_ops_columns(header).values() for c in names}
    for aliases in (ncu_metrics.DURATION_ALIASES, ncu_metrics.PIPE_PCT_ALIASES, *ncu_metrics.INST_ALIASES.values()):
        first = next((c for c in aliases if c in have), None)
        if first:
            metrics.add(first)
    return [c for c in header if c in metrics or (_wanted(c) and "__" not in c)
            or c == "device__attribute_display_name"]


def _read_frame(path: Path, warnings: list[str]) -> tuple[pd.DataFrame, dict[str, str], bool]:
    """(frame, units, numbers_converted). The clean case is one pass of pandas' C parser over the
    columns we use, with the file's thousands/decimal separators; anything else is line-filtered."""
    head = textio.head_bytes(path, 1 << 18).decode("utf-8", errors="replace").lstrip("\ufeff")
    first = head.split("\n", 1)[0]
    if is_ncu_csv_header(first):
        sample = list(csv.reader(io.StringIO(head.rsplit("\n", 1)[0])))
        header = sample[0]
        has_units = len(sample) > 1 and len(sample[1]) == len(header) and sample[1][0] == ""
        units = {c: u for c, u in zip(header, sample[1]) if u} if has_units else {}
        body = sample[2:] if has_units else sample[1:]
        numeric_idx = [i for i, c in enumerate(header) if "__" in c]
        thousands, decimal = detect_separators(pd.Series([r[i] for r in body[:200] for i in numeric_idx
                                                          if i < len(r)], dtype=object))
        is_details = DETAILS_COLUMNS <= set(header)
        text_cols = [c for c in header if c in IDENTITY or c.startswith((NVTX_PUSHPOP_PREFIX, NVTX_STARTEND_PREFIX))
                     or c in DETAILS_COLUMNS or c == "device__attribute_display_name"]
        wanted = _used(header) if not is_details else [c for c in header if _wanted(c)]
        try:
            if is_details:  # ncu leaves the rule columns off metric rows: short rows Arrow refuses
                raise ImportError
            frame = _read_arrow(path, wanted, has_units, is_details, text_cols, thousands, decimal)
        except ImportError:
            frame = _read_pandas(path, has_units, is_details, text_cols, thousands, decimal)
        except Exception:  # pyarrow refuses malformed rows: the line filter below copes and explains
            frame = None
        if frame is not None and ID in frame.columns and not frame[ID].isna().any() and _ids_ok(frame):
            _check_not_truncated(path, len(header), exact=not is_details)
            return frame, units, not is_details
    # Dirty input: program output or ==PROF== lines around/inside the CSV, or a broken row.
    frame = _read_filtered(path, warnings)
    frame, units = _split_units_row(frame) if not DETAILS_COLUMNS <= set(frame.columns) else (frame, {})
    return frame, units, False


def _read_arrow(path, wanted, has_units, is_details, text_cols, thousands, decimal) -> pd.DataFrame:
    """pyarrow's multi-threaded reader: every wanted column as text, numbers converted in Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    kind = textio.compression(path)  # (Arrow reads gzip itself; xz, which it has no codec for, through lzma)
    source = textio.open_binary(path) if kind == "xz" else \
        pa.input_stream(str(path), compression="gzip" if kind == "gzip" else None)
    table = pcsv.read_csv(
        source, read_options=pcsv.ReadOptions(skip_rows_after_names=1 if has_units else 0, block_size=1 << 24),
        convert_options=pcsv.ConvertOptions(include_columns=wanted, column_types={c: pa.string() for c in wanted},
                                            strings_can_be_null=True, null_values=["", "n/a", "N/A"]))
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if is_details or name in text_cols:
            cols[name] = col.to_pandas()
            continue
        clean = pc.replace_substring(col, thousands, "")
        if decimal != ".":
            clean = pc.replace_substring(clean, decimal, ".")
        try:
            cols[name] = pc.cast(clean, pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:  # instanced values "a;b" or text: the string converter handles them
            cols[name] = to_float(col.to_pandas().astype("string"), thousands, decimal,
                                  sum_instances=name.endswith(".sum")).to_numpy()
    return pd.DataFrame(cols)


def _read_pandas(path, has_units, is_details, text_cols, thousands, decimal) -> pd.DataFrame | None:
    """pandas' C parser, for installs without pyarrow (about 4x slower on wide raw pages)."""
    try:
        frame = pd.read_csv(
            path, usecols=_wanted, skiprows=[1] if has_units else None, compression="infer", engine="c",
            dtype=str if is_details else {c: str for c in text_cols}, keep_default_na=False,
            na_values=["", "n/a", "N/A"], thousands=None if is_details else thousands,
            decimal="." if is_details else decimal, low_memory=False, encoding_errors="replace")
    except (pd.errors.ParserError, UnicodeDecodeError, EOFError, ValueError, OSError):
        return None
    return frame if is_details else _finish_numbers(frame, text_cols, thousands, decimal)


def _finish_numbers(frame: pd.DataFrame, text_cols: list[str], thousands: str, decimal: str) -> pd.DataFrame:
    """Metric columns the C parser could not make numeric (instanced values 'a;b', odd text) go through
    the string converter; the rest are floats already."""
    for c in frame.columns:
        if c not in text_cols and frame[c].dtype.kind not in "fiu":
            frame[c] = to_float(frame[c].astype("string"), thousands, decimal, sum_instances=c.endswith(".sum"))
    return frame


def _ids_ok(frame: pd.DataFrame) -> bool:
    ids = frame[ID].dropna()
    return bool(pd.to_numeric(ids, errors="coerce").notna().all())


def _row_fields(line: str) -> list[str] | None:
    """Fields of one CSV line, or None when a quoted field is left open (the line was cut)."""
    try:
        return next(csv.reader([line], strict=True), [])
    except csv.Error:
        return None


def _row_ok(fields: list[str] | None, n: int, exact: bool) -> bool:
    """Raw pages have every field on every row; details pages leave trailing rule columns off."""
    if fields is None:
        return False
    return len(fields) == n if exact else 2 <= len(fields) <= n


def _check_not_truncated(path: Path, n_fields: int, exact: bool = True) -> None:
    """The last line of an ncu CSV is a complete row."""
    tail = textio.tail_text(path, 1 << 20).rstrip("\r\n")
    last = tail.rsplit("\n", 1)[-1]
    fields = _row_fields(last)
    if fields is None:
        raise ParseError("truncated CSV: the last row is cut off inside a value", path)
    if not _row_ok(fields, n_fields, exact):
        raise ParseError(f"truncated CSV: the last row has {len(fields)} of {n_fields} fields", path)


def _read_filtered(path: Path, warnings: list[str]) -> pd.DataFrame:
    text = textio.read_text(path)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if is_ncu_csv_header(line.lstrip("\ufeff"))), None)
    if start is None:
        raise ParseError("not an Nsight Compute CSV export (no header row with \"ID\" and \"Kernel Name\")",
                         path)
    header = next(csv.reader([lines[start].lstrip("\ufeff")]))
    n, exact = len(header), not DETAILS_COLUMNS <= set(header)
    kept, dropped, last_bad = [lines[start].lstrip("\ufeff")], 0, False
    body = lines[start + 1:]
    for i, line in enumerate(body):
        if not line.startswith('"'):
            dropped += bool(line.strip())
            continue
        if _row_ok(_row_fields(line), n, exact):
            kept.append(line)
        else:
            dropped += 1
            last_bad = all(not rest.strip() for rest in body[i + 1:])
    if last_bad:
        raise ParseError("truncated CSV: the last row is cut off", path)
    if dropped:
        warnings.append(f"{path}: skipped {dropped} line(s) that are not CSV rows (program output mixed "
                        "into the capture?)")
    if len(kept) == 1:
        raise ParseError("ncu CSV has a header but no kernel rows", path)
    return pd.read_csv(io.StringIO("\n".join(kept)), dtype=str, keep_default_na=False, na_values=["", "n/a", "N/A"])


def _split_units_row(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """Raw page: a first row with an empty ID holds the units."""
    units: dict[str, str] = {}
    if len(frame) and pd.isna(frame[ID].iloc[0]):
        units = {c: u for c, u in frame.iloc[0].items() if isinstance(u, str) and u}
        frame = frame.iloc[1:]
    return frame.reset_index(drop=True), units


def _details_to_wide(frame: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """Details page: one row per metric -> one row per launch, values already in base units."""
    frame = frame[frame[ID].notna()]
    ident_cols = [c for c in frame.columns if c in IDENTITY or c.startswith((NVTX_PUSHPOP_PREFIX,
                                                                               NVTX_STARTEND_PREFIX))]
    ident = frame.drop_duplicates(ID)[ident_cols].set_index(ID)
    metrics = frame[[ID, "Metric Name", "Metric Unit", "Metric Value"]].dropna(subset=["Metric Name"])
    metrics = metrics.drop_duplicates([ID, "Metric Name"])
    thousands, decimal = detect_separators(metrics["Metric Value"].head(5000))
    factors = metrics["Metric Unit"].map({u: unit_factor(u) for u in metrics["Metric Unit"].unique()})
    values = to_float(metrics["Metric Value"], thousands, decimal) * factors.fillna(1.0).to_numpy()
    metrics = metrics.assign(value=values.to_numpy())
    names = metrics["Metric Name"].replace(ncu_metrics.DISPLAY_NAMES)
    metrics = metrics.assign(**{"Metric Name": names}).drop_duplicates([ID, "Metric Name"])
    wide = metrics.pivot(index=ID, columns="Metric Name", values="value")
    wide = wide.drop(columns=[c for c in wide.columns if c in ident.columns])  # "Block Size" etc.
    wide = ident.join(wide, how="left").reset_index()
    wide = wide.iloc[np.argsort(pd.to_numeric(wide[ID]).to_numpy(), kind="stable")]
    return wide.reset_index(drop=True), {"__converted__": "1"}


# --- to the kernel table ------------------------------------------------------------------------
def _to_kernel_table(wide: pd.DataFrame, units: dict[str, str], path: Path) -> pd.DataFrame:
    converted = units.get("__converted__") == "1"  # details page: values already floats in base units
    numbers = units.get("__numbers__") == "1"      # raw page read by the C parser: floats, units pending
    cols = set(wide.columns)
    if NAME not in cols:
        raise ParseError("not an Nsight Compute CSV export (no 'Kernel Name' column)", path)
    numeric_cols = [c for c in wide.columns if "__" in c or c == "Duration"]
    if converted or numbers:
        thousands, decimal = ",", "."
    else:
        sample = pd.concat([wide[c].head(200) for c in numeric_cols[:400]]) if numeric_cols else pd.Series([], dtype=str)
        thousands, decimal = detect_separators(sample)

    def num(col: str) -> pd.Series:
        if converted:
            return pd.to_numeric(wide[col], errors="coerce").astype("float64")
        if numbers:
            return wide[col].astype("float64") * unit_factor(units.get(col))
        return to_float(wide[col], thousands, decimal, sum_instances=col.endswith(".sum")) * unit_factor(units.get(col))

    out = pd.DataFrame(index=wide.index)
    out["source"] = "ncu"
    out["input"] = str(path)
    out["launch_id"] = pd.to_numeric(wide[ID], errors="coerce").astype("Int64")
    out["name"] = wide[NAME]
    dur = next((c for c in ncu_metrics.DURATION_ALIASES if c in cols), None)
    out["duration_ns"] = num(dur) if dur else np.nan
    out["grid"] = wide.get("Grid Size")
    out["block"] = wide.get("Block Size")
    out["stream"] = wide.get("Stream")
    out["device"] = pd.to_numeric(wide["Device"], errors="coerce").astype("Int64") if "Device" in cols else pd.NA
    out["cc"] = wide.get("CC")
    if "device__attribute_display_name" in cols:
        out["device_name"] = wide["device__attribute_display_name"]
    pushpop = next((wide[c] for c in wide.columns if c.startswith(NVTX_PUSHPOP_PREFIX)), None)
    startend = next((wide[c] for c in wide.columns if c.startswith(NVTX_STARTEND_PREFIX)), None)
    out["nvtx"] = nvtx.paths(pushpop, startend, wide.index)

    for dtype, names in ncu_metrics.choose_ops_columns(list(wide.columns)).items():
        if dtype in TC_DTYPES:
            out[f"tc_ops_{dtype}"] = pd.concat([num(n) for n in names], axis=1).sum(axis=1, min_count=1)
    for kind in INST_KINDS:
        col = next((c for c in ncu_metrics.INST_ALIASES[kind] if c in cols), None)
        if col is not None:
            out[f"inst_{kind}"] = num(col)
    pct = next((c for c in ncu_metrics.PIPE_PCT_ALIASES if c in cols), None)
    if pct is not None:
        out["tensor_pipe_pct"] = num(pct)
    return conform(out)
