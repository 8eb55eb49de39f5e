"""Inputs given as fsspec URLs (``s3://bucket/job/rank3/trace.json.gz``, ``gs://...``, ``file:///...``): the recordings
of a big job where they lie, read by the workers of a cluster (``executors.Dask``) or here.

The readers open local files (SQLite needs one), so a URL is fetched to a local temporary file just before its
analysis, on the machine that analyses it, and the verdict names the URL. Grouping the inputs into ranks reads only
the start of each file (its kind, torch.profiler's ``distributedInfo``), as for local files. fsspec comes with the
``dask`` extra (``pip install 'nsighttc[dask]'``); the protocol's own package (s3fs, gcsfs) is the user's.
"""
from __future__ import annotations

import contextlib
import gzip
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://")


def is_url(value) -> bool:
    return isinstance(value, str) and bool(_URL.match(value))


@dataclass(frozen=True)
class RemoteInput:
    """One input file named by a URL. ``name`` and ``parents`` serve the rank-from-path rule like a Path's."""
    url: str

    def __str__(self) -> str:
        return self.url

    @property
    def name(self) -> str:
        return PurePosixPath(self.url.split("://", 1)[1]).name

    @property
    def parents(self):
        return PurePosixPath(self.url.split("://", 1)[1]).parents


def _fs(url: str):
    from .errors import UsageError
    try:
        import fsspec
    except ImportError:
        raise UsageError(f"{url}: reading URLs needs fsspec: pip install 'nsighttc[dask]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"{url}: fsspec cannot open this URL ({exc}); install the protocol's package "
                         "(s3fs for s3://, gcsfs for gs://)") from None


def expand(url: str, suffixes: tuple[str, ...], own_outputs: set[str]) -> list[RemoteInput]:
    """A URL of a file, a folder (every profiler output under it) or a glob (``.../rank*/trace.json.gz``)."""
    from .errors import InputError
    fs, path = _fs(url)
    proto = url.split("://", 1)[0]
    try:
        if any(c in path for c in "*?["):
            found = sorted(fs.glob(path))
        elif fs.isdir(path):
            found = sorted(fs.find(path))
        elif fs.exists(path):
            return [RemoteInput(url)]
        else:
            raise InputError("no such file or folder", url)
    except OSError as exc:
        raise InputError(f"could not be listed ({exc})", url) from None
    keep = [p for p in found if p.lower().endswith(suffixes) and PurePosixPath(p).name.lower() not in own_outputs
            and not PurePosixPath(p).name.startswith(".")]
    if not keep:
        raise InputError("no profiler outputs here (looked for .sqlite, .json (.gz/.xz), .ncu-rep, .nsys-rep, ncu .csv)",
                         url)
    return [RemoteInput(f"{proto}://{p.lstrip('/')}" if proto != "file" else f"file:///{p.lstrip('/')}")
            for p in keep]


def head(inp: RemoteInput, n: int) -> bytes:
    """The first ``n`` bytes of the file (decompressed where it is gzip or xz), or b"" when it cannot be read."""
    import lzma
    from .parse.textio import GZIP_MAGIC, XZ_MAGIC
    try:
        fs, path = _fs(inp.url)
        with fs.open(path, "rb") as fh:
            raw = fh.read(max(n, 6))
            if raw[:2] == GZIP_MAGIC or raw[:6] == XZ_MAGIC:
                fh.seek(0)
                with (gzip.open(fh, "rb") if raw[:2] == GZIP_MAGIC else lzma.open(fh, "rb")) as z:
                    return z.read(n)
            return raw[:n]
    except Exception:  # noqa: BLE001 - unreadable: the reader that opens it says why
        return b""


@contextlib.contextmanager
def local_copy(inp: RemoteInput):
    """The file fetched to a temporary local file with the same name (removed afterwards)."""
    from .errors import InputError
    fs, path = _fs(inp.url)
    with tempfile.TemporaryDirectory(prefix="nsighttc-url-") as tmp:
        dest = Path(tmp) / (inp.name or "input")
        try:
            with fs.open(path, "rb") as src, dest.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
        except FileNotFoundError:
            raise InputError("no such file", inp.url) from None
        except OSError as exc:
            raise InputError(f"could not be fetched ({exc})", inp.url) from None
        yield dest
