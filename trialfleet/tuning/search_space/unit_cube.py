"""Numeric search spaces as points of the unit cube, for the model-based tuners (GP, Metis).

Every flat parameter is one coordinate in [0, 1]: ``uniform``/``quniform`` linearly, ``loguniform``/
``qloguniform`` on the log scale, ``randint`` by option index, and a numeric ``choice`` by the option's value
(NNI's GP and Metis treat choice options as ordered numbers: the nearest option wins). Decoding snaps the
discrete coordinates to their grid; q rounding and clipping happen in :func:`trialfleet.tuning.search_space.flat.to_value`.

numpy is imported by the caller's module only when such a tuner is built, never by ``import trialfleet.tuning``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.tuning.search_space.flat import Internal, ParamSpec

if TYPE_CHECKING:
    import numpy as np


class UnitCube:
    def __init__(self, specs: list[ParamSpec]) -> None:
        self.specs = specs
        self.dim = len(specs)

    def encode(self, internal: Internal) -> np.ndarray:
        import numpy as np

        return np.array([_encode_one(spec, internal[spec.key]) for spec in self.specs], dtype=float)

    def decode(self, x: np.ndarray) -> Internal:
        return {spec.key: _decode_one(spec, float(u)) for spec, u in zip(self.specs, x, strict=True)}

    def snap(self, x: np.ndarray) -> np.ndarray:
        """The point a trial would really run: discrete coordinates moved onto their grid."""
        import numpy as np

        return np.array(
            [_encode_one(spec, _decode_one(spec, float(u))) for spec, u in zip(self.specs, x, strict=True)]
        )

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` draws from the prior (uniform options, uniform or log-uniform ranges), snapped."""
        import numpy as np

        columns = []
        for spec in self.specs:
            if spec.categorical:
                indexes = rng.integers(0, spec.size, size=count)
                columns.append(np.array([_encode_one(spec, int(i)) for i in indexes]))
            else:
                columns.append(rng.random(count))
        return np.column_stack(columns) if columns else np.zeros((count, 0))


def _encode_one(spec: ParamSpec, value: float | int) -> float:
    if spec.type == "choice":
        low, high = min(spec.values), max(spec.values)
        return 0.5 if high == low else (float(spec.values[int(value)]) - low) / (high - low)
    if spec.type == "randint":
        return 0.5 if spec.size == 1 else int(value) / (spec.size - 1)
    low, high = spec.bounds
    return min(max((float(value) - low) / (high - low), 0.0), 1.0)


def _decode_one(spec: ParamSpec, u: float) -> float | int:
    u = min(max(u, 0.0), 1.0)
    if spec.type == "choice":
        low, high = min(spec.values), max(spec.values)
        target = low + u * (high - low)
        return min(range(spec.size), key=lambda i: abs(float(spec.values[i]) - target))
    if spec.type == "randint":
        return round(u * (spec.size - 1))
    low, high = spec.bounds
    return low + u * (high - low)
