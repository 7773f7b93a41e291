"""What a batch job that runs the trial keeper is made of, once for every platform that writes one: the job's
record (:class:`KeeperJob`) and the lines with which its launch script (sbatch script, DLTS's and OpenPAI's task
scripts) runs the keeper."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trialfleet.compat import REAL_NNI_PROBE
from trialfleet.training_services.environment import CHANNEL_VARIABLES, job_variables
from trialfleet.training_services.spec import TrialSpec
from trialfleet.training_services.support import SupportLayout

KJ = TypeVar("KJ", bound="KeeperJob")


@dataclass(frozen=True)
class KeeperJob:
    """One trial attempt as a job that runs the keeper; paths are as the job sees them. A platform's job record
    subclasses it (its job's name, options of its own)."""

    experiment_id: str
    trial_id: str
    attempt: int
    trial_dir: str
    keeper: str  # the keeper script on the storage the job sees
    shim_dir: str  # holds the ``nni`` shim; put on PYTHONPATH unless the job's python3 has a real nni
    env: Mapping[str, str] = field(default_factory=dict)  # added to the job's environment for the trial

    @classmethod
    def of(
        cls: type[KJ],
        platform: str,
        experiment_id: str,
        spec: TrialSpec,
        where: tuple[str, str, SupportLayout],
        **options: Any,
    ) -> KJ:
        """The attempt ``spec`` as a job; ``where``: its trial directory, its code directory and the support
        bundle, as the job sees them; ``options``: the subclass's own fields."""
        trial_dir, code_dir, layout = where
        env = job_variables(platform, experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir)
        return cls(
            experiment_id=experiment_id,
            trial_id=spec.trial_id,
            attempt=spec.attempt,
            trial_dir=trial_dir,
            keeper=layout.keeper,
            shim_dir=layout.shim_dir,
            env=env,
            **options,
        )


def shim_lines(shim_dir: str) -> list[str]:
    """The channel variables unset, and the ``nni`` shim on PYTHONPATH unless ``python3`` has a real nni."""
    q = shlex.quote
    return [
        f"unset {' '.join(CHANNEL_VARIABLES)}",
        "# the nni shim only for a python3 that has no real nni installed",
        f'if [ "$(python3 -c {q(REAL_NNI_PROBE)} 2>/dev/null)" != yes ]; then',
        f'    export PYTHONPATH={q(shim_dir)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
        "fi",
    ]


def keeper_line(env: Mapping[str, str], keeper: str, trial_dir: str, *, before: str = "") -> str:
    """``env -- <env> python3 -I -S <keeper> <trial_dir>``: the keeper isolated from the user's site and path.

    ``trial_dir`` is a shell word as it stands (quote a path; ``"$task_dir"`` stays a variable), as are the
    assignments in ``before``, which come ahead of ``env``'s."""
    assignments = " ".join(shlex.quote(f"{name}={value}") for name, value in env.items())
    words = " ".join(part for part in ("env --", before, assignments) if part)
    return f"{words} python3 -I -S {shlex.quote(keeper)} {trial_dir}"
