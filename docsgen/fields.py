"""One row of the config reference per field of a config model: key, type, default, NNI or trialfleet-only,
description (the field's docstring, and why a key is accepted but not acted on)."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, BeforeValidator, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from trialfleet.config import base


@dataclass
class Row:
    name: str  # the field's attribute name
    key: str  # the config key (camelCase)
    type: str
    default: str
    origin: str  # "NNI" or "trialfleet"
    description: str
    platforms: str = ""


_VALIDATED = {
    base.resolve_path: "path",
    base._duration: "duration",
    base._size: "size",
    base._gpu_indices: "GPU indices (`0,1` or a list)",
    base.json_data: "mapping",
}
_BOUNDS = (
    (annotated_types.Gt, ">"),
    (annotated_types.Ge, "≥"),
    (annotated_types.Lt, "<"),
    (annotated_types.Le, "≤"),
)


def _validated_name(metadata: list[Any]) -> str | None:
    for item in metadata:
        if isinstance(item, BeforeValidator) and item.func in _VALIDATED:
            return _VALIDATED[item.func]
    return None


def _type_name(annotation: Any, metadata: list[Any] | None = None) -> str:
    named = _validated_name(metadata or [])
    if named:
        return named
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = get_args(annotation)
        return _type_name(inner, extra)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_type_name(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in get_args(annotation))
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"mapping ({annotation.__name__})"
    if isinstance(annotation, type) and issubclass(annotation, SecretStr):
        return "secret string"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(info: FieldInfo) -> str:
    found = []
    for item in info.metadata:
        for kind, sign in _BOUNDS:
            if isinstance(item, kind):
                found.append(f"{sign} {getattr(item, kind.__name__.lower())}")
    return f", {' and '.join(found)}" if found else ""


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Path):
        value = str(value)
    if value == "":
        return '`""`'
    return f"`{value!r}`" if isinstance(value, (dict, list)) else f"`{value}`"


def _is_duration(info: FieldInfo) -> bool:
    return _type_name(info.annotation, info.metadata) == "duration"


def _union_over_mro(model: type[BaseModel], name: str) -> set[str]:
    return {key for cls in model.__mro__ for key in getattr(cls, name, ())}


def _origin(model: type[BaseModel], name: str) -> str:
    if name in _union_over_mro(model, "trialfleet_keys"):
        return "trialfleet"
    return "NNI" if getattr(model, "nni_model", True) else "trialfleet"


def model_rows(model: type[BaseModel]) -> list[Row]:
    not_acted_on: dict[str, str] = getattr(model, "not_acted_on", {})
    rows = []
    for name, info in model.model_fields.items():
        description = " ".join((info.description or "").split())
        if name in not_acted_on:
            description += f" *Accepted, not acted on: {not_acted_on[name]}.*"
        rows.append(
            Row(
                name=name,
                key=info.alias or name,
                type=_type_name(info.annotation, info.metadata) + _bounds(info),
                default=_default(info) + (" s" if _is_duration(info) and info.default else ""),
                origin=_origin(model, name),
                description=description.replace("|", "\\|").strip(),
            )
        )
    return rows


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def nested_models(model: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    """(key, model) for every config model a field of ``model`` holds (a list's items, a union's members)."""
    return [
        (info.alias or name, nested)
        for name, info in model.model_fields.items()
        for nested in _models_in(info.annotation)
    ]
