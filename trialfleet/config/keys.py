"""Case- and underscore-insensitive keys (NNI's ``case_insensitive``), resolved before pydantic sees the dict.

``trial_command``, ``TrialCommand`` and ``_TRIALCOMMAND_`` all become ``trialCommand``. The pass walks the
input along the models' own field types (nested models, lists of them, unions discriminated by a
``Literal`` field such as ``platform``), reports unknown keys with a "did you mean", and remembers how the
user spelled every key so error messages can quote it.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from trialfleet.config.base import KeyPath


def fold(key: str) -> str:
    return key.replace("_", "").lower()


@dataclass(frozen=True)
class ModelChoice:
    """``Annotated`` metadata of a field whose model is chosen at validation time by what the mapping names
    (a ``trainingService`` block's ``platform``: the platform registry knows built-ins and plugins)."""

    choose: Callable[[Mapping[Any, Any]], type[BaseModel] | None]
    known: Callable[[], Sequence[type[BaseModel]]]  # every model it may choose


@dataclass(frozen=True)
class Shape:
    """Where a field's value holds config models: a mapping that is one of ``models`` (or the model ``choice``
    picks), or a list of ``items``."""

    models: tuple[type[BaseModel], ...] = ()
    items: Shape | None = None
    choice: ModelChoice | None = None


@dataclass(frozen=True)
class FieldEntry:
    alias: str
    shape: Shape | None
    tags: tuple[Any, ...]  # the values a Literal field accepts (a discriminator's tags)


def _shape(annotation: Any) -> Shape | None:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = get_args(annotation)
        choice = next((m for m in metadata if isinstance(m, ModelChoice)), None)
        return Shape(choice=choice) if choice is not None else _shape(base)
    if origin is Union or origin is types.UnionType:
        parts = [s for s in map(_shape, get_args(annotation)) if s is not None]
        models = tuple(m for s in parts for m in s.models)
        items = next((s.items for s in parts if s.items is not None), None)
        choice = next((s.choice for s in parts if s.choice is not None), None)
        return Shape(models, items, choice) if models or items or choice else None
    if origin is list:
        inner = _shape(get_args(annotation)[0])
        return Shape(items=inner) if inner is not None else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Shape(models=(annotation,))
    return None


@cache
def fields_of(model: type[BaseModel]) -> dict[str, FieldEntry]:
    """Folded key → field entry, for every field of ``model``."""
    entries = {}
    for name, info in model.model_fields.items():
        tags = get_args(info.annotation) if get_origin(info.annotation) is Literal else ()
        entries[fold(name)] = FieldEntry(info.alias or name, _shape(info.annotation), tags)
    return entries


@cache
def _discriminator(models: tuple[type[BaseModel], ...]) -> str | None:
    """The folded name of the single-valued Literal field that tells the members of a union apart."""
    common = set.intersection(*({k for k, e in fields_of(m).items() if len(e.tags) == 1} for m in models))
    distinct = [k for k in sorted(common) if len({fields_of(m)[k].tags for m in models}) == len(models)]
    return distinct[0] if distinct else None


def _pick_model(data: Mapping[Any, Any], models: tuple[type[BaseModel], ...]) -> type[BaseModel] | None:
    """The member of a discriminated union that ``data`` names (by ``platform``, ``storageType`` …)."""
    if len(models) == 1:
        return models[0]
    key = _discriminator(models)
    tag = next((v for k, v in data.items() if isinstance(k, str) and fold(k) == key), None)
    if key is None or not _hashable(tag):
        return None
    return next((m for m in models if tag in fields_of(m)[key].tags), None)


def _as_input(model: BaseModel) -> dict[str, Any]:
    """What the user set on a model built in Python, plus the tag that names its kind (``platform``)."""
    data: dict[str, Any] = model.model_dump(by_alias=True, exclude_unset=True)
    for entry in fields_of(type(model)).values():
        if len(entry.tags) == 1:
            data.setdefault(entry.alias, entry.tags[0])
    return data


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


@dataclass
class NormalisedInput:
    data: Any
    problems: list[tuple[KeyPath, str]] = field(default_factory=list)  # at the user's key paths
    spellings: dict[KeyPath, KeyPath] = field(default_factory=dict)  # canonical path → user path
    suggested: set[KeyPath] = field(default_factory=set)  # canonical paths offered as "did you mean"


class _Normaliser:
    def __init__(self) -> None:
        self.out = NormalisedInput(data=None)

    def value(self, value: Any, shape: Shape | None, canon: KeyPath, user: KeyPath) -> Any:
        if shape is None:
            return value
        if isinstance(value, BaseModel):  # a model built in Python is re-validated from its own keys
            value = _as_input(value)
        if isinstance(value, Mapping) and shape.choice is not None:
            return self.mapping(value, shape.choice.choose(value), canon, user)
        if isinstance(value, Mapping) and shape.models:
            return self.mapping(value, _pick_model(value, shape.models), canon, user)
        if isinstance(value, list) and shape.items is not None:
            return [self.value(v, shape.items, (*canon, i), (*user, i)) for i, v in enumerate(value)]
        return value

    def mapping(
        self, data: Mapping[Any, Any], model: type[BaseModel] | None, canon: KeyPath, user: KeyPath
    ) -> dict[Any, Any]:
        if model is None:  # unknown discriminator: pydantic reports it, the keys stay as written
            return dict(data)
        entries = fields_of(model)
        result: dict[Any, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                self.out.problems.append(((*user, str(key)), f"keys must be strings, got {key!r}"))
                continue
            entry = entries.get(fold(key))
            if entry is None:
                self._unknown(key, model, canon, user)
                continue
            if entry.alias in result:
                first = self.out.spellings[(*canon, entry.alias)][-1]
                message = f"{key!r} and {first!r} are the same key (keys ignore case and underscores)"
                self.out.problems.append(((*user, key), message))
                continue
            self.out.spellings[(*canon, entry.alias)] = (*user, key)
            result[entry.alias] = self.value(value, entry.shape, (*canon, entry.alias), (*user, key))
        return result

    def _unknown(self, key: str, model: type[BaseModel], canon: KeyPath, user: KeyPath) -> None:
        entries = fields_of(model)
        close = difflib.get_close_matches(fold(key), list(entries), n=1, cutoff=0.6)
        message = f"unknown key {key!r}"
        platform = entries.get("platform")
        if platform is not None and platform.tags:
            message += f" for platform {platform.tags[0]!r}"
        if close:
            alias = entries[close[0]].alias
            message += f" (did you mean {alias!r}?)"
            self.out.suggested.add((*canon, alias))
        self.out.problems.append(((*user, key), message))


def normalise_keys(data: Mapping[Any, Any], model: type[BaseModel]) -> NormalisedInput:
    """Rename every key of ``data`` (a mapping for ``model``) to its field alias, recursively."""
    normaliser = _Normaliser()
    normaliser.out.data = normaliser.mapping(data, model, (), ())
    return normaliser.out


def discriminator_tags(model: type[BaseModel]) -> set[str]:
    """Every tag of a discriminated union anywhere below ``model``: pydantic puts these into error locations."""
    tags: set[str] = set()
    seen: set[type[BaseModel]] = set()
    pending = [model]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for entry in fields_of(current).values():
            shape = entry.shape
            while shape is not None:
                key = _discriminator(shape.models) if len(shape.models) > 1 else None
                if key is not None:
                    tags.update(t for m in shape.models for t in fields_of(m)[key].tags if isinstance(t, str))
                pending.extend(shape.models)
                if shape.choice is not None:
                    pending.extend(shape.choice.known())
                shape = shape.items
    return tags
