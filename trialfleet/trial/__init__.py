"""The trial API for trials written against trialfleet directly.

::

    from trialfleet import trial

    params = trial.get_next_parameter()
    trial.report_intermediate_result(0.5)
    trial.report_final_result({"default": 0.9, "loss": 0.1})

The same functions as ``import nni`` (one implementation, in ``trialfleet.compat.nni.trial``): the
parameters come from the trial directory's ``parameter.cfg`` and metrics are appended to its
``.nni/metrics``; see ``docs/trial-directory.md``. Importing this module loads nothing but the
standard library's ``json`` and ``os``.
"""

from __future__ import annotations

from trialfleet.compat.nni.trial import (
    get_current_parameter,
    get_experiment_id,
    get_next_parameter,
    get_next_parameters,
    get_sequence_id,
    get_trial_id,
    overwrite_intermediate_seq,
    report_final_result,
    report_intermediate_result,
)

__all__ = [
    "get_current_parameter",
    "get_experiment_id",
    "get_next_parameter",
    "get_next_parameters",
    "get_sequence_id",
    "get_trial_id",
    "overwrite_intermediate_seq",
    "report_final_result",
    "report_intermediate_result",
]
