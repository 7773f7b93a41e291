"""Names every platform gives a trial attempt: its directory, and NNI's job name on cluster schedulers."""

from __future__ import annotations

import re

_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]+")


def attempt_name(trial_id: str, attempt: int) -> str:
    """The trial directory of one attempt: the trial id, then ``<id>.<n>`` from the second attempt on."""
    return trial_id if attempt == 0 else f"{trial_id}.{attempt}"


def nni_job_name(experiment_id: str, trial_id: str) -> str:
    """NNI's job name on a cluster, ``nni_exp_<experiment>_trial_<trial>``; ValueError for an unsafe id."""
    for what, value in (("experiment id", experiment_id), ("trial id", trial_id)):
        if not _SAFE_ID.fullmatch(value):
            raise ValueError(f"{what} {value!r} cannot be part of a job name (letters, digits, _ . -)")
    return f"nni_exp_{experiment_id}_trial_{trial_id}"
