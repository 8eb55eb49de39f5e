"""The package's shape, checked from its source (issue 32): no import circle anywhere, and the code that runs inside
the profiled program (``nsighttc/runtime/``) imports only the standard library, torch and nvtx."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nsighttc"
RUNTIME_MAY_IMPORT = {"torch", "nvtx"}  # plus the standard library, nsighttc.runtime itself and the record format
RECORD_FORMAT = "nsighttc.record_format"  # the names both sides share (imports the standard library alone)


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (annotations only: never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(n.lineno for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lines


def imports(path: Path, modules: set[str]) -> tuple[set[str], set[str]]:
    """(nsighttc modules this file imports, other top-level packages it imports), at module level or inside
    functions alike: a lazy import is still a dependency."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me, is_pkg = _module(path), path.name == "__init__.py"
    skip = _type_checking_only(tree)
    ours, other = set(), set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                pkg = me.split(".") if is_pkg else me.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for n in names:
            if n.startswith("nsighttc"):
                while n not in modules and "." in n:  # nsighttc.x.attr -> nsighttc.x
                    n = n.rsplit(".", 1)[0]
                if n != me:
                    ours.add(n)
            else:
                other.add(n.split(".")[0])
    return ours, other


def graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    return {m: imports(p, set(files))[0] for m, p in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circle():
    edges = graph()
    assert len(edges) > 50  # the walk found the package
    assert cycles(edges) == []


def test_the_cycle_finder_sees_a_circle_through_a_lazy_import():
    """The check itself: the circle issue 32 removed (analysis.ranks calling api.analyze lazily, api importing
    analysis.ranks) is found, and so is one through a package's __init__."""
    assert cycles({"api": {"analysis.ranks"}, "analysis.ranks": {"api"}, "x": set()}) == [["analysis.ranks", "api"]]
    assert cycles({"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}}) == [["p", "p.a", "p.b"]]


def _imports_in(tmp_path, monkeypatch, rel: str, source: str, files: set[str]):
    """``imports`` of a module written at ``tmp_path/nsighttc/rel``, read as if that tree were the package."""
    mod = tmp_path / "nsighttc" / rel
    mod.parent.mkdir(parents=True)
    mod.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "nsighttc")
    return imports(mod, files)


def test_a_lazy_import_counts_and_a_type_checking_one_does_not(tmp_path, monkeypatch):
    ours, other = _imports_in(tmp_path, monkeypatch, "m.py",
                              "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n"
                              "def f():\n    from .b import Y\n    import pandas\n",
                              {"nsighttc.a", "nsighttc.b", "nsighttc.m"})
    assert ours == {"nsighttc.b"} and other == {"typing", "pandas"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "runtime").glob("*.py")), ids=lambda p: p.name)
def test_runtime_modules_import_only_the_standard_library_torch_and_nvtx(path):
    files = {_module(p) for p in PACKAGE.rglob("*.py")}
    ours, other = imports(path, files)
    assert all(m.startswith("nsighttc.runtime") or m == RECORD_FORMAT for m in ours), ours
    foreign = {m for m in other if m not in sys.stdlib_module_names and m not in RUNTIME_MAY_IMPORT and m != "__future__"}
    assert not foreign, f"{path.name} imports {sorted(foreign)}: runtime code may import only the standard library, torch, nvtx"


def test_the_record_format_imports_the_standard_library_alone():
    path = PACKAGE / "record_format.py"
    ours, other = imports(path, {_module(p) for p in PACKAGE.rglob("*.py")})
    assert not ours and all(m in sys.stdlib_module_names or m == "__future__" for m in other), (ours, other)


@pytest.mark.parametrize("layer", ["parse", "analysis"])
def test_readers_and_rules_import_neither_the_tools_nor_the_programs_side(layer):
    """Issue 54: ``parse/`` reads files and launches nothing (a binary report's export is ``collect.readable``'s), and
    neither it nor ``analysis/`` imports the code that runs inside the program: what both sides share is the record
    format (``nsighttc.record_format``)."""
    files = {_module(p) for p in PACKAGE.rglob("*.py")}
    arrows = {(_module(p), m) for p in (PACKAGE / layer).rglob("*.py") for m in imports(p, files)[0]
              if m.startswith(("nsighttc.collect", "nsighttc.runtime", "nsighttc.profile"))}
    assert not arrows, sorted(arrows)


def test_the_layer_check_sees_an_arrow(tmp_path, monkeypatch):
    ours, _ = _imports_in(tmp_path, monkeypatch, "parse/x.py",
                          "def f():\n    from ..collect import tools\n    from ..runtime.steps import STEP\n",
                          {"nsighttc.parse.x", "nsighttc.collect.tools", "nsighttc.runtime.steps"})
    assert ours == {"nsighttc.collect.tools", "nsighttc.runtime.steps"}


PUBLIC_ALIASES = {"nsighttc.annotate"}  # ``from nsighttc import annotate``: the public range API (runtime.annotate)


