"""Checking, creating and (re)launching experiments: shared by ``trialfleet create/resume/view`` and by
``Experiment.start/resume/view``, so both refuse the same things with the same messages, before anything
is written or started.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trialfleet.errors import ExperimentStateError, PlatformError
from trialfleet.storage import secrets

if TYPE_CHECKING:
    from trialfleet.client import ExperimentRef
    from trialfleet.config import ExperimentConfig
    from trialfleet.manager.launcher import Launched
    from trialfleet.manager.standby import StandbyManager

DEFAULT_HOST = "127.0.0.1"


def preflight(config: ExperimentConfig) -> None:
    """Refuse a config whose tuner/assessor cannot be built, whose platform is not available, or whose code
    directory the platform would refuse to upload (NNI's limits, with the message the manager would give)."""
    from trialfleet.training_services.base import get_training_service_class
    from trialfleet.training_services.code_packing import check_code_dir
    from trialfleet.tuning import check_algorithm

    _check_tuner(config)
    if config.assessor is not None:
        check_algorithm(config.assessor, "assessor")
    working_directory = Path(config.experiment_working_directory).expanduser().absolute()
    for block in config.training_services:  # a hybrid experiment: every platform of the list
        if block.platform == "local":
            continue  # runs its trials in place: ships no code, loads nothing beyond this package
        service_class = get_training_service_class(block.platform)
        refused = service_class.refusals(block)
        if refused:
            raise PlatformError("\n".join(refused))
        for code_dir in service_class.shipped_code_directories(block, working_directory):
            check_code_dir(code_dir)


def _check_tuner(config: ExperimentConfig) -> None:
    """The tuner and its search space; a search space read from searchSpaceFile is blamed on that file."""
    from trialfleet.errors import SearchSpaceError
    from trialfleet.tuning import check_algorithm

    try:
        check_algorithm(config.tuner, "tuner", config.search_space)
    except SearchSpaceError as exc:
        if config.search_space_file is None or exc.file is not None:
            raise
        inside = exc.key_path.removeprefix("searchSpace").lstrip(".")
        raise SearchSpaceError(exc.message, file=config.search_space_file, key_path=inside or None) from exc


@dataclass(frozen=True)
class NewExperiment:
    experiment_id: str
    experiment_dir: Path
    sock: socket.socket  # the manager's listening socket, bound before anything was created


@contextmanager
def created(
    config: ExperimentConfig,
    port: int,
    experiment_id: str | None = None,
    host: str = DEFAULT_HOST,
    port_option: str = "--port",
) -> Iterator[NewExperiment]:
    """Preflight, the port bound, then the experiment's directory and database: nothing is created on refusal.

    The port stays bound while the block runs, for the manager started in it to inherit (``spawn(sock=...)``):
    two ``create``s racing for one port cannot both get it. If the block fails before a manager ran the
    experiment (it is still INITIALIZED), the experiment is removed again: a failed launch leaves nothing.
    """
    from trialfleet.manager.launcher import bind_socket, create_experiment, discard_unstarted

    preflight(config)
    sock = bind_socket(port, host, port_option)
    try:
        experiment_id, experiment_dir = create_experiment(config, experiment_id)
        try:
            yield NewExperiment(experiment_id, experiment_dir, sock)
        except BaseException:
            discard_unstarted(experiment_dir)
            raise
    finally:
        sock.close()


def spawn(
    experiment_dir: Path,
    action: str,
    port: int,
    *,
    debug: bool = False,
    url_prefix: str | None = None,
    host: str = DEFAULT_HOST,
    public_read: bool = False,
    sock: socket.socket | None = None,
    standby: StandbyManager | None = None,
) -> Launched:
    """Start the detached manager process (on ``sock`` when the port is already bound; ``standby``: hand the
    experiment to this one) and wait until it answers; ``Launched.status`` is ERROR when the experiment could
    not start (``errors`` say why)."""
    from trialfleet.manager.launcher import link_latest, spawn_manager

    launched = spawn_manager(
        experiment_dir, action, port, host, debug, url_prefix or "", public_read, sock, standby
    )
    if action == "create":
        link_latest(experiment_dir)
    return launched


def check_relaunch(
    ref: ExperimentRef,
    action: Literal["resume", "view"],
    port: int,
    host: str = DEFAULT_HOST,
    port_option: str = "--port",
) -> None:
    """nnictl's rule: only a stopped experiment is resumed or viewed; a resumed one must still be runnable."""
    from trialfleet.manager.launcher import check_port_free

    if ref.running:
        raise ExperimentStateError(
            f"experiment {ref.id} is running (port {ref.entry.get('port')}); stop it before you {action} it"
        )
    if action == "resume":
        if ref.status not in ("STOPPED", "DONE", "ERROR"):
            raise ExperimentStateError(
                f"only stopped, finished or failed experiments can be resumed; experiment {ref.id} is "
                f"{ref.status} (`trialfleet view {ref.id}` shows it read-only)"
            )
        preflight(stored_config(ref, check_intact=True))
    check_port_free(port, host, port_option)


def stored_config(ref: ExperimentRef, *, check_intact: bool = False) -> ExperimentConfig:
    """The experiment's stored config; with ``check_intact``, StoreError first when its database is damaged
    (a resume never writes into a corrupt database)."""
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(ref.experiment_dir, readonly=True)
    try:
        if check_intact:
            store.check_intact()
        return secrets.manager_config(store, ref.experiment_dir)
    finally:
        store.close()
