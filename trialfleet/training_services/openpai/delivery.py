"""How a trial's files reach its job and come back: through the storage mounted here too, or through the relay.

:class:`MountedDelivery` (``localStorageMountPoint`` set, NNI's way): the manager writes the support bundle, the code
and each trial's inputs on the storage, and reads the trial directories there. :class:`RelayDelivery` (no
``localStorageMountPoint``): each job carries its files in its protocol (:mod:`.shipping`) and the keeper sends the
trial's outputs to the manager's relay (NNI's REST channel, on the manager's port + 1 or ``relayPort``), which
mirrors them into ``<experiment dir>/trials/<attempt>/``. Either way the manager reads a local directory per trial
(:class:`~..trial_files.LocalTrialFiles`), so metrics arrive exactly once, in order, through the same cursors.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from trialfleet.errors import CodeDirectoryError, PlatformError
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.mounted_storage import MountedStorage
from trialfleet.training_services.openpai import cluster
from trialfleet.training_services.openpai.config import OpenpaiConfig
from trialfleet.training_services.openpai.protocol import storage_check
from trialfleet.training_services.openpai.shipping import (
    PROTOCOL_LIMIT,
    PROTOCOL_MARGIN,
    ContainerPaths,
    Payload,
    unpack_commands,
)
from trialfleet.training_services.openpai.template import JobTemplate
from trialfleet.training_services.relay import Relay, manager_address, relay_port
from trialfleet.training_services.trial_dir import PARAMETER_FILE, write_trial_inputs
from trialfleet.training_services.trial_files import LocalTrialFiles
from trialfleet.trial_keeper.forwarder import INTERVAL as FORWARD_INTERVAL

log = logging.getLogger(__name__)


class Delivery(Protocol):
    paths: ContainerPaths  # where things are in the job's containers
    stop_settle: float  # how long a cancel waits before the job is stopped (see the service's _kill)

    async def prepare(self) -> None: ...

    def local_dir(self, attempt: str) -> Path:
        """Where the manager reads the trial directory of ``attempt``."""

    async def code_dir(self, source: Path) -> str:
        """The code directory ``source`` as the job's containers see it."""

    def relay_settings(self, attempt: str) -> Mapping[str, Any] | None:
        """``command.json``'s ``relay`` for the keeper (None: the keeper's files are read where it writes them)."""

    async def deliver(self, attempt: str, code_dir: Path, files: Mapping[str, str]) -> list[str]:
        """Put the trial's input files where its tasks find them; the commands each task runs first."""

    async def close(self) -> None: ...


class MountedDelivery:
    """The storage is mounted here at ``localStorageMountPoint`` and in the jobs at the template's mount."""

    stop_settle = 0.0  # what the trial wrote is on the storage already

    def __init__(self, context: ExperimentContext, config: OpenpaiConfig, template: JobTemplate) -> None:
        assert config.local_storage_mount_point is not None
        self.config, self.template = config, template
        self.storage = MountedStorage(config.local_storage_mount_point, template.mount, context.experiment_id)
        self.paths = ContainerPaths(self.storage.remote)
        self.trials = LocalTrialFiles()
        for key, value in (("nniManagerIp", config.nni_manager_ip), ("relayPort", config.relay_port)):
            if value is not None:
                log.warning("openpai: %s is not used: trials report through the storage mounted here", key)

    async def prepare(self) -> None:
        await cluster.prepare_storage(self.storage)
        await self.storage.code_dir(
            self.config.trial_code_directory
        )  # copied once, now: errors show at start

    def local_dir(self, attempt: str) -> Path:
        return self.storage.local / "trials" / attempt

    async def code_dir(self, source: Path) -> str:
        return await self.storage.code_dir(source)

    def relay_settings(self, attempt: str) -> Mapping[str, Any] | None:
        return None

    async def deliver(self, attempt: str, code_dir: Path, files: Mapping[str, str]) -> list[str]:
        await self.trials.write(str(self.local_dir(attempt)), files)
        return [storage_check(self.paths.trial_dir(attempt), self.template)]

    async def close(self) -> None:
        return None