def alias_problem(path: Path) -> str | None:
    """Why a module is only an alias of another (issue 47: ``nsighttc/launch.py``, ``rankexec.py`` and ``replay.py``
    were kept for callers that did not exist): it replaces itself in ``sys.modules``, or it holds nothing but
    imports (a re-export), outside a package's ``__init__``/``__main__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules"
                                                for t in node.targets):
            return "replaces itself in sys.modules"
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            and not (isinstance(n, ast.Assign) and ast.unparse(n).startswith("__all__"))]
    if path.name not in ("__init__.py", "__main__.py") and body and all(
            isinstance(n, (ast.Import, ast.ImportFrom)) for n in body):
        return "holds nothing but imports (a re-export)"
    return None


def test_no_module_is_only_an_alias_of_another_but_the_public_annotate():
    found = {_module(p): alias_problem(p) for p in PACKAGE.rglob("*.py")}
    aliases = {m: why for m, why in found.items() if why}
    assert set(aliases) == PUBLIC_ALIASES, f"alias modules: {aliases}"
    import nsighttc.runtime.annotate
    from nsighttc import annotate
    assert annotate is nsighttc.runtime.annotate


def test_the_alias_check_finds_both_kinds(tmp_path):
    (tmp_path / "swap.py").write_text("import sys\nfrom .x import y as _impl\nsys.modules[__name__] = _impl\n")
    (tmp_path / "reexport.py").write_text('"""doc"""\nfrom .runtime.launch import *  # noqa\n')
    (tmp_path / "real.py").write_text("from .x import y\n\n\ndef f():\n    return y\n")
    assert alias_problem(tmp_path / "swap.py") == "replaces itself in sys.modules"
    assert alias_problem(tmp_path / "reexport.py") == "holds nothing but imports (a re-export)"
    assert alias_problem(tmp_path / "real.py") is None


def test_the_old_alias_modules_are_gone():
    for old in ("nsighttc.launch", "nsighttc.replay", "nsighttc.rankexec"):
        r = subprocess.run([sys.executable, "-c", f"import {old}"], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, old


def test_benchmarks_keeps_at_most_20_files_at_its_top():
    """The harness and the GPU scripts apart (benchmarks/gpu/, benchmarks/probes/)."""
    top = [p for p in (PACKAGE.parent / "benchmarks").iterdir() if p.is_file()]
    assert len(top) <= 20, sorted(p.name for p in top)
    assert not [p.name for p in top if p.name.startswith("gpu_")]


def uncited_probes(root: Path) -> list[str]:
    """The one-off measurements in benchmarks/probes/ that nothing cites: a probe stays while a report, a doc, the
    package (a fact measured by it), a test, another probe, or the benchmarks README's prose outside its index of
    probes names it."""
    probes = root / "benchmarks" / "probes"
    texts = [p.read_text(encoding="utf-8", errors="replace") for d in ("reports", "docs", "nsighttc", "tests")
             if (root / d).is_dir() for p in (root / d).rglob("*")
             if p.is_file() and p.suffix in (".md", ".txt", ".py", ".json", ".sh")]
    readme = root / "benchmarks" / "README.md"
    if readme.exists():  # (its table of probes is an index of them, not a citation)
        texts.append("\n".join(ln for ln in readme.read_text(encoding="utf-8").splitlines()
                               if not ln.lstrip().startswith("|")))
    names = sorted(p.name for p in probes.iterdir() if p.is_file())
    others = {n: (probes / n).read_text(encoding="utf-8", errors="replace") for n in names}
    return [n for n in names if not any(n in t for t in texts) and
            not any(n in src for m, src in others.items() if m != n)]


def test_every_probe_is_cited_by_a_report_a_doc_or_the_code():
    assert uncited_probes(PACKAGE.parent) == []


def test_the_probe_check_finds_an_uncited_one(tmp_path):
    (tmp_path / "benchmarks" / "probes").mkdir(parents=True)
    (tmp_path / "reports").mkdir()
    for name in ("cited.py", "lonely.py", "helper.py"):
        (tmp_path / "benchmarks" / "probes" / name).write_text("x = 1\n" if name != "cited.py" else "import helper.py\n")
    (tmp_path / "reports" / "README.md").write_text("measured with cited.py\n")
    (tmp_path / "benchmarks" / "README.md").write_text("| `lonely.py` | an index row |\n")
    assert uncited_probes(tmp_path) == ["lonely.py"]


INTERNAL_ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d+")
ROOT = PACKAGE.parent


def internal_issue_numbers(paths) -> list[str]:
    """'file:line: text' where a line cites this project's own tracker by number ('issue 51'): a contributor or user
    reading the code, the JSON schema or the docs has no such tracker, so what and why are said in words. (Other
    projects' issues are cited by their address, e.g. pytorch/pytorch#175790.)"""
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}" for p in paths
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if INTERNAL_ISSUE.search(line)]


def test_the_package_its_schema_and_the_docs_cite_no_internal_issue_numbers():
    paths = [*PACKAGE.rglob("*.py"), *(PACKAGE / "schema").glob("*.json"), *(ROOT / "docs").glob("*.md"),
             ROOT / "README.md"]
    assert len(paths) > 100
    assert internal_issue_numbers(paths) == []


def test_the_issue_number_check_finds_one_and_passes_an_external_reference(tmp_path):
    (tmp_path / "a.py").write_text('"""what (issue 51: x)"""\n# pytorch/pytorch#175790: a later session\n# Issues 44\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = internal_issue_numbers([tmp_path / "a.py"])
    finally:
        ROOT = saved
    assert [f.split(":")[1] for f in found] == ["1", "3"]
