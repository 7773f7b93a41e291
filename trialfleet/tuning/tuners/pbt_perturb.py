"""PBT's explore step: NNI's ``perturbation`` for every search-space type, on internal values.

With probability ``resample_probability`` a parameter is drawn again from its prior; otherwise it moves one
step up or down (even odds), clipped to its range: a ``choice``/``randint`` to the neighbouring option, a
``uniform`` by ``factor`` of its width, a ``loguniform`` by ``factor`` of its log width, a q type by q, a
``normal`` by ``factor`` sigma (a ``lognormal`` in log space), all as NNI's ``pbt_tuner.perturbation``.
"""

from __future__ import annotations

import math
import random

from trialfleet.tuning.search_space.flat import Internal, ParamSpec, sample_internal, to_value

_TINY = 1e-10  # NNI's floor for qlognormal


def perturb(
    internal: Internal, specs: list[ParamSpec], factor: float, resample_probability: float, rng: random.Random
) -> Internal:
    result: Internal = {}
    for spec in specs:
        if spec.key not in internal:
            continue
        if rng.random() < resample_probability:
            result[spec.key] = sample_internal(spec, rng)
        else:
            result[spec.key] = _step(spec, internal[spec.key], factor, 1 if rng.random() > 0.5 else -1)
    return result


def _step(spec: ParamSpec, value: float | int, factor: float, direction: int) -> float | int:
    if spec.categorical:
        return min(max(int(value) + direction, 0), spec.size - 1)
    q = spec.q
    if q is not None:  # NNI moves the real value by q, then the internal value follows
        moved = float(to_value(spec, value)) + direction * q
        if spec.normal:
            return math.log(max(moved, _TINY)) if spec.log else moved
        low, high = float(spec.values[0]), float(spec.values[1])
        moved = min(max(moved, low), high)
        return math.log(moved) if spec.log else moved
    if spec.normal:
        return float(value) + direction * float(spec.values[1]) * factor
    low, high = spec.bounds
    return min(max(float(value) + direction * (high - low) * factor, low), high)
