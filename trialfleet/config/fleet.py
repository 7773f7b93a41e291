"""``trainingService.fleetFile``: machines declared once, in a fleet file that several experiments' configs name.

A fleet file (YAML or JSON) holds ``local`` (this machine's GPU settings: the keys of a ``platform: local``
block, such as ``gpuIndices``, ``maxTrialNumberPerGpu``, ``useActiveGpu``) and/or ``machines`` (a remote
``machineList``). A ``local`` block naming it takes its ``local`` keys, a ``remote`` block its ``machines``;
a key set both in the block and in the fleet file is an error, as is a missing section. The keys it brings are
then validated with the block, their problems named at ``trainingService.fleetFile.<section>...``; relative
``sshKeyFile`` and ``knownHosts`` are taken from the fleet file's directory. The stored config holds the merged
block, so a resumed experiment does not read the fleet file again (docs/shared-fleet.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from trialfleet.config.base import BuildSettings, KeyPath
from trialfleet.config.files import parse_yaml, read_text, yaml_error_message
from trialfleet.config.keys import fold
from trialfleet.config.units import show_value

SECTIONS = {"local": "local", "remote": "machines"}  # platform → the fleet file's section it takes
MACHINE_PATHS = ("sshKeyFile", "knownHosts")


def merge_fleet_file(
    member: dict[str, Any], prefix: KeyPath, settings: BuildSettings
) -> list[tuple[KeyPath, str]]:
    """Replace a local or remote block's ``fleetFile`` by what the fleet file declares; the problems found.
    Other platforms keep the key, which their model then refuses as unknown."""
    key = next((k for k in member if fold(str(k)) == "fleetfile"), None)
    section = SECTIONS.get(str(member.get("platform")))
    if key is None or section is None:
        return []
    where: KeyPath = (*prefix, key)
    value = member.pop(key)
    if not isinstance(value, str) or not value.strip():
        return [(where, f"expected the path of a fleet file, got {show_value(value)}")]
    path = (settings.base_dir / os.path.expanduser(value)).resolve()
    try:
        fleet = _read(path)
    except ValueError as exc:
        return [(where, str(exc))]
    unknown = sorted(str(k) for k in fleet if k not in SECTIONS.values())
    if unknown:
        return [((*where, unknown[0]), f"unknown key in the fleet file {path}; it holds local and machines")]
    if fleet.get(section) is None:
        return [
            (
                where,
                f"the fleet file {path} has no {section} section, which platform {member['platform']} takes",
            )
        ]
    if section == "local":
        return _merge_local(member, fleet["local"], prefix, where, settings)
    return _merge_machines(member, fleet["machines"], prefix, where, path.parent, settings)


def _read(path: Path) -> dict[str, Any]:
    text = read_text(path, "fleet file")
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else parse_yaml(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: {yaml_error_message(exc)}") from exc
    if not isinstance(data, dict):
        raise ValueError(
            f"the fleet file {path} must be a mapping with local and/or machines, got {show_value(data)}"
        )
    return data


def _merge_local(
    member: dict[str, Any], local: Any, prefix: KeyPath, where: KeyPath, settings: BuildSettings
) -> list[tuple[KeyPath, str]]:
    if not isinstance(local, dict):
        return [((*where, "local"), f"expected a mapping of local-platform keys, got {show_value(local)}")]
    problems: list[tuple[KeyPath, str]] = []
    for key, value in local.items():
        if key in member:
            problems.append(
                ((*prefix, str(key)), "set both here and in the fleet file (fleetFile); keep one")
            )
            continue
        member[key] = value
        settings.aliases[(*prefix, str(key))] = (*where, "local", str(key))
    return problems


def _merge_machines(
    member: dict[str, Any],
    machines: Any,
    prefix: KeyPath,
    where: KeyPath,
    base: Path,
    settings: BuildSettings,
) -> list[tuple[KeyPath, str]]:
    if "machineList" in member:
        return [((*prefix, "machineList"), "set both here and in the fleet file (fleetFile); keep one")]
    if isinstance(machines, list):
        machines = [_anchored(machine, base) for machine in machines]
    member["machineList"] = machines
    settings.aliases[(*prefix, "machineList")] = (*where, "machines")
    return []


def _anchored(machine: Any, base: Path) -> Any:
    """A machine's relative key files, taken from the fleet file's directory rather than the config's."""
    if not isinstance(machine, dict):
        return machine
    anchored = dict(machine)
    for key in MACHINE_PATHS:
        value = anchored.get(key)
        if isinstance(value, str) and value and not value.startswith("~") and not os.path.isabs(value):
            anchored[key] = str(base / value)
    return anchored
