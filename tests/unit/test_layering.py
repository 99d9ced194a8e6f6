"""The code's shape (docs/architecture.md, "Layers"): no back edges, no cycles, small files.

Imports are read with `ast`, anywhere in a file (a function-local import that dodges a cycle is
still a cycle), so these checks see what Python would load, not what a grep of the top sees.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Highest first: a package may import only from packages to its right.
LAYERS = ("api", "workers", "runtime", "retrieval", "pipelines", "core")
# Beyond the order: reading the graph needs the vocabulary (core/models), never the writers.
SEPARATE = {("retrieval", "pipelines")}
MAX_LINES = 400
MAX_CLI_LINES = 300


def source_files() -> list[Path]:
    return sorted(path for layer in LAYERS for path in (ROOT / layer).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports, each resolved to the longest known module name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    found.discard(module_name(path))
    return found


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    known = {module_name(path) for path in files}
    return {module_name(path): imported_modules(path, known) for path in files}


def test_no_layer_imports_from_a_layer_above_it() -> None:
    rank = {layer: index for index, layer in enumerate(LAYERS)}
    back_edges = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if rank[target.split(".")[0]] < rank[module.split(".")[0]]
        or (module.split(".")[0], target.split(".")[0]) in SEPARATE
    ]
    against = "imports against the layers (docs/architecture.md):\n"
    assert not back_edges, against + "\n".join(back_edges)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_import_cycles() -> None:
    graph = {
        module: {target for target in targets if not module.startswith(f"{target}.")}
        for module, targets in import_graph().items()
    }
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_source_file_is_over_the_size_limit() -> None:
    too_long = []
    for path in source_files():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        limit = MAX_CLI_LINES if path.relative_to(ROOT).parts[:2] == ("api", "cli") else MAX_LINES
        if lines > limit:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines (limit {limit})")
    assert not too_long, "split these by responsibility:\n" + "\n".join(too_long)
