"""One config build: normalise keys → prepare the dict → pydantic → every problem in one ``ConfigError``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from trialfleet.config.base import BuildSettings, KeyPath
from trialfleet.config.keys import discriminator_tags, normalise_keys
from trialfleet.config.problems import aliased, translate, user_problems
from trialfleet.config.units import show_value
from trialfleet.errors import ConfigError, ConfigProblem, format_key_path

ModelT = TypeVar("ModelT", bound=BaseModel)

#: rewrites the normalised dict in place before validation; returns problems at canonical key paths
Prepare = Callable[[dict[str, Any], BuildSettings], list[tuple[KeyPath, str]]]


def _unique(problems: Iterable[ConfigProblem]) -> list[ConfigProblem]:
    seen: set[tuple[str, str]] = set()
    out = []
    for problem in problems:
        if (problem.key_path, problem.message) not in seen:
            seen.add((problem.key_path, problem.message))
            out.append(problem)
    return out


def build_model(
    model: type[ModelT],
    data: Any,
    settings: BuildSettings,
    *,
    source: str | Path | None = None,
    prepare: Prepare | None = None,
    extra_tags: Iterable[str] = (),
) -> ModelT:
    """Validate ``data`` as ``model``; raise one ``ConfigError`` listing every problem found."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"the config must be a mapping of keys to values, got {show_value(data)}", file=source
        )
    norm = normalise_keys(data, model)
    problems = [ConfigProblem(format_key_path(path), message) for path, message in norm.problems]
    if prepare is not None:
        problems += user_problems(prepare(norm.data, settings), norm, settings.aliases)
    try:
        built = model.model_validate(norm.data, context=settings.context())
    except ValidationError as exc:
        problems += translate(exc, norm, settings.aliases, discriminator_tags(model) | set(extra_tags))
        raise ConfigError("invalid experiment config", file=source, problems=_unique(problems)) from exc
    if problems:
        raise ConfigError("invalid experiment config", file=source, problems=_unique(problems))
    for path, reason in unacted_fields(built):
        where = format_key_path(aliased(aliased(path, settings.aliases), norm.spellings))
        warning = f"{where}: accepted but not acted on: {reason}"
        if warning not in settings.warnings:
            settings.warnings.append(warning)
    return built


def unacted_warnings(model: BaseModel) -> list[str]:
    """One line per field set in ``model`` that is accepted but not acted on (the manager logs them)."""
    return [
        f"{format_key_path(path)}: accepted but not acted on: {why}" for path, why in unacted_fields(model)
    ]


def unacted_fields(model: BaseModel, path: KeyPath = ()) -> list[tuple[KeyPath, str]]:
    """The fields set in ``model`` (and the models below it) that their class accepts but does not act on."""
    found: list[tuple[KeyPath, str]] = []
    not_acted_on: dict[str, str] = getattr(model, "not_acted_on", {})
    for name, info in type(model).model_fields.items():
        alias = info.alias or name
        set_here = name in model.model_fields_set and getattr(model, name) != info.get_default(
            call_default_factory=True
        )
        if name in not_acted_on and set_here:  # (a stored config holds the defaults too)
            found.append(((*path, alias), not_acted_on[name]))
        value = getattr(model, name)
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if isinstance(item, BaseModel):
                found += unacted_fields(item, (*path, alias) if index is None else (*path, alias, index))
    return found
