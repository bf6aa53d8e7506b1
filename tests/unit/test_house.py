"""The house (ARCHITECTURE.md): layers that import only downwards, modules that say which paper
section they implement, short functions where the logic lives."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "loomdb"

# Higher imports lower, never the reverse.  Same rank: siblings that may use each other.
RANKS = {
    "cli": 6,
    "bench": 6,
    "fuzz": 6,
    "dbt": 6,  # the dbt-duckdb plugin: registers loomdb on dbt's connection
    "engines": 5,
    "loaders": 5,
    "functions": 4,
    "frontend": 4,  # pure rewrites; loomdb's connection runs them
    "store": 3,
    "udfs": 3,  # the catalogue: a declaration the engines read
    "learn": 2,
    "accel": 2,
    "distributed": 3,  # the driver of a train on Dask: reads layouts (store), runs learn's loop
    "imaging": 2,  # JPEG scans to pixels and quality: what the pcr format and loaders read
    "seams": 1,
    "codecs": 1,
    "csr": 1,  # the sparse minibatch: a plain data structure
    "named_rows": 1,  # rows with column names (loom_predict_row): a plain data structure
    "errors": 1,
    "options": 1,
    "datasets": 1,
    "kernel_cache": 0,  # numba's cache stamp: imported by every module that defines kernels
}
FACADE = {"loomdb"}  # loomdb.connect/register import engines lazily: the one arrow back up
PAPER = re.compile(
    r"paper|§|MLWeaving|TOC|Algorithm|Bismarck|DoppioDB|SIGMOD|PVLDB|SketchML|SlimML|PCR", re.I
)


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((name, path))
    return out


def layer(module: str) -> int | None:
    parts = module.split(".")
    return RANKS.get(parts[1]) if len(parts) > 1 else None


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("loomdb")}


@pytest.mark.parametrize(("name", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_point_down_only(name, path):
    if name in FACADE:
        return
    mine = layer(name)
    assert mine is not None, f"{name}: give its folder a rank in RANKS"
    for target in imported(path):
        theirs = layer(target)
        if theirs is None:
            continue  # loomdb itself (the version, the error classes re-exported)
        assert theirs <= mine, f"{name} (rank {mine}) imports {target} (rank {theirs})"


@pytest.mark.parametrize(("name", "path"), modules(), ids=[m for m, _ in modules()])
def test_every_module_names_its_paper_section(name, path):
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert doc, f"{name} has no docstring"
    assert PAPER.search(doc) or "No paper section" in doc, f"{name}: which paper section?"


def test_functions_where_the_logic_lives_are_short():
    long = []
    for name, path in modules():
        if layer(name) not in (RANKS["functions"], RANKS["store"], RANKS["learn"]):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > 60:
                    long.append(f"{name}.{node.name}: {size} lines")
    assert not long, long