class RelayDelivery:
    """The storage is not mounted here: jobs carry their files, keepers send theirs to the relay."""

    #: two rounds of the keeper's forwarder (it sends what is new every INTERVAL seconds) and a margin
    stop_settle = 2 * FORWARD_INTERVAL + 0.1

    def __init__(self, context: ExperimentContext, config: OpenpaiConfig, template: JobTemplate) -> None:
        self.config, self.template = config, template
        self.context = context
        self.paths = ContainerPaths(posixpath.join(template.mount, context.experiment_id))
        self.mirrors = context.experiment_dir / "trials"  # the relay's copies of the trial directories
        self.payload = Payload(self.paths)
        self.address = manager_address(config.nni_manager_ip)
        self._relay: Relay | None = None

    @property
    def relay(self) -> Relay:
        assert self._relay is not None, "the relay was not started"
        return self._relay

    async def prepare(self) -> None:
        await asyncio.to_thread(self._check_size)
        self.mirrors.mkdir(parents=True, exist_ok=True)  # with the experiment's directory, holding its secret
        port = relay_port(self.context.manager_port, self.config.relay_port)
        self._relay = Relay(self.context.experiment_dir, port=port)
        await self.relay.start()
        log.info("openpai: trials send their files to %s", self.relay.url(self.address))

    def _check_size(self) -> None:
        """Every job carries the support bundle and the code: refuse to start when that is over OpenPAI's limit."""
        source = Path(self.config.trial_code_directory)
        try:
            raw = sum(size for _, size in self.payload.code_sizes(source))
            # not worth packing when no compression could bring it under the limit
            too_big = raw > PROTOCOL_LIMIT * 20
            size = (
                raw
                if too_big
                else len(self.payload.archive(source, "size-check", {"command.json": "x" * 2048}))
            )
        except (CodeDirectoryError, OSError) as exc:
            raise PlatformError(f"openpai: cannot pack the code directory {source}: {exc}") from exc
        needed = len(self.template.role_commands) * (size + PROTOCOL_MARGIN)
        if needed > PROTOCOL_LIMIT:
            raise PlatformError(
                f"openpai: without localStorageMountPoint every job carries trialfleet's support files and the code "
                f"directory {source} in its protocol: {needed // 1024} KB{' before packing' if too_big else ''}, "
                f"over the {PROTOCOL_LIMIT // 1024} KB "
                "OpenPAI takes; mount the storage here and set localStorageMountPoint, or leave out what trials do "
                "not need with .nniignore"
            )

    def local_dir(self, attempt: str) -> Path:
        return self.mirrors / attempt

    async def code_dir(self, source: Path) -> str:
        return self.paths.code_dir(source)

    def relay_settings(self, attempt: str) -> Mapping[str, Any] | None:
        return self.relay.keeper_settings(attempt, self.address)

    async def deliver(self, attempt: str, code_dir: Path, files: Mapping[str, str]) -> list[str]:
        # the parameters here too, for read_trial_file; the keeper's own files come back through the relay
        await asyncio.to_thread(
            write_trial_inputs, self.local_dir(attempt), {PARAMETER_FILE: files[PARAMETER_FILE]}
        )
        encoded = await asyncio.to_thread(self.payload.archive, code_dir, attempt, files)
        return unpack_commands(self.paths.root, encoded, self.payload.units(code_dir, attempt))

    async def close(self) -> None:
        if self._relay is not None:
            await self._relay.close()


def delivery_for(context: ExperimentContext, config: OpenpaiConfig, template: JobTemplate) -> Delivery:
    if config.local_storage_mount_point is not None:
        return MountedDelivery(context, config, template)
    return RelayDelivery(context, config, template)
