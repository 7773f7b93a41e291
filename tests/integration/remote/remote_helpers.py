"""Building remote-service contexts for the fleet's hosts (shared by the remote test modules)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from fleet import Host

from trialfleet import RemoteConfig, RemoteMachineConfig
from trialfleet.testing import make_context
from trialfleet.training_services.base import ExperimentContext


def machines(hosts: list[Host], **overrides: Any) -> list[RemoteMachineConfig]:
    return [RemoteMachineConfig.model_validate(host.machine(**overrides)) for host in hosts]


def remote_context(
    experiment_dir: Path,
    hosts: list[Host],
    *,
    grace: int = 60,
    experiment_id: str | None = None,
    shared_storage: dict[str, Any] | None = None,
    **options: Any,
) -> ExperimentContext:
    """A context for RemoteTrainingService with a fresh experiment id (so remote roots never collide)."""
    options.setdefault("machine_list", machines(hosts))
    if "trial_code_directory" not in options:  # uploaded at start; the trials' own code comes with each spec
        options["trial_code_directory"] = experiment_dir.parent / "configured code"
        options["trial_code_directory"].mkdir(parents=True, exist_ok=True)
    config = RemoteConfig(trial_command="unused", unreachable_grace_period=grace, **options)
    extra = {"sharedStorage": shared_storage} if shared_storage is not None else {}
    return make_context(experiment_dir, config, experiment_id or f"t{uuid.uuid4().hex[:10]}", **extra)
