"""Pydantic validation errors → ``ConfigProblem``s: the user's key path and what was expected, in plain words."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from trialfleet.config.base import FieldProblem, KeyPath
from trialfleet.config.keys import NormalisedInput
from trialfleet.config.units import show_value
from trialfleet.errors import ConfigProblem, format_key_path

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "string_unicode": "a string",
    "dict_type": "a mapping (key: value pairs)",
    "model_type": "a mapping (key: value pairs)",
    "model_attributes_type": "a mapping (key: value pairs)",
    "list_type": "a list",
    "path_type": "a path",
}

MISSING = "required field is missing"

# what pydantic puts into an error's location for a validator function (``function-wrap[...]``)
_VALIDATOR_STEP = re.compile(r"^(?:\w+\[)?function-(?:wrap|before|after|plain)\[")

_SECRET_WORDS = ("password", "passwd", "passphrase", "token", "secret", "accountkey")


def _shown(value: Any, path: KeyPath) -> str:
    last = path[-1] if path else ""
    if isinstance(last, str) and any(word in last.lower() for word in _SECRET_WORDS):
        return "a value that is not shown (it is a secret)"
    return show_value(value)


def describe(error: ErrorDetails, path: KeyPath) -> str:
    """What was expected at ``path``, in plain words."""
    kind, ctx, got = error["type"], error.get("ctx", {}), _shown(error.get("input"), path)
    if kind in ("missing", "union_tag_not_found"):
        return MISSING
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {got}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        words = {"greater_than": "greater than", "greater_than_equal": "at least"}
        words |= {"less_than": "less than", "less_than_equal": "at most"}
        limit = next(iter(ctx.values()), "?")
        return f"expected a number {words[kind]} {limit}, got {got}"
    if kind == "too_short":
        return f"expected at least {ctx.get('min_length')} item(s), got {ctx.get('actual_length')}"
    if kind == "union_tag_invalid":
        return f"unknown value {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {got}"


def concrete_path(loc: Sequence[str | int], data: Any, tags: set[str]) -> KeyPath:
    """Pydantic's ``loc`` without the union tags it inserts (``'remote'`` in ``trainingService.remote.port``)."""
    out: list[str | int] = []
    node = data
    for part in loc:
        in_mapping = isinstance(node, Mapping) and part in node
        if in_mapping or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            out.append(part)
            node = node[part]
        elif isinstance(part, str) and (part in tags or _VALIDATOR_STEP.match(part)):
            continue
        else:
            out.append(part)
            node = None
    return tuple(out)


def aliased(path: KeyPath, table: Mapping[KeyPath, KeyPath]) -> KeyPath:
    """``path`` with its longest prefix found in ``table`` replaced."""
    for cut in range(len(path), 0, -1):
        if path[:cut] in table:
            return (*table[path[:cut]], *path[cut:])
    return path


def _discriminator_key(error: ErrorDetails) -> tuple[str, ...]:
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return (str(error.get("ctx", {}).get("discriminator", "")).strip("'"),)
    return ()


def translate(
    exc: ValidationError, norm: NormalisedInput, aliases: Mapping[KeyPath, KeyPath], tags: set[str]
) -> list[ConfigProblem]:
    """Every error of one validation, at the user's key paths. A "did you mean" key is not also "missing"."""
    problems = []
    for error in exc.errors(include_url=False):
        path = concrete_path((*error["loc"], *_discriminator_key(error)), norm.data, tags)
        failure = error.get("ctx", {}).get("error")
        if isinstance(failure, FieldProblem):
            items = [((*path, *sub), message) for sub, message in failure.items]
        else:
            items = [(path, describe(error, path))]
        for item_path, message in items:
            canonical = aliased(item_path, aliases)
            if canonical in norm.suggested and message.startswith(MISSING):
                continue  # the user did write it, misspelled: the "did you mean" says so
            problems.append(ConfigProblem(format_key_path(aliased(canonical, norm.spellings)), message))
    return problems


def user_problems(
    items: Sequence[tuple[KeyPath, str]], norm: NormalisedInput, aliases: Mapping[KeyPath, KeyPath]
) -> list[ConfigProblem]:
    """Problems found on the canonical (already normalised) input, at the user's key paths."""
    return [
        ConfigProblem(format_key_path(aliased(aliased(path, aliases), norm.spellings)), message)
        for path, message in items
    ]
