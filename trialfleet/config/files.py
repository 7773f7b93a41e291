"""Reading config and search-space files: YAML with line numbers in errors and no silent duplicate keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from trialfleet.config.units import show_value


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key repeated in one mapping is an error instead of last-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # keys merged in from an anchor may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # unhashable keys are refused by the base class
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_error_message(error: yaml.YAMLError) -> str:
    """``malformed YAML at line 3, column 5: <what the parser says>`` (1-based, as editors count)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return f"malformed YAML: {problem}"
    return f"malformed YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def parse_yaml(text: str) -> Any:
    """Parse YAML text; raises ``yaml.YAMLError`` (use :func:`yaml_error_message` to show it)."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass


def read_text(path: Path, what: str) -> str:
    """The file's text, or ``ValueError`` saying in plain words why it cannot be read."""
    try:
        if not path.exists():
            raise ValueError(f"{what} {path} does not exist")
        if not path.is_file():
            raise ValueError(f"{what} {path} is not a regular file")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def read_search_space(path: Path) -> dict[str, Any]:
    """A search space file, JSON first then YAML (as NNI), which must hold a mapping."""
    text = read_text(path, "search space file")
    try:
        space = json.loads(text)
    except ValueError:
        try:
            space = parse_yaml(text)
        except yaml.YAMLError as exc:
            raise ValueError(
                f"search space file {path} is neither JSON nor YAML: {yaml_error_message(exc)}"
            ) from exc
    if not isinstance(space, dict):
        raise ValueError(
            f"search space file {path} must hold a mapping of parameter names to specs, got {show_value(space)}"
        )
    return space
