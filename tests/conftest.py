"""The second tier's work units for pytest-xdist (``--dist loadgroup``, as ``scripts/test`` runs it).

A worker runs one unit at a time, in collection order. The tests that share something of the machine's with
each other are one unit (docs/testing.md has the audit): a platform's emulator and integration tests
(``Container`` mount points at the platform's container paths, created on this machine and removed when no
longer used), the Slurm tests (one session-wide cluster, and a trial submitted first that the last test looks
at), the remote and the hybrid tests (a session-wide fleet of sshd hosts each: the fleets of one process get
subnets apart, those of two processes may not), the Ray tests (one session-wide cluster). Any other test file
is a unit of its own, so that its module-scoped fixtures are made once. Tests marked ``alone`` (timings of the
whole machine) are left out of the parallel run and run after it, by themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
#: a directory under tests/ whose tests share a unit, and that unit's name
_SHARED = {
    "emulators/aml": "aml",
    "integration/aml": "aml",
    "emulators/dlts": "dlts",
    "integration/dlts": "dlts",
    "emulators/kubernetes": "kubernetes",
    "integration/kubernetes": "kubernetes",
    "emulators/openpai": "openpai",
    "integration/openpai": "openpai",
    "integration/slurm": "slurm",
    "integration/remote": "ssh",
    "integration/hybrid": "ssh",
    "integration/ray": "ray",
}
_TIER_TWO = ("emulators", "integration", "browser")


def work_unit(path: Path) -> str | None:
    """The xdist group of a second-tier test file (None for a file outside the second tier)."""
    try:
        relative = path.resolve().relative_to(_TESTS)
    except ValueError:
        return None
    if relative.parts[0] not in _TIER_TWO:
        return None
    directory = "/".join(relative.parts[:2])
    return _SHARED.get(directory, relative.as_posix())


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which names each test's group from its mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        unit = work_unit(Path(item.path))
        if unit is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(unit))
