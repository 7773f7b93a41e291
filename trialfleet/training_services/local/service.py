"""Local training service: every trial is a process tree on this machine, run by its own trial keeper.

The keeper (``trial_keeper/keeper.py``) starts detached, with its cancel signals already blocked so that a cancel
arriving while it starts is not lost: forked by the experiment's keeper spawner (:mod:`.spawner`, no interpreter
start per trial, every keeper and trial in the spawner's session), or spawned as ``python3 -I -S keeper.py`` in a
session of its own should the spawner be gone. Its exit is watched through a pidfd registered with the event
loop, which works for adopted keepers too and wakes the manager at once, so the next trial starts right after
one ends. Everything else is read from the trial directory (docs/trial-directory.md), so a new manager can adopt
trials a previous one started.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shlex
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trialfleet.compat import trial_pythonpath_env
from trialfleet.errors import PlatformError
from trialfleet.layout import log_files
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.environment import environment_change, trial_environment
from trialfleet.training_services.events import PollBatch
from trialfleet.training_services.gpu import GpuInfo, allocate_for, allocate_gpus, read_gpus
from trialfleet.training_services.gpu_leases import GpuLeases, Taken, holdings_record, machine_holdings
from trialfleet.training_services.local.config import LocalConfig
from trialfleet.training_services.local.spawner import KeeperSpawner, SpawnerError
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.shared_storage import shared_storage_for
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_command import trial_argv
from trialfleet.training_services.trial_dir import (
    COMMAND_FILE,
    KEEPER_RECORD,
    KEEPER_SCRIPT,
    LAUNCH_RECORD,
    RESULT_RECORD,
    command_record,
    ended_from_result,
    input_files,
    keeper_lost,
    read_record,
)
from trialfleet.training_services.trial_files import GpuKeys, KeeperHandle, LocalTrialFiles, TrialLook
from trialfleet.trial_keeper import keeper

log = logging.getLogger(__name__)

KILL_GRACE = 5.0
#: a keeper asked to cancel has this long to end its trial (grace, then SIGKILL and a wait for the kernel);
#: past it, it is stopped, stuck or gone astray, so the manager kills it and does its job
KEEPER_ANSWER_SECONDS = KILL_GRACE + keeper.SIGKILL_WAIT + 2
GPU_READING_MAX_AGE = 5.0
_KEEPER_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class LocalHandle(KeeperHandle, GpuKeys):
    trial_dir: str
    host: str  # "localhost"


LiveTrial = base.LiveTrial[LocalHandle]


class LocalTrainingService(TrainingService[LocalConfig, LocalHandle]):
    platform = "local"
    config_class: type[LocalConfig] = LocalConfig  # (a plugin on this platform names a subclass)
    poll_interval = 0.25
    light_preparation = True

    def __init__(
        self, context: ExperimentContext, *, gpu_reader: Callable[[], list[GpuInfo]] | None = None
    ) -> None:
        super().__init__(context)
        self.files = LocalTrialFiles()
        self._gpu_reader = gpu_reader or functools.partial(read_gpus, max_age=0)
        self._gpus: list[GpuInfo] = []
        self._gpus_read_at: float | None = None  # None: read again before the next allocation
        self._gpu_assignments: dict[str, list[int]] = {}
        self._leases: GpuLeases | None = None  # made when a trial first asks for GPUs
        self._boot_id = keeper.boot_id()
        self._children: set[int] = set()  # keepers we spawned and must reap
        self._spawner: KeeperSpawner | None = None
        self._pidfds: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._shim_env: dict[str, str] | None = None
        self.shared = shared_storage_for(context.config, context.experiment_id)

    # ---- hooks -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        # the trial's interpreter is asked whether it has the real NNI while the spawner's interpreter starts
        self._shim_env, _ = await asyncio.gather(
            asyncio.to_thread(self._shim_pythonpath), self._open_spawner()
        )
        if self.shared is not None:
            await self.shared.prepare_here()
            await self.shared.code_dir(Path(self.config.trial_code_directory))
        wanted = self.config.trial_gpu_number
        if not wanted:
            return
        gpus = await self._read_gpus()
        indices = self.config.gpu_indices  # could a trial run at all, once the GPUs are free?
        only = set(indices) if indices is not None else None
        possible = allocate_gpus(gpus, wanted, assigned={}, use_active_gpu=True, only_indices=only)
        if isinstance(possible, str):
            raise PlatformError(f"local: trialGpuNumber is {wanted}, but {possible}")

    async def _launch(self, spec: TrialSpec) -> Submitted[LocalHandle] | Deferred:
        trial_dir = (self.context.trials_dir / attempt_name(spec.trial_id, spec.attempt)).absolute()
        earlier = self._earlier_launch(spec, trial_dir)
        if earlier is not None:
            self._watch(spec.trial_id, earlier)
            return Submitted(earlier, f"local:{trial_dir}")
        taken: Taken | None = None
        if spec.gpu_number:
            choice = await self._take_gpus(spec, trial_dir.name)
            if isinstance(choice, str):
                return Deferred(f"waiting for {spec.gpu_number} free GPU(s): {choice}")
            taken = choice
        try:
            pid = await self._start_trial(spec, trial_dir, taken)
        except BaseException:
            self._release_gpus(spec.trial_id)
            raise
        gpus = taken.gpus if taken is not None else None
        handle: LocalHandle = {
            "trial_dir": str(trial_dir),
            "keeper_pid": pid,
            "keeper_start_ticks": keeper.start_ticks(pid),
            "boot_id": self._boot_id,
            "host": "localhost",
        }
        if gpus is not None:
            handle["gpus"] = gpus
        self._watch(spec.trial_id, handle)
        return Submitted(handle, f"local:{trial_dir}")

    async def _start_trial(self, spec: TrialSpec, trial_dir: Path, taken: Taken | None) -> int:
        code_dir = await self._code_dir(spec.code_dir)
        gpus, lease_files = (taken.gpus, taken.paths) if taken is not None else (None, [])
        trial_env = self._trial_env(spec, trial_dir, gpus, code_dir)
        argv = trial_argv(spec.command, str(code_dir), trial_env)
        env, unset = environment_change(trial_env, os.environ, spec.env)
        command = command_record(argv, str(code_dir), env, env_unset=unset, leases=lease_files)
        await self.files.write(str(trial_dir), input_files(spec.parameter_record, command))
        return await self._start_keeper(trial_dir)

    def _earlier_launch(self, spec: TrialSpec, trial_dir: Path) -> LocalHandle | None:
        """The handle of this attempt's keeper if an earlier manager already started it.

        A manager killed between spawning a keeper and recording its handle submits the trial again after
        restart; the keeper's own record identifies that launch, which is adopted rather than run twice.
        """
        launch = read_record(trial_dir / LAUNCH_RECORD)
        if launch is None:
            return None
        handle: LocalHandle = {
            "trial_dir": str(trial_dir),
            "keeper_pid": launch["keeper_pid"],
            "keeper_start_ticks": launch["keeper_start_ticks"],
            "boot_id": launch["boot_id"],
            "host": "localhost",
        }
        command = read_record(trial_dir / COMMAND_FILE) or {}
        visible = command.get("env", {}).get("CUDA_VISIBLE_DEVICES")
        if visible and spec.gpu_number:  # set by our allocation only then; otherwise inherited, not ours
            handle["gpus"] = [int(index) for index in visible.split(",")]
            self._gpu_assignments[spec.trial_id] = handle["gpus"]
        log.info("local: trial %s was already launched in %s; adopting it", spec.trial_id, trial_dir)
        return handle

    async def _adopt(self, trial: LiveTrial) -> None:
        trial.started = (Path(trial.handle["trial_dir"]) / KEEPER_RECORD).exists()
        if trial.handle.get("gpus") is not None:
            self._gpu_assignments[trial.trial_id] = list(trial.handle["gpus"])
        self._watch(trial.trial_id, trial.handle)
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        self._reap()
        batch = PollBatch()
        for trial in trials:
            batch.extend(self._collect_one(trial, self.files.look_one(trial)))
        return batch

    async def _kill(self, trial: LiveTrial) -> None:
        if self._keeper_alive(trial.handle):
            # the keeper ends the tree and records it; SIGCONT: a stopped keeper must act too
            keeper.send({trial.handle["keeper_pid"]}, signal.SIGTERM, signal.SIGCONT)
            trial.state.setdefault("answer_by", time.monotonic() + KEEPER_ANSWER_SECONDS)
            return
        if read_record(Path(trial.handle["trial_dir"]) / RESULT_RECORD) is None:
            self._start_cleanup(trial, canceled=True)

    async def gpu_leases(self) -> dict[str, dict[str, Any]]:
        return {"localhost": holdings_record(await asyncio.to_thread(machine_holdings))}

    async def _read_file(self, handle: LocalHandle, name: str) -> bytes:
        return await self.files.read(handle["trial_dir"], name)

    def trial_dir_here(self, handle: LocalHandle) -> Path | None:
        return self.files.here(handle["trial_dir"])

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_trials_to_end(self._keepers_gone, KEEPER_ANSWER_SECONDS)
            for trial in self.live.values():  # keepers that did not answer: nothing of theirs is left behind
                if self._keeper_alive(trial.handle):
                    keeper.send({trial.handle["keeper_pid"]}, signal.SIGKILL)
                    await asyncio.to_thread(keeper.end_without_keeper, trial.handle["trial_dir"], True, 0)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for trial_id in list(self._pidfds):
            self._unwatch(trial_id)
        if self._leases is not None:
            await asyncio.to_thread(self._leases.close)  # the keepers still running hold their own
        self._reap()
        if self._spawner is not None:
            await self._spawner.close()

    async def _keepers_gone(self, trials: list[LiveTrial]) -> list[str]:
        self._reap()
        return [trial.trial_id for trial in trials if not self._keeper_alive(trial.handle)]

    # ---- one trial -------------------------------------------------------------------------------

    def _collect_one(self, trial: LiveTrial, look: TrialLook) -> PollBatch:
        # the look's own answer, taken before it read result.json: asked again now, a keeper that wrote its
        # record and exited since would be taken for lost with the record there
        alive = bool(look.alive)
        cleanup = trial.state.get("cleanup")
        ended = None
        if alive and time.monotonic() > trial.state.get("answer_by", float("inf")):
            log.warning("trial %s: its keeper did not end it when asked; killing the keeper", trial.trial_id)
            keeper.send({trial.handle["keeper_pid"]}, signal.SIGKILL)  # the next look finds it gone
            trial.state["answer_by"] = float("inf")
        if look.result is not None:
            ended = ended_from_result(trial.trial_id, look.result, trial.cancel_status)
        elif not alive and cleanup is None and trial.cancel_status is not None:
            self._start_cleanup(trial, canceled=True)  # the keeper died before it could cancel
        elif not alive and (cleanup is None or cleanup.done()):
            ended = keeper_lost(trial.trial_id, Path(trial.handle["trial_dir"]))
            if cleanup is None:
                self._start_cleanup(trial, canceled=False)  # leave nothing of it running unwatched
        batch = PollBatch()
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
            self._forget(trial.trial_id)
        return batch

    def _start_cleanup(self, trial: LiveTrial, *, canceled: bool) -> None:
        task = asyncio.create_task(self._clean_up_after_keeper(trial.handle, canceled=canceled))
        trial.state["cleanup"] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _clean_up_after_keeper(self, handle: LocalHandle, *, canceled: bool) -> None:
        """Do the dead keeper's job: end the trial's tree and, for a cancel, write its final record."""
        await asyncio.to_thread(keeper.end_without_keeper, handle["trial_dir"], canceled, KILL_GRACE)
        self.wakeup.set()

    def _forget(self, trial_id: str) -> None:
        self._unwatch(trial_id)
        self._release_gpus(trial_id)

    def _release_gpus(self, trial_id: str) -> None:
        if self._leases is not None:
            self._leases.release(trial_id)
        if self._gpu_assignments.pop(trial_id, None) is not None:
            self._gpus_read_at = None  # its processes are gone: the next allocation sees the GPU free

    # ---- keeper processes ------------------------------------------------------------------------

    async def _open_spawner(self) -> None:
        log_dir = log_files(self.context.experiment_dir).manager.parent
        trials_dir = self.context.trials_dir.absolute()
        spawner = KeeperSpawner(trials_dir, log_dir / "keeper-spawner.log")
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            await spawner.open()
        except OSError as exc:
            log.warning("local: no keeper spawner (%s); each keeper starts its own interpreter", exc)
            return
        self._spawner = spawner

    async def _start_keeper(self, trial_dir: Path) -> int:
        if self._spawner is not None:
            try:
                return await self._spawner.start(trial_dir)
            except SpawnerError as exc:
                log.warning("local: %s; each keeper starts its own interpreter from now on", exc)
                spawner, self._spawner = self._spawner, None
                await spawner.close()
        return self._spawn_keeper(trial_dir)

    def _spawn_keeper(self, trial_dir: Path) -> int:
        argv = [sys.executable, "-I", "-S", str(KEEPER_SCRIPT), str(trial_dir)]
        log_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        file_actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(trial_dir / "keeper.log"), log_flags, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        try:
            pid = os.posix_spawn(
                sys.executable,
                argv,
                os.environ,
                file_actions=file_actions,
                setsid=True,
                setsigmask=_KEEPER_SIGNALS,
            )
        except OSError as exc:
            raise PlatformError(f"local: cannot start the trial keeper in {trial_dir}: {exc}") from exc
        self._children.add(pid)
        return pid

    def _keeper_alive(self, handle: LocalHandle) -> bool:
        if handle.get("boot_id") != self._boot_id:
            return False
        return keeper.process_alive(handle.get("keeper_pid"), handle.get("keeper_start_ticks"))

    def _watch(self, trial_id: str, handle: LocalHandle) -> None:
        try:
            fd = os.pidfd_open(handle["keeper_pid"])
        except OSError:
            return  # already gone (or no pidfd support): the next poll finds out
        # checked after opening, so the pidfd is known to refer to our keeper and not to a reused pid
        if not self._keeper_alive(handle):
            os.close(fd)
            return
        asyncio.get_running_loop().add_reader(fd, self._on_keeper_exit, trial_id)
        self._pidfds[trial_id] = fd

    def _on_keeper_exit(self, trial_id: str) -> None:
        self._unwatch(trial_id)
        self._reap()
        self.wakeup.set()

    def _unwatch(self, trial_id: str) -> None:
        fd = self._pidfds.pop(trial_id, None)
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def _reap(self) -> None:
        for pid in list(self._children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self._children.discard(pid)

    # ---- environment and GPUs --------------------------------------------------------------------

    async def _code_dir(self, code_dir: Path) -> Path:
        """Where the trial runs: in its code directory, or in the copy on the shared storage."""
        if self.shared is None:
            return code_dir
        return self.shared.storage.to_local(await self.shared.code_dir(code_dir))

    def _trial_env(
        self, spec: TrialSpec, trial_dir: Path, gpus: list[int] | None, code_dir: Path
    ) -> dict[str, str]:
        env = trial_environment(
            self.platform,
            self.context.experiment_id,
            spec,
            trial_dir=str(trial_dir),
            code_dir=str(code_dir),
            inherited=os.environ,
            gpus=gpus,
        )
        if "PYTHONPATH" not in spec.env:
            env.update(self._shim_env if self._shim_env is not None else self._shim_pythonpath())
        return env

    def _shim_pythonpath(self) -> dict[str, str]:
        """PYTHONPATH with the ``nni`` shim first, unless the trial's interpreter has the real NNI."""
        return trial_pythonpath_env(dict(os.environ), python=self._trial_python())

    def _trial_python(self) -> str | None:
        """The interpreter the trial command starts (``/venv/bin/python train.py``), asked whether it has the
        real NNI; None means this process's own."""
        try:
            program = shlex.split(self.config.trial_command)[0]
        except (ValueError, IndexError):
            return None
        if not Path(program).name.startswith("python"):
            return None
        found = shutil.which(program, path=os.environ.get("PATH")) if "/" not in program else None
        code_dir = self.config.trial_code_directory
        path = Path(code_dir, program) if "/" in program else Path(found) if found else None
        return str(path) if path is not None and os.access(path, os.X_OK) else None

    async def _take_gpus(self, spec: TrialSpec, attempt: str) -> Taken | str:
        """Choose GPUs and lease them machine-wide at once, counting every experiment's trials on them."""
        gpus = await self._read_gpus()
        ours = Counter(index for indices in self._gpu_assignments.values() for index in indices)

        def choose(count: int, assigned: Mapping[int, int], leased: Mapping[int, str]) -> list[int] | str:
            return allocate_for(self.config, gpus, count, Counter(assigned) | ours, leased)

        if self._leases is None:
            self._leases = GpuLeases(self.context.experiment_id)
        taken = await asyncio.to_thread(
            self._leases.take, spec.trial_id, attempt, spec.gpu_number or 0, choose
        )
        if isinstance(taken, Taken):
            self._gpu_assignments[spec.trial_id] = taken.gpus
        return taken

    async def _read_gpus(self) -> list[GpuInfo]:
        now = time.monotonic()
        if self._gpus_read_at is None or now - self._gpus_read_at > GPU_READING_MAX_AGE:
            self._gpus = await asyncio.to_thread(self._gpu_reader)
            self._gpus_read_at = now
        return self._gpus
