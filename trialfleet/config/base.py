"""What every config model shares: camelCase aliases, no unknown keys, NNI's value types, build settings.

Validation settings (the config file's directory, whether to check paths on disk, whether the input is a
stored canonical config) travel in pydantic's validation context, so nested models see the same ones.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    SecretStr,
    SerializationInfo,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from trialfleet.config.units import parse_gpu_indices, parse_size, parse_time, show_value

KeyPath = tuple[str | int, ...]

# Every number a config holds is bounded by a limit no real experiment reaches, so that a typo or a hostile
# value (2**70 trials at once, a duration of 1e308 s) is refused by its key instead of being acted on. Keys
# the manager acts on state their own bound (docs/config.md lists them); these are the shared ones.

#: the longest duration of any key (maxExperimentDuration, maxTrialDuration, timeLimit, ...): ten years
MAX_DURATION = 10 * 365 * 86400
#: the largest memory size of any key (memory, memorySize, ...): 1 PiB, in MiB
MAX_SIZE_MB = 1024**3
#: the highest GPU index (gpuIndices, tunerGpuIndices): no machine has a thousand GPUs
MAX_GPU_INDEX = 1023
#: GPUs one trial may ask for (trialGpuNumber)
MAX_TRIAL_GPUS = 1024
#: any other integer key: a signed 32-bit integer, the width of the cluster APIs' fields the values end up in
MAX_CONFIG_INT = 2**31 - 1

_CONTEXT_KEY = "trialfleet"
SECRET_MASK = "******"


@dataclass
class BuildSettings:
    """How one config is being built; shared by every nested model through the validation context."""

    base_dir: Path  # relative paths are taken from here (the config file's directory, or CWD)
    check_paths: bool = True  # code and search-space paths must exist on this machine
    trust_stored: bool = False  # a stored canonical config: keep its search space, do not reload the file
    warnings: list[str] = field(default_factory=list)
    # canonical key path → the key path the user actually wrote it at (shortcut fields, advisor → tuner)
    aliases: dict[KeyPath, KeyPath] = field(default_factory=dict)

    def context(self) -> dict[str, Any]:
        return {_CONTEXT_KEY: self}


def build_settings(info: ValidationInfo | None) -> BuildSettings:
    context = info.context if info is not None else None
    if isinstance(context, dict) and isinstance(context.get(_CONTEXT_KEY), BuildSettings):
        return context[_CONTEXT_KEY]
    return BuildSettings(base_dir=Path.cwd())


class FieldProblem(ValueError):
    """Raised by a model validator to report problems at key paths *below* the model being validated.

    Pydantic can only place a model validator's error on the model itself; the config pipeline reads
    ``items`` back from the error's context and appends each path.
    """

    def __init__(self, items: Sequence[tuple[KeyPath, str]]) -> None:
        self.items = list(items)
        super().__init__("; ".join(message for _, message in self.items))


def raise_problems(items: Sequence[tuple[KeyPath, str]]) -> None:
    if items:
        raise FieldProblem(items)


class ConfigModel(BaseModel):
    """Base of every config model: snake_case attributes, camelCase keys, unknown keys refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        coerce_numbers_to_str=True,  # ``experimentName: 2024`` is a name, not a type error
        use_attribute_docstrings=True,  # a field's docstring is its description in the config reference
    )

    #: fields a user may set that this version accepts but does not act on (field name → why), each
    #: warned about by name when a config sets it (see :func:`trialfleet.config.pipeline.unacted_fields`)
    not_acted_on: ClassVar[dict[str, str]] = {}
    #: fields NNI's config does not have (the config reference marks them; subclasses add their own)
    trialfleet_keys: ClassVar[frozenset[str]] = frozenset()
    #: False for a model NNI has no counterpart of (a platform NNI never had): all of its keys are trialfleet's
    nni_model: ClassVar[bool] = True

    @field_validator("*", mode="after")
    @classmethod
    def _integers_in_bounds(cls, value: Any) -> Any:
        """The bound of an integer key whose field states none (a platform's counts, a plugin's keys)."""
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CONFIG_INT:
            limit = f"at most {MAX_CONFIG_INT}" if value > 0 else f"at least {-MAX_CONFIG_INT}"
            raise ValueError(f"expected a number {limit}, got {show_value(value)}")
        return value


