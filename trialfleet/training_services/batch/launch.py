"""The lines with which a batch job's launch script (sbatch script, DLTS's and OpenPAI's task scripts) runs the
trial keeper: once, for every platform that writes one."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from trialfleet.compat import REAL_NNI_PROBE
from trialfleet.training_services.environment import CHANNEL_VARIABLES


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
