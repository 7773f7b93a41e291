"""Building remote-service contexts for the fleet's hosts (shared by the remote test modules)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from fleet import Host
from training_service_contract import make_context

from trialfleet.config import RemoteMachineConfig
from trialfleet.training_services.base import ExperimentContext


def machines(hosts: list[Host], **overrides: Any) -> list[RemoteMachineConfig]:
    return [RemoteMachineConfig.model_validate(host.machine(**overrides)) for host in hosts]


def remote_context(
    experiment_dir: Path, hosts: list[Host], *, grace: int = 60, **options: Any
) -> ExperimentContext:
    """A context for RemoteTrainingService with a fresh experiment id (so remote roots never collide)."""
    options.setdefault("machine_list", machines(hosts))
    options.setdefault("allow_partial_fleet", False)
    experiment_id = f"t{uuid.uuid4().hex[:10]}"
    return make_context(experiment_dir, experiment_id, unreachable_grace_period=grace, **options)
