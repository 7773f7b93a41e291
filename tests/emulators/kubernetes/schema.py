"""CRD structural schemas: pruning, defaulting and validation as the apiextensions server does them.

A custom resource is (1) pruned of fields its ``openAPIV3Schema`` does not declare (unless
``x-kubernetes-preserve-unknown-fields``), with ``null`` dropped from non-nullable fields, (2) defaulted
from ``default`` values where the parent object exists, then (3) validated, each failure worded as
kube-openapi words it (``spec.x in body should be greater than or equal to -2``).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from . import fielderrors as fe

_TOP_LEVEL = ("apiVersion", "kind", "metadata")


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def prune(value: Any, schema: dict[str, Any], *, root: bool = False) -> Any:
    if isinstance(value, dict):
        return _prune_object(value, schema, root)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(item, schema["items"]) for item in value]
    return value


def _prune_object(value: dict[str, Any], schema: dict[str, Any], root: bool) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields", False)
    result: dict[str, Any] = {}
    for key, item in value.items():
        if root and key in _TOP_LEVEL:
            result[key] = item
        elif key in properties:
            sub = properties[key]
            if item is None and not sub.get("nullable", False):
                continue
            result[key] = prune(item, sub)
        elif isinstance(extra, dict):
            result[key] = prune(item, extra)
        elif keep_unknown or extra is True:
            result[key] = item
    return result


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in list(value):
                if key not in (schema.get("properties") or {}):
                    value[key] = apply_defaults(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in value]
    return value


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[fe.FieldError]:
    if value is None and schema.get("nullable"):
        return []
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if _type_of(value) not in ("integer", "string"):
            return [_type_error(path, value, "integer-or-string")]
    elif (
        expected
        and _type_of(value) != expected
        and not (expected == "number" and _type_of(value) == "integer")
    ):
        return [_type_error(path, value, expected)]
    errors = _scalar_checks(value, schema, path)
    if isinstance(value, dict):
        errors += _object_checks(value, schema, path)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += validate(item, schema["items"], f"{path}[{index}]")
    return errors


def _type_error(path: str, value: Any, expected: str) -> fe.FieldError:
    detail = f'{path} in body must be of type {expected}: "{_type_of(value)}"'
    return fe.FieldError("TypeInvalid", path, value, detail)


def _scalar_checks(value: Any, schema: dict[str, Any], path: str) -> list[fe.FieldError]:
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(fe.not_supported(path, value, [str(choice) for choice in schema["enum"]]))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(fe.invalid(path, value, f"{path} in body should match '{schema['pattern']}'"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(fe.too_long(path, schema["maxLength"]))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                fe.invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long")
            )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            limit = _number(schema["minimum"])
            errors.append(
                fe.invalid(path, value, f"{path} in body should be greater than or equal to {limit}")
            )
        if "maximum" in schema and value > schema["maximum"]:
            limit = _number(schema["maximum"])
            errors.append(fe.invalid(path, value, f"{path} in body should be less than or equal to {limit}"))
    return errors


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _object_checks(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[fe.FieldError]:
    errors = [fe.required(_child(path, name)) for name in schema.get("required") or [] if name not in value]
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            errors += validate(item, properties[key], _child(path, key))
        elif isinstance(extra, dict):
            errors += validate(item, extra, f"{path}[{key}]")
    return errors
