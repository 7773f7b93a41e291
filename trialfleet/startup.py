"""Checking, creating and (re)launching experiments: shared by ``trialfleet create/resume/view`` and by
``Experiment.start/resume/view``, so both refuse the same things with the same messages, before anything
is written or started.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trialfleet.errors import ExperimentStateError, PlatformNotAvailableError
from trialfleet.storage import secrets

if TYPE_CHECKING:
    from trialfleet.client import ExperimentRef
    from trialfleet.config import ExperimentConfig
    from trialfleet.manager.launcher import Launched

DEFAULT_HOST = "127.0.0.1"


def platform_of(config: ExperimentConfig) -> str:
    services = config.training_service
    return "hybrid" if isinstance(services, list) else str(services.platform)


def preflight(config: ExperimentConfig) -> None:
    """Refuse a config whose tuner/assessor cannot be built or whose platform is not available."""
    from trialfleet.training_services.registry import get_training_service_class
    from trialfleet.tuning import check_algorithm

    check_algorithm(config.tuner, "tuner", config.search_space)
    if config.assessor is not None:
        check_algorithm(config.assessor, "assessor")
    if isinstance(config.training_service, list):
        raise PlatformNotAvailableError(
            "hybrid experiments (trainingService as a list) are not available yet in this trialfleet version"
        )
    get_training_service_class(config.training_service.platform)


def create_checked(
    config: ExperimentConfig, port: int, experiment_id: str | None = None, host: str = DEFAULT_HOST
) -> tuple[str, Path]:
    """Preflight, port check, then the experiment's directory and database: nothing is created on refusal."""
    from trialfleet.manager.launcher import check_port_free, create_experiment

    preflight(config)
    check_port_free(port, host)
    return create_experiment(config, experiment_id)


def spawn(
    experiment_dir: Path,
    action: str,
    port: int,
    *,
    debug: bool = False,
    url_prefix: str | None = None,
    host: str = DEFAULT_HOST,
    public_read: bool = False,
) -> Launched:
    """Start the detached manager process and wait until it answers."""
    from trialfleet.manager.launcher import spawn_manager

    return spawn_manager(experiment_dir, action, port, host, debug, url_prefix or "", public_read)


def check_relaunch(
    ref: ExperimentRef, action: Literal["resume", "view"], port: int, host: str = DEFAULT_HOST
) -> None:
    """nnictl's rule: only a stopped experiment is resumed or viewed; a resumed one must still be runnable."""
    from trialfleet.manager.launcher import check_port_free

    if ref.running:
        raise ExperimentStateError(
            f"experiment {ref.id} is running (port {ref.entry.get('port')}); stop it before you {action} it"
        )
    if action == "resume":
        if ref.status not in ("STOPPED", "DONE"):
            raise ExperimentStateError(
                f"only stopped or finished experiments can be resumed; experiment {ref.id} is {ref.status} "
                f"(`trialfleet view {ref.id}` shows it read-only)"
            )
        preflight(stored_config(ref))
    check_port_free(port, host)


def stored_config(ref: ExperimentRef) -> ExperimentConfig:
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(ref.experiment_dir, readonly=True)
    try:
        return secrets.manager_config(store, ref.experiment_dir)
    finally:
        store.close()
