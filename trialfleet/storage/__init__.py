"""Experiment storage: the per-experiment SQLite store and the machine-wide experiments manifest."""

from trialfleet.storage.store import (
    DB_RELATIVE_PATH,
    EventRow,
    ExperimentRow,
    ExperimentStore,
    MetricRow,
    NewMetric,
    TrialRow,
)

__all__ = [
    "DB_RELATIVE_PATH",
    "EventRow",
    "ExperimentRow",
    "ExperimentStore",
    "MetricRow",
    "NewMetric",
    "TrialRow",
]
