"""What ``poll`` reports: trials that started, waited, reported metrics or problems, and ended."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.status import FailureKind, TrialStatus


@dataclass(frozen=True)
class TrialMetric:
    trial_id: str
    parameter_id: int | None
    type: str  # "FINAL" or "PERIODICAL"
    sequence: int
    data: str  # the value as the trial serialised it (NNI: ``nni.dump(metric)``)
    timestamp: float
    cursor: Mapping[str, Any]  # channel position just after this metric
    #: ``data`` decoded, once: by the reader that checked it (metric_channels), else here. The reconciler and the
    #: driver take it from here rather than decoding ``data`` again.
    value: Any = field(default=..., compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.value is ...:
            object.__setattr__(self, "value", json.loads(self.data))


@dataclass(frozen=True)
class TrialStarted:
    trial_id: str
    timestamp: float


@dataclass(frozen=True)
class TrialEnded:
    trial_id: str
    status: TrialStatus
    timestamp: float
    exit_code: int | None = None
    message: str | None = None  # short reason: "exit code 3", "killed by signal 9", "lost: host gone"
    failure_kind: FailureKind | None = None


@dataclass(frozen=True)
class TrialProblem:
    """Something wrong a trial did that is not fatal to the manager (malformed metric, …)."""

    trial_id: str
    message: str
    timestamp: float
    cursor: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TrialWaiting:
    """A submitted trial that the platform still queues, and why ("Resources" from Slurm), when that changed."""

    trial_id: str
    reason: str
    timestamp: float


@dataclass
class PollBatch:
    started: list[TrialStarted] = field(default_factory=list)
    metrics: list[TrialMetric] = field(default_factory=list)
    problems: list[TrialProblem] = field(default_factory=list)
    ended: list[TrialEnded] = field(default_factory=list)
    waiting: list[TrialWaiting] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.started or self.metrics or self.problems or self.ended or self.waiting)

    def extend(self, other: PollBatch) -> None:
        self.started += other.started
        self.metrics += other.metrics
        self.problems += other.problems
        self.ended += other.ended
        self.waiting += other.waiting
