"""The part of ajv 6 (``allErrors: true``) that OpenPAI's protocol schema uses, with ajv's own error objects.

The rest server answers an invalid protocol with 400 ``InvalidProtocolError`` whose message is ajv's error list
as JSON, so a faithful emulator must produce the same list: the same keywords, ``dataPath`` (``.a['b'][0]``),
``schemaPath`` (``#/properties/...``, ``base.json#/...`` through a ``$ref``), ``params``, messages and order.
The order follows ajv 6's generated code: a type check up front unless the type's keyword group is used; then the
number, string, array and object groups (each guarded by the data's type, the group's own type error in its
``else``); ``additionalProperties`` before ``properties`` before ``patternProperties``; ``required`` errors of
properties that have a schema reported where that property is checked; last ``$ref``/``enum``/``oneOf``.
``$merge`` is ajv-merge-patch's macro keyword (JSON merge patch of ``source`` and ``with``).
"""

from __future__ import annotations

import copy
import math
import re
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from .jscompat import UNDEFINED, number

Error = dict[str, Any]

_GROUPS = (
    ("number", ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf")),
    ("string", ("maxLength", "minLength", "pattern")),
    ("array", ("maxItems", "minItems", "items")),
    (
        "object",
        (
            "maxProperties",
            "minProperties",
            "required",
            "properties",
            "additionalProperties",
            "patternProperties",
        ),
    ),
)
_IDENTIFIER = re.compile(r"^[a-z$_][a-z$_0-9]*$", re.IGNORECASE)


def _is_number(data: Any) -> bool:
    return isinstance(data, int | float) and not isinstance(data, bool)


def data_type_matches(name: str, data: Any) -> bool:
    if name == "number":
        return _is_number(data)
    if name == "integer":  # ajv: typeof x == "number" && !(x % 1) && x === x; Infinity passes
        return _is_number(data) and not (
            isinstance(data, float) and (math.isnan(data) or (math.isfinite(data) and not data.is_integer()))
        )
    if name == "string":
        return isinstance(data, str)
    if name == "array":
        return isinstance(data, list)
    if name == "object":
        return (
            data is not None
            and data is not UNDEFINED
            and not isinstance(data, str | list | bool | int | float)
        )
    if name == "boolean":
        return isinstance(data, bool)
    if name == "null":
        return data is None
    raise ValueError(f"unknown type {name}")


def js_equal(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(js_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(js_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def property_path(key: str) -> str:
    return "." + key if _IDENTIFIER.match(key) else "['" + _escape_quotes(key) + "']"


def _escape_quotes(text: str) -> str:
    for char, escaped in (
        ("\\", "\\\\"),
        ("'", "\\'"),
        ("\n", "\\n"),
        ("\r", "\\r"),
        ("\f", "\\f"),
        ("\t", "\\t"),
    ):
        text = text.replace(char, escaped)
    return text


def _fragment(key: str) -> str:
    return quote(key.replace("~", "~0").replace("/", "~1"), safe="-_.!~*'()")


@lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern[str]:
    # JavaScript's $ does not match before a final newline, Python's does
    return re.compile(
        pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as ajv-merge-patch's ``$merge`` applies ``with`` onto ``source``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Validator:
    """Validates data against a root schema (``#``) that may ``$ref`` other schemas registered by ``$id``."""

    def __init__(self, root: dict[str, Any], *others: dict[str, Any]) -> None:
        self.root = root
        self.schemas = {schema["$id"]: schema for schema in others}

    def errors(self, data: Any) -> list[Error]:
        errors: list[Error] = []
        self._validate(self.root, data, "", "#", errors)
        return errors

    def _resolve(self, ref: str) -> tuple[Any, str]:
        schema_id, _, pointer = ref.partition("#")
        node: Any = self.schemas[schema_id] if schema_id else self.root
        for part in filter(None, pointer.split("/")):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node, ref

    def _validate(
        self, schema: Any, data: Any, data_path: str, schema_path: str, errors: list[Error]
    ) -> bool:
        before = len(errors)
        if schema is True:
            return True
        if schema is False:
            errors.append(
                _error(
                    "false schema", data_path, f"{schema_path}/false schema", {}, "boolean schema is false"
                )
            )
            return False
        if "$merge" in schema:
            return self._merge(schema["$merge"], data, data_path, schema_path, errors)
        if "$ref" in schema:  # ajv 6 ignores a $ref's sibling keywords
            target, target_path = self._resolve(schema["$ref"])
            return self._validate(target, data, data_path, target_path, errors)
        type_spec = schema.get("type")
        used = {name for name, keywords in _GROUPS if any(k in schema for k in keywords)}
        if type_spec is not None and (isinstance(type_spec, list) or type_spec not in used):
            self._check_type(type_spec, data, data_path, schema_path, errors)
        for name, _ in _GROUPS:
            if name not in used:
                continue
            if data_type_matches(name, data):
                getattr(self, f"_group_{name}")(schema, data, data_path, schema_path, errors)
            elif type_spec == name:
                self._check_type(type_spec, data, data_path, schema_path, errors)
        if "enum" in schema and not any(js_equal(data, v) for v in schema["enum"]):
            message = "should be equal to one of the allowed values"
            errors.append(
                _error("enum", data_path, f"{schema_path}/enum", {"allowedValues": schema["enum"]}, message)
            )
        if "oneOf" in schema:
            self._one_of(schema["oneOf"], data, data_path, schema_path, errors)
        return len(errors) == before

    def _check_type(
        self, spec: str | list[str], data: Any, data_path: str, path: str, errors: list[Error]
    ) -> None:
        names = spec if isinstance(spec, list) else [spec]
        if not any(data_type_matches(name, data) for name in names):
            joined = ",".join(names)
            errors.append(_error("type", data_path, f"{path}/type", {"type": joined}, f"should be {joined}"))

    def _merge(self, spec: dict[str, Any], data: Any, data_path: str, path: str, errors: list[Error]) -> bool:
        source = spec["source"]
        if "$ref" in source:
            source, _ = self._resolve(source["$ref"])
        valid = self._validate(merge_patch(source, spec["with"]), data, data_path, path, errors)
        if not valid:
            message = 'should pass "$merge" keyword validation'
            errors.append(_error("$merge", data_path, f"{path}/$merge", {"keyword": "$merge"}, message))
        return valid

    def _one_of(self, branches: list[Any], data: Any, data_path: str, path: str, errors: list[Error]) -> None:
        before = len(errors)
        passing: list[int] = []
        for index, branch in enumerate(branches):
            if self._validate(branch, data, data_path, f"{path}/oneOf/{index}", errors):
                passing.append(index)
        if len(passing) == 1:
            del errors[before:]
            return
        params = {"passingSchemas": None if not passing else passing[:2]}
        errors.append(
            _error("oneOf", data_path, f"{path}/oneOf", params, "should match exactly one schema in oneOf")
        )

    def _group_number(
        self, schema: dict[str, Any], data: Any, data_path: str, path: str, errors: list[Error]
    ) -> None:
        if "minimum" in schema and data < schema["minimum"]:
            limit = schema["minimum"]
            params = {"comparison": ">=", "limit": limit, "exclusive": False}
            errors.append(
                _error("minimum", data_path, f"{path}/minimum", params, f"should be >= {number(limit)}")
            )

    def _group_string(
        self, schema: dict[str, Any], data: str, data_path: str, path: str, errors: list[Error]
    ) -> None:
        if "maxLength" in schema and len(data) > schema["maxLength"]:
            limit = schema["maxLength"]
            message = f"should NOT be longer than {limit} characters"
            errors.append(_error("maxLength", data_path, f"{path}/maxLength", {"limit": limit}, message))
        if "minLength" in schema and len(data) < schema["minLength"]:
            limit = schema["minLength"]
            message = f"should NOT be shorter than {limit} characters"
            errors.append(_error("minLength", data_path, f"{path}/minLength", {"limit": limit}, message))
        if "pattern" in schema and not _regex(schema["pattern"]).search(data):
            pattern = schema["pattern"]
            message = f'should match pattern "{pattern}"'
            errors.append(_error("pattern", data_path, f"{path}/pattern", {"pattern": pattern}, message))

    def _group_array(
        self, schema: dict[str, Any], data: list[Any], data_path: str, path: str, errors: list[Error]
    ) -> None:
        if "minItems" in schema and len(data) < schema["minItems"]:
            limit = schema["minItems"]
            message = f"should NOT have fewer than {limit} items"
            errors.append(_error("minItems", data_path, f"{path}/minItems", {"limit": limit}, message))
        if "items" in schema:
            for index, item in enumerate(data):
                self._validate(schema["items"], item, f"{data_path}[{index}]", f"{path}/items", errors)

    def _group_object(
        self, schema: dict[str, Any], data: dict[str, Any], data_path: str, path: str, errors: list[Error]
    ) -> None:
        if "minProperties" in schema and len(data) < schema["minProperties"]:
            limit = schema["minProperties"]
            message = f"should NOT have fewer than {limit} properties"
            errors.append(
                _error("minProperties", data_path, f"{path}/minProperties", {"limit": limit}, message)
            )
        properties: dict[str, Any] = schema.get("properties", {})
        required: list[str] = schema.get("required", [])
        for key in required:  # the required keyword itself checks only properties without a schema
            if not _has_rules(properties.get(key)) and key not in data:
                errors.append(_required(key, data_path, path))
        self._additional(schema, data, data_path, path, errors)
        for key, sub in properties.items():
            if not _has_rules(sub):
                continue
            if key not in data:
                if key in required:
                    errors.append(_required(key, data_path, path))
                continue
            self._validate(
                sub, data[key], data_path + property_path(key), f"{path}/properties/{_fragment(key)}", errors
            )
        for pattern, sub in schema.get("patternProperties", {}).items():
            if not _has_rules(sub):
                continue
            for key, value in data.items():
                if _regex(pattern).search(key):
                    key_path = f"{data_path}['{_escape_quotes(key)}']"
                    self._validate(
                        sub, value, key_path, f"{path}/patternProperties/{_fragment(pattern)}", errors
                    )

    def _additional(
        self, schema: dict[str, Any], data: dict[str, Any], data_path: str, path: str, errors: list[Error]
    ) -> None:
        if schema.get("additionalProperties", True) is not False:
            return
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        for key in data:
            if key in properties or any(_regex(p).search(key) for p in patterns):
                continue
            message = "should NOT have additional properties"
            params = {"additionalProperty": key}
            errors.append(
                _error("additionalProperties", data_path, f"{path}/additionalProperties", params, message)
            )


def _has_rules(schema: Any) -> bool:
    if schema is None:
        return False
    if isinstance(schema, bool):
        return not schema
    return bool(schema)


def _required(key: str, data_path: str, path: str) -> Error:
    message = f"should have required property '{key}'"
    return _error("required", data_path, f"{path}/required", {"missingProperty": key}, message)


def _error(keyword: str, data_path: str, schema_path: str, params: dict[str, Any], message: str) -> Error:
    return {
        "keyword": keyword,
        "dataPath": data_path,
        "schemaPath": schema_path,
        "params": params,
        "message": message,
    }


__all__ = ["Error", "Validator", "data_type_matches", "js_equal", "merge_patch", "property_path"]