def resolve_path(value: Any, info: ValidationInfo) -> Any:
    """Expand ``~`` and make the path absolute against the config's directory, as NNI's ``resolve_path``."""
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        return value  # pydantic reports the type error
    if not value:
        raise ValueError("expected a path, got an empty string")
    if "\0" in value:
        raise ValueError("a path cannot contain a NUL character")
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        path = build_settings(info).base_dir / path
    return Path(os.path.realpath(path))


def _is(check: str, path: Path) -> bool:
    try:
        return bool(getattr(path, check)())
    except (OSError, ValueError):  # a name too long or otherwise unusable names nothing that exists
        return False


def path_problem(
    path: Path | None, kind: Literal["directory", "file"], what: str, info: ValidationInfo
) -> str | None:
    """Why ``path`` is not an existing directory (or regular file); None when it is, or checks are off."""
    if path is None or not build_settings(info).check_paths:
        return None
    if _is("is_dir" if kind == "directory" else "is_file", path):
        return None
    if _is("exists", path):
        return f"{what} {path} is not a {'directory' if kind == 'directory' else 'regular file'}"
    return f"{what} {path} does not exist"


def existing(
    kind: Literal["directory", "file"], what: str
) -> Callable[[Path | None, ValidationInfo], Path | None]:
    """A field validator: the (resolved) path must name an existing directory or regular file."""

    def check(path: Path | None, info: ValidationInfo) -> Path | None:
        problem = path_problem(path, kind, what, info)
        if problem:
            raise ValueError(problem)
        return path

    return check


def _dump_secret(value: SecretStr, info: SerializationInfo) -> str:
    context = info.context if isinstance(info.context, dict) else {}
    return value.get_secret_value() if context.get("include_secrets") else SECRET_MASK


def _json_problems(value: Any, path: KeyPath) -> list[tuple[KeyPath, str]]:
    if isinstance(value, dict):
        problems = [
            ((*path, str(k)), f"keys must be strings, got {k!r}") for k in value if not isinstance(k, str)
        ]
        for key, item in value.items():
            problems += _json_problems(item, (*path, str(key)))
        return problems
    if isinstance(value, list):
        return [
            problem for index, item in enumerate(value) for problem in _json_problems(item, (*path, index))
        ]
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, f"expected a finite number, got {value}")]
    if value is None or isinstance(value, (str, int, float)):
        return []
    return [
        (path, f"expected JSON data (strings, numbers, booleans, lists, mappings), got {show_value(value)}")
    ]


def json_data(value: Any) -> Any:
    """Free-form values (search space, classArgs) must survive the JSON round trip through the database."""
    raise_problems(_json_problems(value, ()))
    return value


def _duration(value: Any) -> int:
    seconds = parse_time(value)
    if seconds > MAX_DURATION:
        raise ValueError(
            f"expected a duration of at most {MAX_DURATION // 86400}d (ten years), got {show_value(value)}"
        )
    return seconds


def _size(value: Any) -> int:
    megabytes = parse_size(value)
    if megabytes > MAX_SIZE_MB:
        raise ValueError(
            f"expected a memory size of at most {MAX_SIZE_MB // 1024**2}tb, got {show_value(value)}"
        )
    return megabytes


def _gpu_indices(value: Any) -> list[int] | None:
    indices = parse_gpu_indices(value)
    beyond = [index for index in indices or () if index > MAX_GPU_INDEX]
    if beyond:
        raise ValueError(f"GPU indices must be at most {MAX_GPU_INDEX}, got {show_value(beyond[0])}")
    return indices


ConfigPath = Annotated[Path, BeforeValidator(resolve_path)]
JsonMapping = Annotated[dict[str, Any], BeforeValidator(json_data)]
#: NNI's durations ("30m", "2h", 90) in whole seconds, at most :data:`MAX_DURATION`
Duration = Annotated[int, BeforeValidator(_duration)]
#: NNI's memory sizes ("16gb", 2048) in whole MiB, at most :data:`MAX_SIZE_MB`
SizeMB = Annotated[int, BeforeValidator(_size)]
GpuIndices = Annotated[list[int] | None, BeforeValidator(_gpu_indices)]
Secret = Annotated[SecretStr, PlainSerializer(_dump_secret, return_type=str, when_used="json")]
