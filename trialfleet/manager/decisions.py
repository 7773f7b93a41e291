"""The manager's decisions as pure functions: tests call them directly."""

from __future__ import annotations

import json
import math
import re
import secrets
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trialfleet import json_values
from trialfleet.status import ExperimentStatus, FailureKind, TrialStatus

_ID_FIRST = string.ascii_letters
_ID_REST = string.ascii_letters + string.digits


def new_trial_id() -> str:
    """NNI's trial id shape: 5 characters, a letter first."""
    return secrets.choice(_ID_FIRST) + "".join(secrets.choice(_ID_REST) for _ in range(4))


def new_experiment_id() -> str:
    """NNI's experiment id shape: 8 characters of [a-z0-9]."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def valid_experiment_id(experiment_id: str) -> bool:
    """NNI's rule for an id the user chooses: 1 to 32 letters, digits, ``_`` or ``-`` (it names a directory)."""
    return re.fullmatch(r"[A-Za-z0-9_-]{1,32}", experiment_id) is not None


@dataclass(frozen=True)
class Budget:
    max_trial_number: int | None
    max_experiment_duration: float | None  # seconds


def budget_exhausted(budget: Budget, submitted: int, exec_duration: float) -> bool:
    if budget.max_trial_number is not None and submitted >= budget.max_trial_number:
        return True
    return budget.max_experiment_duration is not None and exec_duration >= budget.max_experiment_duration


def new_trials_allowed(concurrency: int, live: int, budget: Budget, submitted: int) -> int:
    """How many new trials may be asked of the tuner now."""
    free = max(0, concurrency - live)
    if budget.max_trial_number is not None:
        free = min(free, max(0, budget.max_trial_number - submitted))
    return free


def overdue_trials(
    running: Iterable[tuple[str, float | None]], now: float, max_trial_duration: float | None
) -> list[str]:
    """Trials whose run time passed maxTrialDuration (stopped as EARLY_STOPPED, as NNI does)."""
    if max_trial_duration is None:
        return []
    return [tid for tid, start in running if start is not None and now - start > max_trial_duration]


def experiment_status_after(
    current: ExperimentStatus, *, budget_done: bool, tuner_done: bool, live_trials: int
) -> ExperimentStatus:
    """NNI's flow: RUNNING → NO_MORE_TRIAL / TUNER_NO_MORE_TRIAL → DONE once nothing is live."""
    if current in (
        ExperimentStatus.ERROR,
        ExperimentStatus.STOPPING,
        ExperimentStatus.STOPPED,
        ExperimentStatus.VIEWED,
    ):
        return current
    if budget_done or tuner_done:
        if live_trials == 0:
            return ExperimentStatus.DONE
        return ExperimentStatus.NO_MORE_TRIAL if budget_done else ExperimentStatus.TUNER_NO_MORE_TRIAL
    return ExperimentStatus.RUNNING


def should_retry(
    status: TrialStatus,
    failure_kind: str | None,
    attempt: int,
    max_retries: int,
    retry_user_errors: bool = False,
) -> bool:
    """Re-run infrastructure failures (lost host, platform kill, preemption) up to ``max_retries`` times."""
    if status is not TrialStatus.FAILED or attempt >= max_retries:
        return False
    if failure_kind == FailureKind.INFRASTRUCTURE.value:
        return True
    return retry_user_errors and failure_kind == FailureKind.USER_CODE.value


def parameter_record(
    parameter_id: int | None, parameters: object, source: str = "algorithm"
) -> dict[str, object]:
    return {
        "parameter_id": parameter_id,
        "parameter_source": source,
        "parameters": parameters,
        "parameter_index": 0,
    }


def parameters_problem(parameters: object) -> str | None:
    """Why parameters cannot be stored as standard JSON every reader handles: nested deeper than
    :data:`~trialfleet.json_values.MAX_DEPTH` or holding a NaN or infinite number; None when they can."""
    if json_values.depth(parameters) > json_values.MAX_DEPTH:
        return f"nested more than {json_values.MAX_DEPTH} levels deep"
    found = json_values.non_finite(parameters)
    if found is not None:
        where, number = found
        return f"{where or 'the value'}: {json.dumps(number)} is not a finite number (standard JSON has none)"
    return None


def customized_problem(parameters: object, search_space: dict[str, Any] | None) -> str | None:
    """Why a customized trial's parameters are refused: what :func:`parameters_problem` refuses, or, with a
    search space, a set the space cannot produce (a parameter missing, left empty or out of its range)."""
    problem = parameters_problem(parameters)
    if problem is not None or search_space is None:
        return problem
    from trialfleet.tuning.search_space import outside

    return outside(search_space, parameters)


def decode_metric(data: str) -> object:
    """The value a trial reported (``data`` is its JSON encoding)."""
    return json.loads(data)


def scalar_of(value: object) -> float | None:
    """The default metric of a decoded value, or None when it has none."""
    if isinstance(value, dict):
        value = value.get("default")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value) if math.isfinite(value) else None
    except OverflowError:  # an integer no float holds
        return None


def contiguous_history(points: dict[int, object]) -> Sequence[object] | None:
    """Intermediate results in order when they form 0..n without gaps (NNI assesses only then)."""
    n = len(points)
    if n == 0 or max(points) != n - 1:
        return None
    return [points[i] for i in range(n)]


def contiguous_prefix(points: dict[int, object]) -> list[object]:
    """The intermediate results from the first up to the first gap."""
    prefix: list[object] = []
    while len(prefix) in points:
        prefix.append(points[len(prefix)])
    return prefix
