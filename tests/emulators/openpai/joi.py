"""The few Joi 13 schemas the rest server checks request bodies with, and Joi's messages for them.

``param.validate`` answers a failure with 400 ``InvalidParametersError`` and Joi's first error as the message:
``child "value" fails because ["value" must be one of [STOP, START]]``, ``"x" is not allowed``, ...
Fields are checked in the schema's order, unknown keys after them; strings from a form are converted to numbers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .jscompat import number

_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # string or number
    required: bool = False
    valid: tuple[str, ...] = ()
    pattern: str | None = None
    pattern_name: str = ""
    min: float | None = None
    max: float | None = None
    integer: bool = False
    default: Any = None


EXECUTION_TYPE = (Field("value", "string", required=True, valid=("STOP", "START")),)
TAG = (Field("value", "string", required=True, pattern=r"^[^,]+$", pattern_name="value"),)
TOKEN_POST = (
    Field("username", "string", required=True, pattern=r"^[\w.-]+$", pattern_name="username"),
    Field("password", "string", required=True, min=6),
    Field("expiration", "number", integer=True, min=60, max=7 * 24 * 3600, default=24 * 3600),
)


def _check(field: Field, value: Any) -> tuple[str | None, Any]:
    if field.kind == "string":
        return _check_string(field, value), value
    return _check_number(field, value)


def _check_string(field: Field, value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if value == "":
        return "is not allowed to be empty"
    if field.valid and value not in field.valid:
        return f"must be one of [{', '.join(field.valid)}]"
    if field.min is not None and len(value) < field.min:
        return f"length must be at least {number(field.min)} characters long"
    if field.pattern is not None and not re.search(field.pattern, value, flags=re.ASCII):
        return f'with value "{value}" fails to match the {field.pattern_name} pattern'
    return None


def _check_number(field: Field, value: Any) -> tuple[str | None, Any]:
    if isinstance(value, str) and _NUMBER.match(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return "must be a number", value
    if field.integer and not float(value).is_integer():
        return "must be an integer", value
    if field.min is not None and value < field.min:
        return f"must be larger than or equal to {number(field.min)}", value
    if field.max is not None and value > field.max:
        return f"must be less than or equal to {number(field.max)}", value
    return None, int(value) if float(value).is_integer() else value


def validate(body: Any, fields: tuple[Field, ...]) -> dict[str, Any]:
    """The validated body (defaults filled, numbers converted); raises 400 ``InvalidParametersError``."""
    if not isinstance(body, dict):
        raise bad_request("InvalidParametersError", '"value" must be an object')
    result = dict(body)
    for field in fields:
        if field.name not in body:
            if field.required:
                raise _child(field.name, "is required")
            if field.default is not None:
                result[field.name] = field.default
            continue
        error, value = _check(field, body[field.name])
        if error is not None:
            raise _child(field.name, error)
        result[field.name] = value
    for key in body:
        if key not in {f.name for f in fields}:
            raise bad_request("InvalidParametersError", f'"{key}" is not allowed')
    return result


def _child(name: str, message: str) -> Exception:
    return bad_request("InvalidParametersError", f'child "{name}" fails because ["{name}" {message}]')


__all__ = ["EXECUTION_TYPE", "TAG", "TOKEN_POST", "Field", "validate"]
