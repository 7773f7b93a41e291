"""The ``TrialFiles`` seam: a platform's trial directories, read and written wherever they are.

Platforms keep each trial in a directory (docs/trial-directory.md) that the manager reaches either on this
machine (:class:`LocalTrialFiles`: local trials, a Slurm shared directory mounted here) or on another host over
SSH (:class:`ProbeTrialFiles`: remote machines, a Slurm login node), where ``probe.py`` reads every live trial's
directory in one round trip. A platform asks one question per poll — :meth:`TrialFiles.look` — and gets, per
trial, its records, whether its keeper still lives and the metrics new since its cursor.

Paths are POSIX strings as the machine holding the directories sees them. Link failures are PlatformErrors
(:class:`~.ssh.SshLinkError` when the host is unreachable): nothing was read, the next look starts from the same
cursors.
"""

from __future__ import annotations

import asyncio
import posixpath
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict

from trialfleet.training_services.base import LiveTrial
from trialfleet.training_services.events import TrialMetric, TrialProblem
from trialfleet.training_services.metric_channels import (
    MetricReader,
    channel_offsets,
    has_more,
    read_channels,
)
from trialfleet.training_services.ssh import SshHost
from trialfleet.training_services.ssh_link import Probe
from trialfleet.training_services.trial_dir import (
    KEEPER_RECORD,
    RESULT_RECORD,
    SAME_PRIVATE_FILE,
    STALE_RECORDS,
    hard_link_refused,
    inside_trial_dir,
    read_local_file,
    read_record,
    refuse_private_target,
    relative_file,
    write_trial_inputs,
)
from trialfleet.trial_keeper import keeper

MetricRead = Callable[[bool], tuple[list[TrialMetric], list[TrialProblem]]]
POLL_TIMEOUT = 30.0
POLL_BUDGET = 8 * 1024 * 1024  # metric-channel bytes per look over SSH, shared fairly among the trials
_EVERYTHING_READ = 1 << 60  # an offset past any channel: a look that only asks for the records
KEEPER_KEYS = ("keeper_pid", "keeper_start_ticks", "boot_id")  # in a handle: identify the trial's keeper


class KeeperHandle(TypedDict):
    """The keys of a handle (local, SSH hosts) that identify the trial's keeper process (:data:`KEEPER_KEYS`)."""

    keeper_pid: int
    keeper_start_ticks: int | None
    boot_id: str


class GpuKeys(TypedDict, total=False):
    gpus: list[int]  # the GPUs the platform gave the trial (none: it scheduled none)


@dataclass(frozen=True)
class TrialLook:
    """One look at a trial directory."""

    keeper_started: bool  # keeper.json exists: the command runs (or ran)
    result: Mapping[str, Any] | None  # result.json: how the trial ended
    alive: bool | None  # the keeper named in the handle still runs (None: the handle names none yet)
    more: bool  # metric bytes were left for the next look: the trial's end must wait for them
    #: the new metrics and problems, called once per look; True once the trial ended (the writer is gone, so
    #: a partial record at the end is reported rather than waited for)
    read_metrics: MetricRead


class TrialFiles(Protocol):
    """Trial directories wherever they are (see the module docstring)."""

    description: str  # for messages: "this machine", "login node alice@login1:22"

    async def write(self, trial_dir: str, files: Mapping[str, str]) -> None:
        """Create the directory with these private files, removing records an earlier launch left."""

    async def look(self, trials: Sequence[LiveTrial]) -> dict[str, TrialLook]:
        """Every trial's directory (``trial.handle["trial_dir"]``) in one go; ``trial.state`` keeps the reading."""

    async def read(self, trial_dir: str, name: str) -> bytes:
        """A file of the trial directory: ValueError when the name leads outside it, FileNotFoundError."""

    def here(self, trial_dir: str) -> Path | None:
        """The trial directory as this machine sees it, when its files can be opened here; else None."""

    async def exists(self, trial_dir: str, name: str) -> bool:
        """Whether the trial directory holds ``name`` (``keeper.json``: the trial's command started)."""

    async def ended(self, trials: Sequence[LiveTrial]) -> set[str]:
        """The ids of those trials that have result.json or whose keeper is gone."""


