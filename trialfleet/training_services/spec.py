"""What the manager hands a training service for one trial attempt, and what ``submit`` answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

#: a platform's handle: a TypedDict of JSON values (see base.py's docstring)
H = TypeVar("H", bound=Mapping[str, Any])


@dataclass(frozen=True)
class TrialSpec:
    """Everything needed to launch one trial attempt, on any platform."""

    trial_id: str
    sequence_id: int
    command: str  # trialCommand, run with ``bash -c``
    code_dir: Path  # the user's trialCodeDirectory on the manager's machine
    parameter_record: str  # exact content of parameter.cfg (NNI ParameterRecord JSON)
    gpu_number: int | None = None  # None: no GPU scheduling, GPUs left visible; 0: CUDA_VISIBLE_DEVICES=''
    attempt: int = 0
    env: Mapping[str, str] = field(default_factory=dict)  # added to the trial's environment


@dataclass(frozen=True)
class Submitted(Generic[H]):
    handle: H  # JSON values (the platform's TypedDict); stored on the trial row
    location: str  # human readable: "local:/path/to/trial" or "host1:/path", shown as logPath
    started: bool = True  # False where the platform queues the job first (Slurm PENDING)


@dataclass(frozen=True)
class Deferred:
    reason: str  # shown to the user while the trial WAITs, e.g. "waiting for 2 free GPUs"
    #: the attempt may have started here already (a link dropped while launching it): a hybrid experiment
    #: offers it to this platform only, never to another one, which would run a second copy
    sticky: bool = False
