"""Field validation errors, printed exactly as ``k8s.io/apimachinery/pkg/util/validation/field`` prints them.

A 422 ``Invalid`` body lists one cause per field error, and its message joins the errors the way Go's
``ErrorList.ToAggregate()`` does (one error alone, several inside ``[...]`` separated by ``, ``). Webhooks
that return a plain aggregate (the training operator's) reuse the same text inside a 403.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

# ErrorType → (cause type, the words ErrorBody starts with)
_TYPES = {
    "Required": ("FieldValueRequired", "Required value"),
    "Invalid": ("FieldValueInvalid", "Invalid value"),
    "TypeInvalid": ("FieldValueTypeInvalid", "Invalid value"),
    "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
    "Forbidden": ("FieldValueForbidden", "Forbidden"),
    "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
    "NotFound": ("FieldValueNotFound", "Not found"),
    "TooLong": ("FieldValueTooLong", "Too long"),
    "TooMany": ("FieldValueTooMany", "Too many"),
}
_NO_VALUE = ("Required", "Forbidden", "TooLong")
_OMIT = object()


@dataclass(frozen=True)
class FieldError:
    kind: str  # a key of _TYPES
    field: str
    value: Any = _OMIT
    detail: str = ""

    def body(self) -> str:
        words = _TYPES[self.kind][1]
        plain = self.kind in _NO_VALUE or self.value is _OMIT
        text = words if plain else f"{words}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {"reason": _TYPES[self.kind][0], "message": self.body(), "field": self.field}


def go_value(value: Any) -> str:
    """How Go's ``%v``/``%q``/``%#v`` show a bad value in field errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"))


def required(field: str, detail: str = "") -> FieldError:
    return FieldError("Required", field, detail=detail)


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid", field, value, detail)


def not_supported(field: str, value: Any, supported: list[str]) -> FieldError:
    quoted = ", ".join(json.dumps(choice) for choice in supported)
    return FieldError("NotSupported", field, value, f"supported values: {quoted}" if supported else "")


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("Forbidden", field, detail=detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError("Duplicate", field, value)


def not_found(field: str, value: Any) -> FieldError:
    return FieldError("NotFound", field, value)


def too_long(field: str, max_length: int) -> FieldError:
    return FieldError("TooLong", field, detail=f"may not be more than {max_length} bytes")


def aggregate(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: duplicates dropped, several errors bracketed."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def invalid_error(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """``apierrors.NewInvalid``: 422 with one cause per field error."""
    qualified_kind = f"{kind}.{group}" if group else kind
    message = f'{qualified_kind} "{name}" is invalid'
    if errors:
        message += f": {aggregate(errors)}"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [error.cause() for error in errors]
    return ApiError(422, "Invalid", message, details)


def path(*parts: str | int) -> str:
    """A field path as Go prints it: ``spec.containers[0].image``, keys of maps in brackets."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith("["):
            text += part
        else:
            text += f".{part}" if text else part
    return text


def key(name: str) -> str:
    return f"[{name}]"
