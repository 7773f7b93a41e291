"""NNI's search-space format: validation with the rules of ``nni/common/hpo_utils/validation.py``, sampling with
NNI's semantics for every type, and a membership check.

Only built-in tuners validate: for a custom tuner the space is opaque JSON (any format the tuner understands).
Every error names the parameter (a dotted path inside nested choices: ``layer.conv.kernel``) and the rule.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Collection
from typing import Any

from trialfleet.errors import SearchSpaceError
from trialfleet.tuning.search_space.flat import flatten, is_nested_choice, sample_all, to_parameters

__all__ = ["ALL_TYPES", "contains", "sample", "validate_search_space"]

ALL_TYPES: tuple[str, ...] = (
    "choice",
    "randint",
    "uniform",
    "quniform",
    "loguniform",
    "qloguniform",
    "normal",
    "qnormal",
    "lognormal",
    "qlognormal",
)


def validate_search_space(
    space: Any,
    supported_types: Collection[str] = ALL_TYPES,
    *,
    nested: bool = True,
    numeric_choices: bool = False,
    algorithm: str = "",
) -> None:
    """Raise SearchSpaceError on the first rule ``space`` breaks.

    ``supported_types``, ``nested`` and ``numeric_choices`` narrow the format to what one tuner handles;
    ``algorithm`` names that tuner in the message.
    """
    if not isinstance(space, dict):
        raise SearchSpaceError(
            f"search space must be a dict of parameter name -> {{_type, _value}}, got {type(space).__name__}",
            key_path="searchSpace",
        )
    _Validator(frozenset(supported_types), nested, numeric_choices, algorithm).check(space, ())


class _Validator:
    def __init__(self, types: frozenset[str], nested: bool, numeric_choices: bool, algorithm: str) -> None:
        self.types = types
        self.nested = nested
        self.numeric_choices = numeric_choices
        self.by = f" by tuner {algorithm}" if algorithm else ""

    def check(self, space: dict[str, Any], path: tuple[str, ...]) -> None:
        for name, spec in space.items():
            if path and name == "_name":
                continue
            self.check_one((*path, str(name)), spec)

    def fail(self, path: tuple[str, ...], rule: str) -> SearchSpaceError:
        dotted = ".".join(path)
        return SearchSpaceError(f"search space parameter '{dotted}': {rule}", key_path=("searchSpace", *path))

    def check_one(self, path: tuple[str, ...], spec: Any) -> None:
        if not isinstance(spec, dict) or "_type" not in spec or "_value" not in spec:
            raise self.fail(path, f"must be a dict with '_type' and '_value', got {spec!r}")
        type_, values = spec["_type"], spec["_value"]
        if type_ not in ALL_TYPES:
            raise self.fail(path, f"unknown _type {type_!r} (known: {', '.join(ALL_TYPES)})")
        if type_ not in self.types:
            raise self.fail(
                path, f"{type_} is not supported{self.by} (supported: {', '.join(sorted(self.types))})"
            )
        if not isinstance(values, list):
            raise self.fail(path, f"{type_} needs _value to be a list, got {values!r}")
        if type_ == "choice":
            self.check_choice(path, values)
        else:
            self.check_numeric(path, type_, values)

    def check_choice(self, path: tuple[str, ...], options: list[Any]) -> None:
        if not options:
            raise self.fail(path, "choice needs at least one option, got []")
        if is_nested_choice(options):
            if not self.nested:
                raise self.fail(path, f"nested choice (options with '_name') is not supported{self.by}")
            for option in options:
                self.check(option, (*path, str(option["_name"])))
            return
        allowed: tuple[type, ...] = (int, float) if self.numeric_choices else (int, float, str)
        bad = [o for o in options if not isinstance(o, allowed) or isinstance(o, bool)]
        if bad:
            what = "numbers" if self.numeric_choices else "numbers or strings, or all dicts with '_name'"
            raise self.fail(path, f"choice options must be {what}{self.by}, got {bad[0]!r} in {options!r}")

    def check_numeric(self, path: tuple[str, ...], type_: str, values: list[Any]) -> None:
        arity = 3 if type_.startswith("q") else 2
        if len(values) != arity:
            raise self.fail(path, f"{type_} needs {arity} values, got {values!r}")
        number = int if type_ == "randint" else (int, float)
        if not all(isinstance(v, number) and not isinstance(v, bool) for v in values):
            kind = "integers" if type_ == "randint" else "numbers"
            raise self.fail(path, f"{type_} needs {kind}, got {values!r}")
        if not all(math.isfinite(v) for v in values):
            raise self.fail(path, f"{type_} needs finite numbers, got {values!r}")
        if arity == 3 and values[2] <= 0:
            raise self.fail(path, f"{type_} needs q > 0, got {values!r}")
        if "normal" in type_:
            if values[1] <= 0:
                raise self.fail(path, f"{type_} needs sigma > 0, got {values!r}")
            return
        if values[0] >= values[1]:
            raise self.fail(path, f"{type_} needs high > low, got {values!r}")
        if "log" in type_ and values[0] <= 0:
            raise self.fail(path, f"{type_} needs low > 0, got {values!r}")


def sample(space: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One parameter set drawn from ``space``'s prior, as NNI's random tuner draws it."""
    specs = flatten(space)
    return to_parameters(sample_all(specs, rng), specs)


def contains(space: dict[str, Any], params: Any) -> bool:
    """Whether ``params`` is a parameter set that ``space`` can produce (keys, types and ranges)."""
    if not isinstance(params, dict):
        return False
    names = [name for name in space if name != "_name"]
    extra = set(params) - set(names) - {"_name"}
    if extra or any(name not in params for name in names):
        return False
    return all(_contains_one(space[name], params[name]) for name in names)


def outside(space: dict[str, Any], params: Any) -> str | None:
    """Why ``params`` is not a set ``space`` can produce, naming the parameter (a customized trial's check);
    None when it is. Names the space does not have are passed through, as NNI passes them to the trial."""
    if not isinstance(params, dict):
        return f"parameters must be an object, got {type(params).__name__}"
    for name in (n for n in space if n != "_name"):
        if name not in params:
            return f"{name}: missing (a parameter of the search space)"
        spec = space[name]
        if not _contains_one(spec, params[name]):
            value = json.dumps(params[name])
            value = value if len(value) <= 60 else f"{value[:57]}..."
            return (
                f"{name}: {value} is not in the search space ({spec['_type']} {json.dumps(spec['_value'])})"
            )
    return None


def _contains_one(spec: dict[str, Any], value: Any) -> bool:
    type_, values = spec["_type"], spec["_value"]
    if type_ == "choice":
        if is_nested_choice(values):
            chosen = [o for o in values if isinstance(value, dict) and o["_name"] == value.get("_name")]
            return bool(chosen) and contains(chosen[0], value)
        return any(value == option and type(value) is type(option) for option in values)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    if type_ == "randint":
        return isinstance(value, int) and math.ceil(values[0]) <= value < math.ceil(values[1])
    q = float(values[2]) if type_.startswith("q") else None
    if "normal" in type_:
        in_range = value >= 0 if "log" in type_ else True
        clipped = False
    else:
        in_range = _close_le(values[0], value) and _close_le(value, values[1])
        clipped = value in (values[0], values[1])  # q types are clipped into [low, high]
    return in_range and (q is None or clipped or _is_multiple(value, q))


def _close_le(a: float, b: float) -> bool:
    return a <= b or math.isclose(a, b, rel_tol=1e-9)


def _is_multiple(value: float, q: float) -> bool:
    return math.isclose(value / q, round(value / q), abs_tol=1e-6)
