"""``load_config(path)``: a YAML/JSON experiment config file, v2 or legacy v1, to a validated config."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trialfleet.config.base import BuildSettings
from trialfleet.config.convert_v1 import V1Conversion, convert_v1, convert_v1_to_v2, is_v1_config
from trialfleet.config.experiment import ExperimentConfig, build_experiment_config
from trialfleet.config.files import parse_yaml, read_text, yaml_error_message
from trialfleet.config.units import show_value
from trialfleet.errors import ConfigError


@dataclass(frozen=True)
class LoadedConfig:
    config: ExperimentConfig
    path: Path
    converted_from_v1: bool = False
    converted_yaml: str | None = (
        None  # the v2 form of a legacy v1 file (secrets masked), shown as nnictl does
    )
    warnings: list[str] = field(default_factory=list)


def load_config(
    path: str | Path, *, on_converted: Callable[[V1Conversion], None] | None = None
) -> LoadedConfig:
    """Read, convert (v1) and validate one config file. Relative paths inside are taken from its directory.

    ``on_converted`` receives the conversion of a v1 file before it is validated, so a CLI can show its v2 form
    even when validation then fails (the key paths of such errors are those of the converted config).
    Every failure is a :class:`~trialfleet.errors.ConfigError` naming the file.
    """
    file = Path(os.path.expanduser(path)).resolve()
    try:
        text = read_text(file, "config file")
    except ValueError as exc:
        raise ConfigError(str(exc), file=file) from exc
    data = _parse(text, file)
    if data is None:
        raise ConfigError("the config file is empty", file=file)
    if not isinstance(data, dict):
        raise ConfigError(
            f"the config must be a mapping of keys to values, got {show_value(data)}", file=file
        )
    conversion = None
    if is_v1_config(data):
        conversion = convert_v1(data, source=file)
        data = conversion.v2
        if on_converted is not None:
            on_converted(conversion)
    settings = BuildSettings(base_dir=file.parent)
    config = build_experiment_config(data, settings, source=file)
    if conversion is None:
        return LoadedConfig(config, file, warnings=settings.warnings)
    # a key the conversion wrote (NNI's per-role codeDirectory) is not the user's to be warned about
    own = [w for w in settings.warnings if w.split(":", 1)[0] not in conversion.added]
    return LoadedConfig(config, file, True, conversion.shown(), conversion.warnings + own)


@dataclass(frozen=True)
class Declared:
    """What a config file names, read without validating the rest: a hint for work worth starting before the
    config is checked (:func:`declared`)."""

    platforms: list[str] = field(default_factory=list)  # each ``trainingService`` block's platform
    algorithms: list[tuple[str, str]] = field(default_factory=list)  # (tuner|assessor|advisor, built-in name)


def declared(path: str | Path) -> Declared:
    """The platforms and the algorithms (by ``name``) a config file names, v2 or legacy v1. Nothing if the file
    cannot be read or parsed: :func:`load_config` says what is wrong."""
    file = Path(os.path.expanduser(path)).resolve()
    try:
        data = _parse(read_text(file, "config file"), file)
        if isinstance(data, dict) and is_v1_config(data):
            data, _ = convert_v1_to_v2(data, source=file)
    except (ConfigError, ValueError):
        return Declared()
    if not isinstance(data, dict):
        return Declared()
    services = data.get("trainingService")
    blocks = services if isinstance(services, list) else [services]
    platforms = [
        block["platform"]
        for block in blocks
        if isinstance(block, dict) and isinstance(block.get("platform"), str)
    ]
    algorithms = [
        (kind, block["name"])
        for kind in ("tuner", "assessor", "advisor")
        if isinstance(block := data.get(kind), dict) and isinstance(block.get("name"), str)
    ]
    return Declared(platforms, algorithms)


def _parse(text: str, file: Path) -> Any:
    """JSON for ``.json`` files (YAML would refuse their tab indentation), YAML otherwise, as NNI."""
    try:
        if file.suffix.lower() == ".json":
            return json.loads(text)
        return parse_yaml(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", file=file
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error_message(exc), file=file) from exc
    except RecursionError as exc:
        raise ConfigError("the config is nested too deeply to read", file=file) from exc
