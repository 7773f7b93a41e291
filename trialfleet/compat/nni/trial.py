"""The trial API: get the parameters, report metrics, read the trial's ids.

Behaves like NNI 3.0's ``nni/trial.py`` over its legacy file channel, and is also what
``trialfleet.trial`` exports. Standard library only: this package runs on workers where nothing of
trialfleet is installed.
"""

from __future__ import annotations

import os
import sys

from ._channel import open_channel
from ._metric import encode_record, encode_value, normalize_metric

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._channel import Channel

__all__ = [
    "get_current_parameter",
    "get_experiment_id",
    "get_next_parameter",
    "get_next_parameters",
    "get_sequence_id",
    "get_trial_id",
    "report_final_result",
    "report_intermediate_result",
]

# This module is importable both as ``nni.trial`` (shim on PYTHONPATH) and as
# ``trialfleet.compat.nni.trial``; a trial using both names must still have one parameter record
# and one intermediate sequence, so the second copy adopts the first copy's state.
_TWIN_MODULES = ("nni.trial", "trialfleet.compat.nni.trial")


class _TrialState:
    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.record: dict[str, Any] | None = None
        self.delivered = False
        self.intermediate_seq = 0

    def get_channel(self) -> Channel:
        if self.channel is None:
            self.channel = open_channel()
        return self.channel

    def get_record(self) -> dict[str, Any]:
        if self.record is None:
            self.record = self.get_channel().receive_parameter()
        return self.record


def _adopt_twin_state() -> _TrialState:
    for name in _TWIN_MODULES:
        twin = sys.modules.get(name)
        state = getattr(twin, "_trialfleet_state", None) if name != __name__ else None
        if state is not None:
            return state
    return _TrialState()


_trialfleet_state = _adopt_twin_state()


def get_next_parameter() -> Any:
    """The hyper-parameters chosen for this trial (a dict, or any JSON value the tuner chose: NNI's
    BatchTuner hands out bare ones). Call it once per trial.

    As in NNI, a second call returns ``None`` when running under a manager (there is no next set),
    and ``{}`` every time when running standalone.
    """
    state = _trialfleet_state
    channel = state.get_channel()
    if state.delivered and not channel.standalone:
        return None
    if state.delivered or state.record is None:
        state.record = channel.receive_parameter()
    state.delivered = True
    return state.record["parameters"]


def get_next_parameters() -> Any:
    """Alias of :func:`get_next_parameter`."""
    return get_next_parameter()


def get_current_parameter(tag: str | None = None) -> Any:
    """The parameters last returned by :func:`get_next_parameter` (or one of them by name)."""
    record = _trialfleet_state.record
    if record is None or not _trialfleet_state.delivered:
        return None
    if tag is None:
        return record["parameters"]
    return record["parameters"][tag]


def report_intermediate_result(metric: object) -> None:
    """Report a per-epoch metric: a finite number, or a dict with a finite numeric ``'default'``."""
    state = _trialfleet_state
    _send(state, "PERIODICAL", state.intermediate_seq, metric)
    state.intermediate_seq += 1


def report_final_result(metric: object) -> None:
    """Report the trial's final metric: a finite number, or a dict with a finite numeric ``'default'``."""
    _send(_trialfleet_state, "FINAL", 0, metric)


def overwrite_intermediate_seq(value: int) -> None:
    """Set the sequence number of the next intermediate result (NNI's escape hatch for resumed trials)."""
    if not isinstance(value, int):
        raise TypeError(f"sequence must be an int, got {type(value).__name__}")
    _trialfleet_state.intermediate_seq = value


def get_experiment_id() -> str:
    """The experiment id (``NNI_EXP_ID``), ``'STANDALONE'`` outside an experiment."""
    return os.environ.get("NNI_EXP_ID") or "STANDALONE"


def get_trial_id() -> str:
    """The trial id (``NNI_TRIAL_JOB_ID``), ``'STANDALONE'`` outside an experiment."""
    return os.environ.get("NNI_TRIAL_JOB_ID") or "STANDALONE"


def get_sequence_id() -> int:
    """The trial's sequence number ("Trial No." in the web UI, ``NNI_TRIAL_SEQ_ID``), 0 standalone."""
    raw = os.environ.get("NNI_TRIAL_SEQ_ID")
    return int(raw) if raw else 0


def _send(state: _TrialState, metric_type: str, sequence: int, metric: object) -> None:
    value = encode_value(normalize_metric(metric))
    channel = state.get_channel()
    # NNI refuses to report before get_next_parameter(); reading the record here instead lets
    # such a trial still tag its metrics with the right parameter id.
    parameter_id = None if channel.standalone else state.get_record().get("parameter_id")
    record = encode_record(metric_type, parameter_id, os.environ.get("NNI_TRIAL_JOB_ID"), sequence, value)
    channel.send_metric(metric_type, record, value, sequence)
