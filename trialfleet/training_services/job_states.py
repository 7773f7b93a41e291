"""What a platform's job state means to trialfleet: a status, a failure kind and a reason for messages.

Each batch platform (Slurm, OpenPAI, DLTS, Azure ML) keeps a table from its own state names to a
:class:`StateMeaning`; :func:`state_meaning` looks one up and names an unknown state in its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trialfleet.status import FailureKind, TrialStatus

INFRA, USER = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE


@dataclass(frozen=True)
class StateMeaning:
    status: TrialStatus
    failure_kind: FailureKind | None
    reason: str
    #: the platform paused or preempted the job: it would start over later, so this attempt is ended here
    paused: bool = False


def waiting(reason: str) -> StateMeaning:
    return StateMeaning(TrialStatus.WAITING, None, reason)


def running(reason: str) -> StateMeaning:
    return StateMeaning(TrialStatus.RUNNING, None, reason)


def failed(kind: FailureKind, reason: str) -> StateMeaning:
    return StateMeaning(TrialStatus.FAILED, kind, reason)


def state_meaning(table: Mapping[str, StateMeaning], state: str | None, what: str) -> StateMeaning:
    """``table[state]``; a state the table does not know is UNKNOWN, its reason naming ``what`` and the state."""
    meaning = table.get(state or "")
    return meaning or StateMeaning(TrialStatus.UNKNOWN, None, f"unknown {what} {state!r}")
