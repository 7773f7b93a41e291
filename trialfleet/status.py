"""Trial and experiment states, with NNI's names (they appear in REST payloads and the store)."""

from __future__ import annotations

from enum import Enum


class TrialStatus(str, Enum):
    UNKNOWN = "UNKNOWN"
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    USER_CANCELED = "USER_CANCELED"
    SYS_CANCELED = "SYS_CANCELED"
    EARLY_STOPPED = "EARLY_STOPPED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_TRIAL_STATUSES

    def __str__(self) -> str:
        return self.value


TERMINAL_TRIAL_STATUSES: frozenset[TrialStatus] = frozenset(
    {
        TrialStatus.SUCCEEDED,
        TrialStatus.FAILED,
        TrialStatus.USER_CANCELED,
        TrialStatus.SYS_CANCELED,
        TrialStatus.EARLY_STOPPED,
    }
)


class ExperimentStatus(str, Enum):
    INITIALIZED = "INITIALIZED"
    RUNNING = "RUNNING"
    ERROR = "ERROR"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    DONE = "DONE"
    NO_MORE_TRIAL = "NO_MORE_TRIAL"
    TUNER_NO_MORE_TRIAL = "TUNER_NO_MORE_TRIAL"
    VIEWED = "VIEWED"

    def __str__(self) -> str:
        return self.value


class FailureKind(str, Enum):
    """Why a trial did not succeed, for the retry policy: only infrastructure failures are retried by default."""

    USER_CODE = "user_code"  # the trial command exited non-zero
    INFRASTRUCTURE = "infrastructure"  # lost host, killed by the platform, preempted, node failure
    TIMEOUT = "timeout"  # over maxTrialDuration or the platform's time limit
    CANCELED = "canceled"  # by the user, the assessor or the manager
    EXPERIMENT_STOPPED = "experiment_stopped"  # killed by ``stop``; re-run by ``resume``

    def __str__(self) -> str:
        return self.value
