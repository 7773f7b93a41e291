"""Test modules are imported by their base name (no packages under tests/integration or tests/unit), so two
files of one name in different directories stop the whole suite at collection; a run of one directory never
shows it. This keeps the names unique."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_module_name_is_unique() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for path in [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("examples/plugin/tests/**/test_*.py")]:
        found[path.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}
