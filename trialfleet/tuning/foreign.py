"""Custom algorithms that do not subclass trialfleet's bases: those written against an installed real NNI
(``import nni`` then finds NNI, not the shim). They keep working behind trialfleet's contract: NNI's own
``NoMoreTrialError`` becomes ours, ``restore`` uses their ``import_data``, assess results become ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trialfleet.tuning.base import Assessor, AssessResult, NoMoreTrialError, Tuner


def _is_no_more_trial(exc: BaseException) -> bool:
    return type(exc).__name__ == "NoMoreTrialError"


class ForeignTuner(Tuner):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"ForeignTuner({self.inner!r})"

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> Any:
        try:
            return self.inner.generate_parameters(parameter_id, **kwargs)
        except Exception as exc:
            if _is_no_more_trial(exc):
                raise NoMoreTrialError(str(exc)) from exc
            raise

    def generate_multiple_parameters(self, parameter_id_list: Sequence[int], **kwargs: Any) -> list[Any]:
        return list(self.inner.generate_multiple_parameters(parameter_id_list, **kwargs))

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        self.inner.receive_trial_result(parameter_id, parameters, value, **kwargs)

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        self.inner.trial_end(parameter_id, success, **kwargs)

    def update_search_space(self, search_space: Any) -> None:
        self.inner.update_search_space(search_space)

    def import_data(self, data: list[dict[str, Any]]) -> None:
        self.inner.import_data(data)

    def accepts_customized(self) -> bool:
        return bool(getattr(self.inner, "_accept_customized", False))

    def load_checkpoint(self) -> None:
        self.inner.load_checkpoint()

    def save_checkpoint(self) -> None:
        self.inner.save_checkpoint()


class ForeignAssessor(Assessor):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"ForeignAssessor({self.inner!r})"

    def assess_trial(self, trial_job_id: str, trial_history: list[Any]) -> AssessResult:
        result = self.inner.assess_trial(trial_job_id, trial_history)
        return AssessResult(bool(getattr(result, "value", result)))

    def trial_end(self, trial_job_id: str, success: bool) -> None:
        self.inner.trial_end(trial_job_id, success)

    def load_checkpoint(self) -> None:
        self.inner.load_checkpoint()

    def save_checkpoint(self) -> None:
        self.inner.save_checkpoint()
