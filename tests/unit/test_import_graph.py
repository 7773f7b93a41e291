"""The package's import graph has no cycle (docs/architecture.md: every arrow points down), counting every import
the source states: at the top of a module, inside a function (lazy) and under ``if TYPE_CHECKING`` alike.

The graph is computed from the source with ``ast``, not by importing: an import that runs late or never (typing
only) still ties two modules together for whoever reads or moves them.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trialfleet"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, path: Path, modules: set[str]) -> Iterator[str]:
    """The package's modules that ``path`` imports anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    yield target  # a submodule: `from pkg import module`
                elif base in modules:
                    yield base


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """The graph of the package's modules (computed once per run: the tests only read it)."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {module: set(imported(module, path, set(paths))) - {module} for module, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(group) > 1:
                        found.append(frozenset(group))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], index[target])
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert [sorted(group) for group in cycles(import_graph())] == []


def test_cycles_are_found_however_long() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"g"}, "g": {"f"}}
    assert sorted(map(sorted, cycles(graph))) == [["a", "b", "c"], ["f", "g"]]


def test_the_graph_sees_lazy_and_typing_only_imports() -> None:
    """The check is not vacuous: edges that exist only inside a function or under TYPE_CHECKING are found."""
    graph = import_graph()
    assert "trialfleet.server.app" in graph["trialfleet.server"]  # inside a function
    assert "trialfleet.config.experiment" in graph["trialfleet.training_services.base"]  # typing only
    assert "trialfleet.training_services.slurm.service" in graph["trialfleet.training_services.slurm"]


#: the doors (docs/architecture.md): what people and programs call; everything else sits below them
DOORS = ("trialfleet.cli", "trialfleet.server", "trialfleet.webui")
DOOR_MODULES = {"trialfleet", "trialfleet.experiment", "trialfleet.client", "trialfleet.startup"}
#: the manager process's entry point: it hands the manager its web server's loader (the composition root)
ENTRY_POINTS = {"trialfleet.manager.__main__"}


def is_door(module: str) -> bool:
    return module in DOOR_MODULES or any(module == door or module.startswith(f"{door}.") for door in DOORS)


def upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return {
        module: sorted(filter(is_door, targets))
        for module, targets in sorted(graph.items())
        if not is_door(module) and module not in ENTRY_POINTS and any(map(is_door, targets))
    }


def test_nothing_below_the_doors_imports_them_but_the_manager_entry_point() -> None:
    """The manager (``process.py``) is handed the server's loader by ``python -m trialfleet.manager``."""
    graph = import_graph()
    assert upward_imports(graph) == {}
    assert "trialfleet.server" in graph["trialfleet.manager.__main__"]


def test_an_upward_import_is_found() -> None:
    graph = {"trialfleet.manager.process": {"trialfleet.server.app"}, "trialfleet.server.app": set()}
    assert upward_imports(graph) == {"trialfleet.manager.process": ["trialfleet.server.app"]}
