"""Reading config and search-space files: YAML with line numbers in errors, no silent duplicate keys, and no
alias explosions.

Every YAML the project reads (config files, search spaces, algorithm meta files) goes through
:func:`parse_yaml`. Anchors and aliases let a few hundred bytes describe a tree of billions of values
("billion laughs"); PyYAML builds it as shared objects in no time, but everything that walks the result
afterwards (validation, JSON, the database) pays for every value. So the composer counts what each node
expands to and refuses a document past :data:`MAX_YAML_NODES` values or :data:`MAX_YAML_ALIASES` aliases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from trialfleet.config.units import show_value

#: values (scalars, lists, mappings) a document may hold once its aliases are expanded
MAX_YAML_NODES = 1_000_000
#: aliases (``*name``) a document may use; real configs use a handful
MAX_YAML_ALIASES = 500


class YamlLimitError(yaml.YAMLError):
    """A document refused for its size once expanded, or for an alias that contains itself."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key repeated in one mapping is an error instead of last-wins, and
    that a document expanding to more than :data:`MAX_YAML_NODES` values is refused while it is composed."""

    def compose_document(self) -> yaml.Node | None:
        self._expanded: dict[yaml.Node, int] = {}  # node → values it stands for, aliases expanded
        self._aliases = 0
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        alias = self.check_event(yaml.AliasEvent)
        mark = self.peek_event().start_mark
        node = super().compose_node(parent, index)
        assert node is not None  # None only at the end of the stream, never for a node
        if alias:
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise YamlLimitError(f"more than {MAX_YAML_ALIASES:,} aliases (*name) in one document", mark)
            if node not in self._expanded:
                raise YamlLimitError(
                    "an alias (*name) inside the node its anchor names: a recursive structure", mark
                )
            return node
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        size = 1 + sum(self._expanded[child] for child in children)
        if size > MAX_YAML_NODES:
            raise YamlLimitError(
                f"the document holds more than {MAX_YAML_NODES:,} values once its aliases (*name) are "
                "expanded (an alias bomb?)",
                mark,
            )
        self._expanded[node] = size
        return node

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
    what = "YAML refused" if isinstance(error, YamlLimitError) else "malformed YAML"
    if mark is None:
        return f"{what}: {problem}"
    return f"{what} at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def parse_yaml(text: str) -> Any:
    """Parse YAML text; raises ``yaml.YAMLError`` (use :func:`yaml_error_message` to show it)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except RecursionError as exc:
        raise YamlLimitError("the document is nested too deeply to read", None) from exc


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


#: a search space is stored, sent to the tuner and served by ``/experiment``: at most this many bytes of JSON
MAX_SEARCH_SPACE_BYTES = 1024 * 1024


def search_space_size_problem(space: Any) -> str | None:
    """Why ``space`` is too large to keep (its compact JSON past :data:`MAX_SEARCH_SPACE_BYTES`), or None."""
    size = len(json.dumps(space, separators=(",", ":"), default=str).encode())
    if size <= MAX_SEARCH_SPACE_BYTES:
        return None
    return f"the search space is {size:,} bytes of JSON, larger than the limit of {MAX_SEARCH_SPACE_BYTES:,} bytes"


def read_search_space(path: Path) -> dict[str, Any]:
    """A search space file, JSON first then YAML (as NNI), which must hold a mapping of bounded size."""
    if path.is_file() and path.stat().st_size > 4 * MAX_SEARCH_SPACE_BYTES:  # not even read: far past the limit
        raise ValueError(
            f"search space file {path} is {path.stat().st_size:,} bytes, "
            f"larger than the limit of {MAX_SEARCH_SPACE_BYTES:,} bytes"
        )
    text = read_text(path, "search space file")
    try:
        space = json.loads(text)
    except ValueError:
        try:
            space = parse_yaml(text)
        except YamlLimitError as exc:
            raise ValueError(f"search space file {path}: {yaml_error_message(exc)}") from exc
        except yaml.YAMLError as exc:
            raise ValueError(
                f"search space file {path} is neither JSON nor YAML: {yaml_error_message(exc)}"
            ) from exc
    if not isinstance(space, dict):
        raise ValueError(
            f"search space file {path} must hold a mapping of parameter names to specs, got {show_value(space)}"
        )
    problem = search_space_size_problem(space)
    if problem is not None:
        raise ValueError(f"search space file {path}: {problem}")
    return space
