"""The internal, flat form of an NNI search space that the built-in tuners work on (NNI's ``formatting.py``).

Each leaf of a (possibly nested) space becomes one :class:`ParamSpec` keyed by its path: ``("lr",)`` at the top
level, ``("layer", 1, "kernel")`` for ``kernel`` inside the second option of the nested choice ``layer``.
Internal values are what the algorithms sample: an option index for ``choice``/``randint``, a float in
log space for the log types, before quantisation for the q types. :func:`to_parameters` applies NNI's
transforms (index → value, exp, round to q, clip) and rebuilds the nested dict the trial receives.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

Key = tuple[str | int, ...]
Internal = dict[Key, float | int]


@dataclass(frozen=True)
class ParamSpec:
    key: Key
    type: str
    values: list[Any]

    @property
    def categorical(self) -> bool:
        return self.type in ("choice", "randint")

    @property
    def size(self) -> int:
        if self.type == "choice":
            return len(self.values)
        return math.ceil(self.values[1]) - math.ceil(self.values[0])

    @property
    def nested(self) -> bool:
        return self.type == "choice" and is_nested_choice(self.values)

    @property
    def normal(self) -> bool:
        return "normal" in self.type

    @property
    def log(self) -> bool:
        return "log" in self.type

    @property
    def q(self) -> float | None:
        return float(self.values[2]) if self.type.startswith("q") else None

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) of a uniform-family type, in log space for the log types."""
        low, high = float(self.values[0]), float(self.values[1])
        return (math.log(low), math.log(high)) if self.log else (low, high)

    def is_active(self, partial: Internal) -> bool:
        """Whether this parameter exists given the choices made so far (parents come first in the list)."""
        if len(self.key) < 2 or isinstance(self.key[-2], str):
            return True
        return partial.get(self.key[:-2]) == self.key[-2]


def is_nested_choice(options: list[Any]) -> bool:
    return bool(options) and all(isinstance(o, dict) and "_name" in o for o in options)


def flatten(space: dict[str, Any], parent: Key = ()) -> list[ParamSpec]:
    """A validated search space as a list of ParamSpec, every parent before its children."""
    specs: list[ParamSpec] = []
    for name, entry in space.items():
        if name == "_name":
            continue
        spec = ParamSpec((*parent, name), entry["_type"], list(entry["_value"]))
        specs.append(spec)
        if spec.nested:
            for index, option in enumerate(spec.values):
                specs += flatten(option, (*parent, name, index))
    return specs


def sample_internal(spec: ParamSpec, rng: random.Random) -> float | int:
    """One draw from the parameter's prior, as NNI's random tuner does it."""
    if spec.categorical:
        return rng.randrange(spec.size)
    if spec.normal:
        return rng.gauss(float(spec.values[0]), float(spec.values[1]))
    low, high = spec.bounds
    return rng.uniform(low, high)


def sample_all(specs: list[ParamSpec], rng: random.Random) -> Internal:
    internal: Internal = {}
    for spec in specs:
        if spec.is_active(internal):
            internal[spec.key] = sample_internal(spec, rng)
    return internal


def to_value(spec: ParamSpec, x: float | int) -> Any:
    """Internal value → the value the trial sees (NNI's ``deformat_parameters`` for one parameter)."""
    if spec.type == "randint":
        return math.ceil(spec.values[0]) + int(x)
    if spec.type == "choice":
        option = spec.values[int(x)]
        return option["_name"] if spec.nested else option
    value = math.exp(x) if spec.log else float(x)
    q = spec.q
    if q is not None:
        value = round(value / q) * q
    if not spec.normal:
        # clip is NNI's rule for the q types; for loguniform it only removes exp(log(high)) rounding drift
        value = min(max(value, float(spec.values[0])), float(spec.values[1]))
    return value


def from_value(spec: ParamSpec, value: Any) -> float | int:
    """The value a trial saw → an internal value (exact except for q rounding and duplicate choices)."""
    if spec.type == "randint":
        return int(value) - math.ceil(spec.values[0])
    if spec.type == "choice":
        if spec.nested:
            return [o["_name"] for o in spec.values].index(value["_name"])
        return spec.values.index(value)
    if spec.log:
        return math.log(max(float(value), 1e-300))
    return float(value)


def to_parameters(internal: Internal, specs: list[ParamSpec]) -> dict[str, Any]:
    """Internal values → the nested parameter dict a trial receives."""
    params: dict[str, Any] = {}
    for spec in specs:
        if spec.key not in internal:
            continue
        value = to_value(spec, internal[spec.key])
        names = [part for part in spec.key if isinstance(part, str)]
        target = params
        for name in names[:-1]:
            target = target.setdefault(name, {})
        if spec.nested:
            target[names[-1]] = {"_name": value}
        else:
            target[names[-1]] = value
    return params


def from_parameters(params: dict[str, Any], specs: list[ParamSpec]) -> Internal:
    """A trial's parameter dict → internal values; raises KeyError/ValueError if it does not fit the space."""
    internal: Internal = {}
    for spec in specs:
        if not spec.is_active(internal):
            continue
        value: Any = params
        for part in spec.key:
            if isinstance(part, str):
                value = value[part]
        internal[spec.key] = from_value(spec, value)
    return internal
