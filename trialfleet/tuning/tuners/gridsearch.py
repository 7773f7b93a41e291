"""``GridSearch``: every combination, no duplicates, NNI's grid semantics (``gridsearch_tuner``).

``choice`` and ``randint`` are enumerated. Continuous parameters are searched in epochs of progressively finer
grids over their CDF: epoch 1 tries the median, epoch 2 adds the quartiles, epoch 3 the eighths, and so on
(the inverse normal CDF gives the points of the normal types). An interval is no longer split once its two ends
give the same real value after log, q and clip, so q types and randint-like spaces end; when nothing can be split
any more the space is exhausted and the tuner raises NoMoreTrialError.

Two deliberate differences from NNI, both for q types: a midpoint joins the grid when its real value is new
for that parameter, where NNI requires it to lie strictly between its interval's ends; and an epoch that adds
nothing splits again instead of ending the search. NNI's rules miss the values next to the ends of a q range
(``quniform [0, 10, 5]`` only ever gives 5) and values reached in a thin slice of the CDF (the top step of a
``qloguniform``); these give every value. For continuous types both give the same grid.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import Any

from trialfleet.errors import SearchSpaceError
from trialfleet.tuning.base import BuiltinTuner, NoMoreTrialError
from trialfleet.tuning.search_space.flat import Internal, ParamSpec, flatten, to_parameters, to_value
from trialfleet.tuning.utils import parse_optimize_mode

_STANDARD_NORMAL = NormalDist()
# A q value reached only within a sliver of the CDF (qloguniform's top step) needs many halvings to be found;
# intervals narrower than this are given up on, which bounds the search of a finite grid.
_MIN_WIDTH = 1e-12


class GridSearchTuner(BuiltinTuner):
    algorithm_name = "GridSearch"

    def __init__(self, optimize_mode: str | None = None) -> None:
        if optimize_mode is not None:  # accepted like NNI does, though a grid does not depend on results
            parse_optimize_mode(optimize_mode, self.algorithm_name)
        self._specs: list[ParamSpec] = []
        self._grid: list[list[float]] | None = None  # per dimension: option indexes or CDF points
        self._vector: list[int] | None = None  # per dimension: index into _grid; None = start of an epoch
        self._epoch_bar: list[int] = []  # per dimension: grid length in the previous epoch
        self._divisions: dict[int, list[tuple[float, float]]] = {}  # splittable CDF intervals
        self._used: set[str] = set()

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)
        if not self._specs:
            raise SearchSpaceError("search space for tuner GridSearch is empty", key_path="searchSpace")
        self._init_grid()

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        while True:
            internal = self._suggest()
            if internal is None:
                raise NoMoreTrialError("Search space fully explored")
            params = to_parameters(internal, self._specs)
            key = _canonical(params)
            if key not in self._used:
                self._used.add(key)
                return params

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        pass

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        self._used.add(_canonical(parameters))

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self._used.add(_canonical(entry["parameter"]))

    def _init_grid(self) -> None:
        self._vector = None
        self._epoch_bar = [0] * len(self._specs)
        self._grid = []
        self._divisions = {}
        for i, spec in enumerate(self._specs):
            if spec.categorical:
                self._grid.append(list(range(spec.size)))
            else:
                self._grid.append([0.5])
                self._divisions[i] = [(a, b) for a, b in ((0.0, 0.5), (0.5, 1.0)) if _less(a, b, spec)]

    def _suggest(self) -> Internal | None:
        while self._grid is not None:
            self._next_vector()
            if self._vector is None:
                self._next_grid()
                continue
            if all(v < bar for v, bar in zip(self._vector, self._epoch_bar, strict=True)):
                continue  # every coordinate comes from earlier epochs: already proposed
            return self._current()
        return None

    def _next_vector(self) -> None:
        assert self._grid is not None
        if self._vector is None:
            self._vector = [0] * len(self._specs)
            return
        current = self._current()
        # dimensions of nested options that are not chosen stay at 0, or every combination would repeat
        active = [i for i, spec in enumerate(self._specs) if spec.is_active(current)]
        for i in reversed(active):
            if self._vector[i] + 1 < len(self._grid[i]):
                self._vector[i] += 1
                return
            self._vector[i] = 0
        self._vector = None

    def _next_grid(self) -> None:
        """Start the next epoch: split intervals until some parameter gains a value; None when none can."""
        assert self._grid is not None
        self._epoch_bar = [len(points) for points in self._grid]
        while self._divisions and any(self._divisions.values()):
            if self._refine():
                return
        self._grid = None

    def _refine(self) -> bool:
        """Halve every splittable interval once; True when a new real value joined some parameter's grid."""
        assert self._grid is not None
        updated = False
        for i, divisions in self._divisions.items():
            spec = self._specs[i]
            seen = {_real(_cdf_inverse(point, spec), spec) for point in self._grid[i]}
            kept = []
            for low, high in divisions:
                mid = (low + high) / 2
                real = _real(_cdf_inverse(mid, spec), spec)
                if real not in seen:
                    seen.add(real)
                    self._grid[i].append(mid)
                    updated = True
                halves = (((low, mid), _less(low, mid, spec)), ((mid, high), _less(mid, high, spec)))
                kept += [half for half, splittable in halves if splittable and half[1] - half[0] > _MIN_WIDTH]
            self._divisions[i] = kept
        return updated

    def _current(self) -> Internal:
        assert self._grid is not None and self._vector is not None
        internal: Internal = {}
        for i, spec in enumerate(self._specs):
            if spec.is_active(internal):
                point = self._grid[i][self._vector[i]]
                internal[spec.key] = int(point) if spec.categorical else _cdf_inverse(point, spec)
        return internal


def _cdf_inverse(x: float, spec: ParamSpec) -> float:
    """The internal value at CDF position ``x`` of the parameter's prior."""
    if spec.normal:
        if x <= 0 or x >= 1:
            return math.copysign(math.inf, x - 0.5)
        return float(spec.values[0]) + float(spec.values[1]) * _STANDARD_NORMAL.inv_cdf(x)
    low, high = spec.bounds
    return low + (high - low) * x


def _less(x: float, y: float, spec: ParamSpec) -> bool:
    """Whether CDF positions x < y still give different real values after log, q and clip."""
    return _real(_cdf_inverse(x, spec), spec) < _real(_cdf_inverse(y, spec), spec)


def _real(internal: float, spec: ParamSpec) -> float:
    return internal if math.isinf(internal) else float(to_value(spec, internal))


def _canonical(parameters: Any) -> str:
    return json.dumps(parameters, sort_keys=True)
