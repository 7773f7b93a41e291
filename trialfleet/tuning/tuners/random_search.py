"""``Random``: independent draws from the search space's prior (NNI's ``random_tuner``)."""

from __future__ import annotations

from typing import Any

from trialfleet.tuning.base import RandomStreamTuner
from trialfleet.tuning.search_space.flat import ParamSpec, flatten, sample_all, to_parameters


class RandomTuner(RandomStreamTuner):
    algorithm_name = "Random"

    def __init__(self, seed: int | None = None) -> None:
        self._init_stream(seed)
        self._specs: list[ParamSpec] = []

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        return to_parameters(sample_all(self._specs, self._rng), self._specs)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        pass