class LocalTrialFiles:
    """Trial directories on this machine. ``to_local`` maps a handle's trial directory to this machine's path,
    for a storage that workers mount elsewhere (:class:`~.mounted_storage.MountedStorage`)."""

    description = "this machine"

    def __init__(self, to_local: Callable[[str], Path] = Path) -> None:
        self.to_local = to_local

    async def write(self, trial_dir: str, files: Mapping[str, str]) -> None:
        await asyncio.to_thread(write_trial_inputs, self.to_local(trial_dir), files)

    async def look(self, trials: Sequence[LiveTrial]) -> dict[str, TrialLook]:
        return {trial.trial_id: self.look_one(trial) for trial in trials}

    def look_one(self, trial: LiveTrial) -> TrialLook:
        trial_dir = self.to_local(trial.handle["trial_dir"])
        reader: MetricReader = trial.state.setdefault(
            "reader", MetricReader(trial.trial_id, trial_dir, trial.cursor)
        )
        alive = _keeper_alive(trial.handle)  # before result.json: the keeper writes it and only then exits
        return TrialLook(
            keeper_started=(trial_dir / KEEPER_RECORD).exists(),
            result=read_record(trial_dir / RESULT_RECORD),
            alive=alive,
            more=False,  # a local reader reads everything once the trial ended
            read_metrics=lambda final: reader.read(final=final),
        )

    async def read(self, trial_dir: str, name: str) -> bytes:
        return await asyncio.to_thread(read_local_file, self.to_local(trial_dir), name)

    def here(self, trial_dir: str) -> Path:
        return self.to_local(trial_dir)

    async def exists(self, trial_dir: str, name: str) -> bool:
        return (self.to_local(trial_dir) / relative_file(name, trial_dir)).exists()

    async def ended(self, trials: Sequence[LiveTrial]) -> set[str]:
        return {
            t.trial_id
            for t in trials
            if (self.to_local(t.handle["trial_dir"]) / RESULT_RECORD).exists()
            or _keeper_alive(t.handle) is False
        }


def _keeper_alive(handle: Mapping[str, Any]) -> bool | None:
    if handle.get("keeper_pid") is None:
        return None
    return keeper.process_alive(
        handle["keeper_pid"], handle.get("keeper_start_ticks"), handle.get("boot_id") or ""
    )


class ProbeTrialFiles:
    """Trial directories on a host reached over SSH: ``probe.py`` reads them, SFTP serves single files."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.description = f"{probe.link.role} {probe.link.name}"

    async def write(self, trial_dir: str, files: Mapping[str, str]) -> None:
        request = {"trial_dir": trial_dir, "files": dict(files), "remove": list(STALE_RECORDS)}
        await self.probe.call("write", request)

    async def look(self, trials: Sequence[LiveTrial]) -> dict[str, TrialLook]:
        entries = [self._entry(trial) for trial in trials]
        request = {"trials": entries, "budget": POLL_BUDGET}
        answer = (await self.probe.call("poll", request, timeout=POLL_TIMEOUT))["trials"]
        return {trial.trial_id: _look(trial, answer[trial.trial_id]) for trial in trials}

    @staticmethod
    def _entry(trial: LiveTrial, *, records_only: bool = False) -> dict[str, Any]:
        offsets = trial.state.setdefault("offsets", channel_offsets(trial.cursor))
        if records_only:
            offsets = {channel: _EVERYTHING_READ for channel in offsets}
        keeper_keys = {key: trial.handle.get(key) for key in KEEPER_KEYS}
        return {"name": trial.trial_id, "dir": trial.handle["trial_dir"], **offsets, **keeper_keys}

    def here(self, trial_dir: str) -> None:
        return None  # on the host: read through SFTP

    async def read(self, trial_dir: str, name: str) -> bytes:
        relative = relative_file(name, trial_dir)

        async def read(ssh: SshHost) -> bytes:
            base = await ssh.realpath(trial_dir)
            path = await ssh.realpath(posixpath.join(trial_dir, relative))
            inside_trial_dir(base, path, name)  # a symbolic link the trial made may lead elsewhere
            refuse_private_target(base, path, name)
            same = await ssh.run(SAME_PRIVATE_FILE.format(base=shlex.quote(base), path=shlex.quote(path)))
            if same.exit_status == 0 and same.stdout.strip():
                raise hard_link_refused(name)
            return await ssh.read(path)

        return await self.probe.link.call(read)

    async def exists(self, trial_dir: str, name: str) -> bool:
        path = posixpath.join(trial_dir, relative_file(name, trial_dir))
        return (await self.probe.link.run(["test", "-e", path])).exit_status == 0

    async def ended(self, trials: Sequence[LiveTrial]) -> set[str]:
        entries = [self._entry(trial, records_only=True) for trial in trials]
        answer = (await self.probe.call("poll", {"trials": entries}, timeout=POLL_TIMEOUT))["trials"]
        started = {t.trial_id for t in trials if t.handle.get("keeper_pid") is not None}
        return {
            name
            for name, info in answer.items()
            if info["result"] is not None or (name in started and not info["alive"])
        }


def _look(trial: LiveTrial, info: dict[str, Any]) -> TrialLook:
    def read_metrics(final: bool) -> tuple[list[TrialMetric], list[TrialProblem]]:
        return read_channels(trial.trial_id, trial.state["offsets"], info, final=final)

    alive = info["alive"] if trial.handle.get("keeper_pid") is not None else None
    return TrialLook(info["keeper"] is not None, info["result"], alive, has_more(info), read_metrics)
