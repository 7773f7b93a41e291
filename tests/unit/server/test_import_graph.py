"""The server's modules import each other without a cycle, counting imports made inside functions and those
made for type checking only (docs/architecture.md: nothing imports upwards)."""

from __future__ import annotations

import ast
from pathlib import Path

import trialfleet.server

PACKAGE = "trialfleet.server"


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def server_graph() -> dict[str, set[str]]:
    folder = Path(trialfleet.server.__file__).parent
    modules = {f"{PACKAGE}.{p.stem}": p for p in folder.glob("*.py") if p.stem != "__init__"}
    return {name: imports_of(path) & set(modules) for name, path in modules.items()}


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph[module]):
            found = visit(imported, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_the_server_modules_import_each_other_without_a_cycle() -> None:
    graph = server_graph()
    assert f"{PACKAGE}.cache" in graph[f"{PACKAGE}.context"]  # the graph sees typing-only imports
    assert cycle_in(graph) is None


def test_a_cycle_is_found() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
