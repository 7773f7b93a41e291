"""Tuners and assessors that installed packages offer by name, through entry points, as third-party platforms
are found (``trialfleet.training_services``). A package declares, in its ``pyproject.toml``::

    [project.entry-points."trialfleet.tuners"]
    MyTuner = "my_package.tuner:MyTuner"

    [project.entry-points."trialfleet.assessors"]
    MyAssessor = "my_package.assessor:MyAssessor"

and a config names it like a built-in (``tuner: {name: MyTuner}``). A built-in or a registered algorithm
(``algo register``) of the same name comes first.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

#: the entry-point group of each kind of algorithm
ENTRY_POINT_GROUPS = {"tuner": "trialfleet.tuners", "assessor": "trialfleet.assessors"}


def installed(kind: str) -> list[dict[str, Any]]:
    """The algorithms of ``kind`` installed packages declare, as registered ones are recorded (``builtinName``,
    ``className`` as ``module.Class``) with their ``source``: the distribution and its version."""
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUPS[kind]):
        module, _, attribute = ep.value.partition(":")
        source = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "entry point"
        found.append({"builtinName": ep.name, "className": f"{module}.{attribute}", "source": source})
    return found


def lookup(name: str, kind: str) -> dict[str, Any] | None:
    """The installed algorithm of that kind called ``name`` (case-insensitive, as NNI's names), or None."""
    return next((r for r in installed(kind) if r["builtinName"].lower() == name.lower()), None)
