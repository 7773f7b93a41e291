"""``Batch``: runs a fixed list of parameter sets, each once, in order (NNI's ``batch_tuner``).

Its space is not the standard format: a single ``choice`` whose options are the parameter sets themselves.
"""

from __future__ import annotations

import json
from typing import Any

from trialfleet.errors import SearchSpaceError
from trialfleet.tuning.base import BuiltinTuner, NoMoreTrialError


class BatchTuner(BuiltinTuner):
    algorithm_name = "Batch"
    space_types = frozenset({"choice"})

    def __init__(self) -> None:
        self._pending: list[Any] = []

    @classmethod
    def check_search_space(cls, space: Any) -> None:
        if not isinstance(space, dict) or len(space) != 1:
            raise SearchSpaceError(
                "search space for tuner Batch must have exactly one parameter (a choice listing the parameter sets)",
                key_path="searchSpace",
            )
        name, spec = next(iter(space.items()))
        if (
            not isinstance(spec, dict)
            or spec.get("_type") != "choice"
            or not isinstance(spec.get("_value"), list)
        ):
            raise SearchSpaceError(
                f"search space parameter '{name}': tuner Batch needs a choice whose _value lists the parameter sets,"
                f" got {spec!r}",
                key_path=("searchSpace", name),
            )

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._pending = list(next(iter(search_space.values()))["_value"])

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> Any:
        if not self._pending:
            raise NoMoreTrialError("no more parameters now.")
        return self._pending.pop(0)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        pass

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        key = _canonical(parameters)
        for index, candidate in enumerate(self._pending):
            if _canonical(candidate) == key:
                del self._pending[index]
                return

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.register_proposal(None, entry["parameter"])


def _canonical(parameters: Any) -> str:
    return json.dumps(parameters, sort_keys=True)
