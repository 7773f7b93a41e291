"""Custom algorithms registered by name (``algo register --meta_path``), kept in a small YAML file.

The file is ``$TRIALFLEET_CONFIG_DIR/registered_algorithms.yml`` (default ``~/.config/trialfleet``) and has
NNI's layout: ``{tuners: [...], assessors: [...]}``, each entry ``builtinName``, ``className``, optionally
``classArgsValidator`` (kept, not run: the v2 config never ran it either) and ``codeDirectory`` (trialfleet's
addition: where the module lives when it is not an installed package).
A meta file holds one entry with ``algoType`` (``tuner``/``assessor``) or a list under ``algorithms:``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning import plugins
from trialfleet.tuning.catalog import BUILTIN_ASSESSORS, BUILTIN_TUNERS, is_builtin_name
from trialfleet.tuning.loader import load_class

_SECTIONS = {"tuner": "tuners", "assessor": "assessors"}


@dataclass(frozen=True)
class AlgorithmInfo:
    """One row of ``algo list``: NNI's columns Name | Type | source | Class Name | Module Name."""

    name: str
    kind: str
    source: str  # "builtin" | "user" | the installed package offering it (entry point)
    class_name: str
    module: str


def registry_path() -> Path:
    base = os.environ.get("TRIALFLEET_CONFIG_DIR") or Path.home() / ".config" / "trialfleet"
    return Path(base) / "registered_algorithms.yml"


def register(meta_path: str | os.PathLike[str]) -> list[str]:
    """Register every algorithm a meta file describes (each is import-checked); returns their names."""
    import yaml  # here, not at the top: trial processes reach this package through nni.utils

    from trialfleet.config.files import parse_yaml, yaml_error_message

    meta_file = Path(meta_path)
    try:
        meta = parse_yaml(meta_file.read_text())
    except OSError as exc:
        raise AlgorithmError(f"cannot read algorithm meta file {meta_file}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise AlgorithmError(
            f"cannot read algorithm meta file {meta_file}: {yaml_error_message(exc)}"
        ) from exc
    entries = meta.get("algorithms") if isinstance(meta, dict) and "algorithms" in meta else [meta]
    if not isinstance(entries, list):
        raise AlgorithmError(f"{meta_file}: 'algorithms' must be a list")
    data = _read()
    names = []
    for entry in entries:
        kind, record = _validated(entry, meta_file, data)
        data[_SECTIONS[kind]].append(record)
        names.append(record["builtinName"])
    _write(data)
    return names


def unregister(name: str) -> None:
    if is_builtin_name(name):
        raise AlgorithmError(f"'{name}' is a built-in algorithm and cannot be unregistered")
    data = _read()
    for section in _SECTIONS.values():
        kept = [r for r in data[section] if r["builtinName"].lower() != name.lower()]
        if len(kept) != len(data[section]):
            data[section] = kept
            _write(data)
            return
    raise AlgorithmError(f"no registered algorithm named '{name}' (see `algo list`)")


def lookup(name: str, kind: str) -> dict[str, Any] | None:
    """The registered entry of that kind called ``name`` (case-insensitive), or None."""
    return next((r for r in _read()[_SECTIONS[kind]] if r["builtinName"].lower() == name.lower()), None)


def list_algorithms() -> list[AlgorithmInfo]:
    rows = []
    for entry in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS):
        module, _, cls = entry.target.partition(":")
        rows.append(AlgorithmInfo(entry.name, entry.kind, "builtin", cls, module))
    data = _read()
    for kind, section in _SECTIONS.items():
        for record in data[section]:
            module, _, cls = record["className"].rpartition(".")
            rows.append(AlgorithmInfo(record["builtinName"], kind, "user", cls, module))
        for record in plugins.installed(kind):
            module, _, cls = record["className"].rpartition(".")
            rows.append(AlgorithmInfo(record["builtinName"], kind, record["source"], cls, module))
    return rows


def show(name: str) -> dict[str, Any]:
    """Everything known about one algorithm, built-in or registered."""
    for entry in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS):
        if entry.matches(name):
            return {
                "builtinName": entry.name,
                "algoType": entry.kind,
                "source": "builtin",
                "aliases": list(entry.aliases),
                "className": entry.target.replace(":", "."),
                "library": entry.library,
                "classArgs": entry.default_args,
                "searchSpaceTypes": sorted(entry.space_types),
            }
    for kind in _SECTIONS:
        record = lookup(name, kind)
        if record is not None:
            return {**record, "algoType": kind, "source": "user"}
        record = plugins.lookup(name, kind)
        if record is not None:
            return {**record, "algoType": kind}
    raise AlgorithmError(f"no algorithm named '{name}' (see `algo list`)")


def _validated(
    entry: Any, meta_file: Path, data: dict[str, list[dict[str, Any]]]
) -> tuple[str, dict[str, Any]]:
    if not isinstance(entry, dict):
        raise AlgorithmError(f"{meta_file}: each algorithm must be a mapping, got {entry!r}")
    kind, name, class_name = entry.get("algoType"), entry.get("builtinName"), entry.get("className")
    if kind not in _SECTIONS:
        raise AlgorithmError(f"{meta_file}: algoType must be 'tuner' or 'assessor', got {kind!r}")
    if not isinstance(name, str) or not name:
        raise AlgorithmError(f"{meta_file}: builtinName is required")
    if not isinstance(class_name, str) or "." not in class_name:
        raise AlgorithmError(f"{meta_file}: className must look like 'module.Class', got {class_name!r}")
    if is_builtin_name(name):
        raise AlgorithmError(f"{meta_file}: '{name}' is a built-in algorithm and cannot be overwritten")
    if any(r["builtinName"].lower() == name.lower() for section in data.values() for r in section):
        raise AlgorithmError(f"{meta_file}: an algorithm named '{name}' is already registered")
    record: dict[str, Any] = {"builtinName": name, "className": class_name}
    if entry.get("classArgsValidator"):
        record["classArgsValidator"] = entry["classArgsValidator"]
    if entry.get("codeDirectory"):
        record["codeDirectory"] = str((meta_file.parent / entry["codeDirectory"]).resolve())
    load_class(class_name, record.get("codeDirectory"), kind)  # refuse what would fail at experiment start
    return kind, record


def _read() -> dict[str, list[dict[str, Any]]]:
    import yaml

    from trialfleet.config.files import parse_yaml, yaml_error_message

    path = registry_path()
    try:
        data = parse_yaml(path.read_text()) or {}
    except FileNotFoundError:
        data = {}
    except OSError as exc:
        raise AlgorithmError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise AlgorithmError(f"cannot read {path}: {yaml_error_message(exc)}") from exc
    return {section: list(data.get(section) or []) for section in _SECTIONS.values()}


def _write(data: dict[str, list[dict[str, Any]]]) -> None:
    import yaml

    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # a crash mid-write must not lose every registration: write a sibling file, then rename over
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    os.replace(handle.name, path)
