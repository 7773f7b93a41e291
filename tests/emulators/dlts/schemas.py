"""The dashboard's request-body checks (``api/validator/*.schema.json``) with ajv 6's error messages.

The dashboard answers an invalid body with 400 and ``errors.map(e => `${e.dataPath} ${e.message}`).join('\\n')``.
ajv runs with its defaults (``allErrors: false``), so one error is reported, except under ``oneOf`` where the
failing branches' errors come before the ``oneOf`` error. Paths follow ajv 6 without JSON pointers: ``.name``
for fixed properties, ``['key']`` for pattern properties, ``[0]`` for array items, ``""`` for the root.
"""

from __future__ import annotations

import re
from typing import Any

STATUS_VALUES = ("approved", "killing", "pausing", "queued")
ENDPOINT_NAMES = ("ssh", "ipython", "tensorboard")
_BATCH_KEY = re.compile(r"[\w-]+")  # unanchored, as in batch-status.schema.json
_IDENTIFIER = re.compile(r"^[a-z$_][a-z$_0-9]*$", re.IGNORECASE)

Error = tuple[str, str]


def _prop(path: str, name: str) -> str:
    return f"{path}.{name}" if _IDENTIFIER.match(name) else f"{path}['{name}']"


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    raise ValueError(kind)


def _object(value: Any, path: str, required: list[str], types: dict[str, str]) -> list[Error]:
    """``{type: object, properties: {name: {type}}, required}``: type, then required, then properties."""
    if not _type_ok(value, "object"):
        return [(path, "should be object")]
    for name in required:
        if name not in value:
            return [(path, f"should have required property '{name}'")]
    for name, kind in types.items():
        if name in value and not _type_ok(value[name], kind):
            return [(_prop(path, name), f"should be {kind}")]
    return []


def _enum(value: Any, path: str, allowed: tuple[str, ...]) -> list[Error]:
    if isinstance(value, str) and value in allowed:
        return []
    return [(path, "should be equal to one of the allowed values")]


def _job(body: Any) -> list[Error]:
    return _object(body, "", ["team"], {"team": "string"})


def _status(body: Any) -> list[Error]:
    errors = _object(body, "", ["status"], {})
    return errors or _enum(body["status"], ".status", STATUS_VALUES)


def _batch_status(body: Any) -> list[Error]:
    errors = _object(body, "", ["status"], {"status": "object"})
    if errors:
        return errors
    statuses = body["status"]
    if any(not _BATCH_KEY.search(key) for key in statuses):
        return [(".status", "should NOT have additional properties")]
    for key, value in statuses.items():
        errors = _enum(value, f".status['{key}']", STATUS_VALUES)
        if errors:
            return errors
    return []


def _endpoint_item(item: Any, path: str) -> list[Error]:
    as_port = _object(item, path, ["name", "podPort"], {"name": "string", "podPort": "number"})
    as_name = _enum(item, path, ENDPOINT_NAMES)
    if bool(as_port) == bool(as_name):  # neither branch, or (impossible here) both
        return [*as_port, *as_name, (path, "should match exactly one schema in oneOf")]
    return []


def _endpoints(body: Any) -> list[Error]:
    errors = _object(body, "", ["endpoints"], {"endpoints": "array"})
    if errors:
        return errors
    for index, item in enumerate(body["endpoints"]):
        errors = _endpoint_item(item, f".endpoints[{index}]")
        if errors:
            return errors
    return []


def _priority(body: Any) -> list[Error]:
    return _object(body, "", ["priority"], {"priority": "number"})


def _command(body: Any) -> list[Error]:
    return _object(body, "", ["command"], {"command": "string"})


_SCHEMAS = {
    "job": _job,
    "status": _status,
    "batch-status": _batch_status,
    "endpoints": _endpoints,
    "priority": _priority,
    "command": _command,
}


def validate(schema: str, body: Any) -> str | None:
    """The 400 message for ``body`` under the named schema, or None when it is valid."""
    errors = _SCHEMAS[schema](body)
    if not errors:
        return None
    return "\n".join(f"{path} {message}" for path, message in errors)


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness: empty lists and objects are true, unlike Python's."""
    return value not in (None, False, 0, "")


def validate_job_body(body: Any) -> str | None:
    """``middlewares/body.js`` for jobs: a missing or empty ``team`` is taken from ``vcName`` before re-checking."""
    message = validate("job", body)
    if isinstance(body, dict) and not js_truthy(body.get("team")) and js_truthy(body.get("vcName")):
        body["team"] = body["vcName"]
        message = validate("job", body)
    return message


__all__ = ["ENDPOINT_NAMES", "STATUS_VALUES", "js_truthy", "validate", "validate_job_body"]
