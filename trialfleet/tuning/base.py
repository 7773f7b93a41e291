"""Tuner and assessor contracts, with NNI's method names and signatures.

Custom NNI tuners subclass these through the shim (``nni.tuner.Tuner`` is :class:`Tuner`), so nothing here may
rename or re-type an NNI method. The manager calls a tuner directly, in its own process, one call at a time:

1. ``update_search_space(space)`` once before anything else, and again on ``update searchspace``;
2. on resume, ``restore(history)`` right after the first ``update_search_space``;
3. ``generate_multiple_parameters(ids)`` (or ``generate_parameters(id)``) for free slots;
   ``NoMoreTrialError`` (or a short list) means the tuner has nothing more to propose;
4. ``receive_trial_result(id, parameters, value, customized=..., trial_job_id=...)`` with the *decoded* final
   metric (a number, or a dict with ``'default'``), then ``trial_end(id, success)`` when the trial ends.

``NoMoreTrialError`` means "nothing to propose now", as in NNI: the manager asks again when a trial ends (NNI
requests new trials on every trial end), so a tuner that waits for results (Hyperband, BOHB, PBT) goes on. Such
tuners set ``is_advisor`` when they also decide how long trials run (NNI's advisors): an assessor is then ignored.

Any other exception raised by a tuner is a tuner bug: it propagates unchanged and the manager turns it into an
experiment error with the traceback.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from trialfleet.status import TrialStatus
from trialfleet.tuning.search_space.validation import ALL_TYPES, validate_search_space
from trialfleet.tuning.utils import check_seed, derive_seed

__all__ = [
    "AssessResult",
    "Assessor",
    "HistoryRecord",
    "NoMoreTrialError",
    "Recoverable",
    "TrialCurve",
    "Tuner",
]

_logger = logging.getLogger(__name__)


class NoMoreTrialError(Exception):
    """Raised by a tuner whose search space is exhausted (NNI's ``nni.NoMoreTrialError``)."""

    def __init__(self, ErrorInfo: str = "Search space fully explored") -> None:
        super().__init__(ErrorInfo)
        self.errorinfo = ErrorInfo

    def __str__(self) -> str:
        return self.errorinfo


@dataclass(frozen=True)
class HistoryRecord:
    """One proposal of a previous run of the experiment, in submission order.

    ``parameter_id`` is None for customized trials (added by hand); ``value`` is the decoded final metric, or None
    when the trial reported none; ``status`` is a :class:`~trialfleet.status.TrialStatus` value.
    """

    parameter_id: int | None
    parameters: Any
    value: Any | None
    status: str

    @property
    def is_live(self) -> bool:
        return self.status in (TrialStatus.WAITING.value, TrialStatus.RUNNING.value)


@dataclass(frozen=True)
class TrialCurve:
    """One trial of a previous run of the experiment, for :meth:`Assessor.restore`, in submission order.

    ``intermediate`` holds the decoded intermediate results contiguous from the first (what ``assess_trial``
    would have been given last); ``status`` is a :class:`~trialfleet.status.TrialStatus` value.
    """

    trial_job_id: str
    intermediate: Sequence[Any]
    status: str

    @property
    def is_live(self) -> bool:
        return self.status in (TrialStatus.WAITING.value, TrialStatus.RUNNING.value)


class Recoverable:
    """NNI's checkpoint hooks; built-in tuners rebuild their state from :meth:`Tuner.restore` instead."""

    def load_checkpoint(self) -> None:
        _logger.info("load_checkpoint ignored, checkpoint path: %s", self.get_checkpoint_path())

    def save_checkpoint(self) -> None:
        _logger.info("save_checkpoint ignored, checkpoint path: %s", self.get_checkpoint_path())

    def get_checkpoint_path(self) -> str | None:
        path = os.getenv("NNI_CHECKPOINT_DIRECTORY")
        return path if path is not None and os.path.isdir(path) else None


class Tuner(Recoverable):
    """Proposes hyper-parameters. Subclasses override ``update_search_space``, ``receive_trial_result`` and
    ``generate_parameters`` or ``generate_multiple_parameters`` (the NNI contract, see the module docstring)."""

    #: True when :meth:`restore` registers every proposal of the history, so that the manager may still pass
    #: results of trials that were live at restore time. False for tuners written for NNI: like NNI, the manager
    #: then drops results whose parameter id the tuner never generated in this process.
    restores_live_trials: ClassVar[bool] = False
    #: True for NNI's advisors (Hyperband, BOHB): they hand each trial its budget, so an assessor is not used.
    is_advisor: ClassVar[bool] = False

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> Any:
        # NNI lets a tuner implement only the batch method; callers asking for one set still work with it
        if type(self).generate_multiple_parameters is Tuner.generate_multiple_parameters:
            raise NotImplementedError("Tuner: generate_parameters not implemented")
        result = self.generate_multiple_parameters([parameter_id], **kwargs)
        if not result:
            raise NoMoreTrialError()
        return result[0]

    def generate_multiple_parameters(self, parameter_id_list: Sequence[int], **kwargs: Any) -> list[Any]:
        result = []
        for parameter_id in parameter_id_list:
            try:
                result.append(self.generate_parameters(parameter_id, **kwargs))
            except NoMoreTrialError:
                break
        return result

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        raise NotImplementedError("Tuner: receive_trial_result not implemented")

    def receive_customized_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        """NNI's pre-2.0 hook for results of hand-added trials; kept so old tuners that override it still load."""

    def _accept_customized_trials(self, accept: bool = True) -> None:
        # NNI's switch: results of hand-added trials reach receive_trial_result only when a tuner turns this on.
        self._accept_customized = accept

    def accepts_customized(self) -> bool:
        return bool(getattr(self, "_accept_customized", False))

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        """Called once per trial when it ends; no-op by default."""

    def update_search_space(self, search_space: Any) -> None:
        raise NotImplementedError("Tuner: update_search_space not implemented")

    def import_data(self, data: list[dict[str, Any]]) -> None:
        """``data`` is a list of ``{"parameter": ..., "value": ...}``; ignored by default."""

    def restore(self, history: Sequence[HistoryRecord]) -> None:
        """Continue a resumed experiment's search from what its previous runs proposed and learned.

        The default suits tuners written for NNI: the finished results go through ``import_data``, the hook NNI
        tuners implement for resumed and imported experiments (their ``receive_trial_result`` usually rejects
        parameter ids they did not generate themselves).
        """
        data = [{"parameter": r.parameters, "value": r.value} for r in history if r.value is not None]
        if data:
            self.import_data(data)

    def _on_exit(self) -> None:
        pass

    def _on_error(self) -> None:
        pass


class BuiltinTuner(Tuner):
    """Base of trialfleet's own tuners: they declare the search-space format they handle, and :meth:`restore`
    replays the history through the normal calls."""

    restores_live_trials = True
    algorithm_name: ClassVar[str] = ""
    space_types: ClassVar[frozenset[str]] = frozenset(ALL_TYPES)
    nested_space: ClassVar[bool] = True
    numeric_choices: ClassVar[bool] = False

    @classmethod
    def check_search_space(cls, space: Any) -> None:
        """Raise SearchSpaceError if this tuner cannot search ``space``."""
        validate_search_space(
            space,
            cls.space_types,
            nested=cls.nested_space,
            numeric_choices=cls.numeric_choices,
            algorithm=cls.algorithm_name,
        )

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        """Remember a proposal of a previous run as if this tuner had generated it (so it is not proposed again
        and its result can still arrive)."""

    def reseed(self, restored: int) -> None:
        """Called by :meth:`restore` before the replay: a seeded tuner must not draw again the random numbers of
        the run it resumes (it would propose the same parameters again), so it continues on a stream of its
        own, derived from its seed and the number of restored proposals (:func:`utils.derive_seed`)."""

    def restore(self, history: Sequence[HistoryRecord]) -> None:
        if history:
            self.reseed(len(history))
        for record in history:
            customized = record.parameter_id is None
            if customized and not self.accepts_customized():
                continue
            self.register_proposal(record.parameter_id, record.parameters)
            if record.value is not None:
                self.receive_trial_result(
                    record.parameter_id, record.parameters, record.value, customized=customized
                )
            if not record.is_live:
                self.trial_end(record.parameter_id, record.status == TrialStatus.SUCCEEDED.value)


class RandomStreamTuner(BuiltinTuner):
    """A built-in tuner whose randomness is one ``random.Random`` stream seeded by its ``seed`` classArg."""

    def _init_stream(self, seed: object) -> None:
        self._seed = check_seed(seed, self.algorithm_name)
        self._rng = random.Random(self._seed)

    def reseed(self, restored: int) -> None:
        self._rng.seed(derive_seed(self._seed, restored))


class AssessResult(Enum):
    Good = True
    Bad = False


class Assessor(Recoverable):
    """Decides from a trial's intermediate results whether to stop it early.

    ``assess_trial`` is called only with a history contiguous from the first intermediate result; it returns
    ``AssessResult`` (or a bool, True meaning good). ``trial_end`` is called once when the trial ends.
    """

    def assess_trial(self, trial_job_id: str, trial_history: list[Any]) -> AssessResult | bool:
        raise NotImplementedError("Assessor: assess_trial not implemented")

    def trial_end(self, trial_job_id: str, success: bool) -> None:
        """No-op by default."""

    def restore(self, history: Sequence[TrialCurve]) -> None:
        """On resume, before any other call: rebuild what the assessor knew from the previous runs' trials.

        No-op by default, as NNI restores no assessor (assessors written for NNI have no such hook); the
        built-in assessors override it.
        """

    def _on_exit(self) -> None:
        pass

    def _on_error(self) -> None:
        pass
