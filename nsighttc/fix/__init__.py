"""``nsighttc fix``: the advice as a patch of the program's own files, run and measured before anyone applies it.

``try`` applies a fix from the launcher (a flag set before the program starts, a DataLoader default changed as it
is built); a user still has to find the line and trust that their edit does what the variant did. Here the edit is
made (``fix.edits``: LibCST, the user's formatting kept), as a unified diff of the program's files, and a copy of
the program with it applied runs in the same rounds as the baseline and the launcher's variant (``experiment``):
the patch is kept when it ran and made the program measurably faster, and where the edit and the variant measured
apart, the report says so. Nothing in the user's tree changes unless ``--apply`` asks (``apply``), and then each file
gets a backup first.

Where the edits look: the program's script and the other ``.py`` files of its folder (a loader built in a helper
module, a ``LightningDataModule``), ``MAX_FILES`` at most, hidden folders, virtual environments and run folders left
out. The patched copy (``materialize``) copies those ``.py`` files and links everything else, so the program's
imports and relative data paths resolve as they do for the original.
"""
from __future__ import annotations

import difflib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from . import edits

MAX_FILES = 200
SKIP_DIRS = {"__pycache__", "nsighttc-runs", "node_modules", "site-packages"}
BACKUP_SUFFIX = ".nsighttc-bak"


@dataclass
class Patch:
    """One variant's edit over the program's files: ``files`` {path relative to ``root``: (old, new)}."""
    variant: str
    root: Path
    script: Path
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.files)

    def diff(self) -> str:
        return "".join("".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))
                       for rel, (old, new) in sorted(self.files.items()))

    def to_json(self) -> dict:
        return {"variant": self.variant, "files": sorted(self.files), "edits": self.done, "skipped": self.skipped,
                "diff": self.diff()}


def program_files(script: Path) -> list[Path]:
    """The script, then the modules of its folder it imports, and theirs (``import helpers``, ``from data import
    make_loader``, ``from pkg.sub import x``): the program's own files, not every file beside it."""
    import ast
    root = script.parent
    out, todo, seen = [], [script], set()
    while todo and len(out) < MAX_FILES:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        out.append(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level:  # relative: from the importing file's folder
                base = path.parent
                names = [str((base / (node.module or "").replace(".", os.sep)).relative_to(root)).replace(os.sep, ".")
                         .strip(".")] if (base / (node.module or "")).resolve().is_relative_to(root) else []
            for name in names:
                parts = [p for p in name.split(".") if p]
                for i in range(len(parts), 0, -1):
                    cand = root.joinpath(*parts[:i])
                    for f in (cand.with_suffix(".py"), cand / "__init__.py"):
                        if f.is_file() and f not in seen and SKIP_DIRS.isdisjoint(f.relative_to(root).parts):
                            todo.append(f)
    return out


def _workers(variant: str, default: int | None = None) -> int | None:
    """N of ``workers=N``; else ``default``."""
    return int(variant.split("=", 1)[1]) if edits.kind_of(variant) == "workers=N" else default


def plan(script: Path, variant: str, workers: int | None = None) -> Patch:
    """The edit for ``variant`` over the program's files (none changed where no safe edit exists: ``skipped`` says
    why)."""
    script = script.resolve()
    patch = Patch(variant, script.parent, script)
    kind = edits.kind_of(variant)
    n = _workers(variant, workers)
    if kind not in edits.KINDS:
        patch.skipped.append(f"`{variant}`: no source edit ({edits.NO_EDIT.get(kind, 'not a fix kind')})")
        return patch
    inserted = False  # flags the program never sets go after one file's `import torch` (the first in import order)
    for path in program_files(script):
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        rel = str(path.relative_to(patch.root))
        e = edits.apply(kind, old, rel, workers=n, insert=not inserted)
        inserted |= any("(after `import torch`)" in d for d in e.done)
        patch.skipped += e.skipped if path == script or e.changed else []
        if e.changed and e.source != old:
            patch.files[rel] = (old, e.source)
            patch.done += e.done
    if not patch.files and not patch.skipped:
        patch.skipped.append(f"`{variant}`: nothing in the program's files to edit for it")
    return patch


def materialize(patch: Patch, dest: Path) -> Path:
    """A copy of the program with the patch applied under ``dest``: its ``.py`` files copied (edited ones written),
    everything else linked. Returns the patched script's path. The user's files are only read."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    copied = {str(p.relative_to(patch.root)) for p in program_files(patch.script)}
    for entry in sorted(patch.root.iterdir()):
        if entry.name.startswith(".") or entry.name in SKIP_DIRS or entry.name == dest.name:
            continue
        rel = entry.name
        if entry.is_dir() and any(c.startswith(rel + os.sep) for c in copied):
            _copy_tree(entry, dest / rel, patch.root, copied)
        elif rel in copied:
            shutil.copy2(entry, dest / rel)
        else:
            (dest / rel).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    for rel, (_, new) in patch.files.items():
        (dest / rel).write_text(new, encoding="utf-8")
    return dest / patch.script.relative_to(patch.root)


def _copy_tree(src: Path, dst: Path, root: Path, copied: set[str]) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        rel = str(entry.relative_to(root))
        if entry.is_dir() and any(c.startswith(rel + os.sep) for c in copied):
            _copy_tree(entry, dst / entry.name, root, copied)
        elif rel in copied:
            shutil.copy2(entry, dst / entry.name)
        elif not entry.name.startswith("."):
            (dst / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())


def apply(patches: list[Patch]) -> list[str]:
    """Write the patches into the user's tree, each file's original kept beside it first (``BACKUP_SUFFIX``). A file
    that changed since the patch was made, or whose backup exists already, stops it before anything is written."""
    merged: dict[Path, tuple[str, str]] = {}
    for p in patches:
        for rel, (old, new) in p.files.items():
            path = p.root / rel
            if path in merged:  # a second patch of the same file: its edit applied on top of the first
                base_new = merged[path][1]
                e = edits.apply(edits.kind_of(p.variant), base_new, rel, workers=_workers(p.variant))
                merged[path] = (merged[path][0], e.source)
            else:
                merged[path] = (old, new)
    for path, (old, _) in merged.items():
        if path.read_text(encoding="utf-8") != old:
            raise UsageError(f"{path}: changed since the patch was made; run nsighttc fix again")
        if Path(str(path) + BACKUP_SUFFIX).exists():
            raise UsageError(f"{path}{BACKUP_SUFFIX}: a backup exists already; move it away first")
    written = []
    for path, (old, new) in merged.items():
        Path(str(path) + BACKUP_SUFFIX).write_text(old, encoding="utf-8")
        path.write_text(new, encoding="utf-8")
        written.append(str(path))
    return written
