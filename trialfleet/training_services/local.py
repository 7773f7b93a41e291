"""Local training service: every trial is a process tree on this machine, run by its own trial keeper.

The keeper (``trial_keeper/keeper.py``) is spawned detached, in its own session, with its cancel signals
already blocked so that a cancel arriving while it starts is not lost. Its exit is watched through a pidfd
registered with the event loop, which works for adopted keepers too and wakes the manager at once, so the
next trial starts right after one ends. Everything else is read from the trial directory
(docs/trial-directory.md), so a new manager can adopt trials a previous one started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services import process_tree
from trialfleet.training_services.base import (
    Deferred,
    ExperimentContext,
    LiveTrial,
    PollBatch,
    Submitted,
    TrainingService,
    TrialSpec,
)
from trialfleet.training_services.gpu import GpuInfo, allocate_gpus, read_gpus
from trialfleet.training_services.trial_files import (
    KEEPER_SCRIPT,
    MetricReader,
    canceled_by_manager,
    ended_from_result,
    lost,
    read_record,
    write_record,
    write_trial_inputs,
)

log = logging.getLogger(__name__)

KILL_GRACE = 5.0
GPU_READING_MAX_AGE = 5.0
FILE_ALIASES = {"stdout": "trial.stdout", "stderr": "trial.stderr"}
#: inherited variables that would switch a real ``nni`` in the trial to another channel or mode
_CHANNEL_VARIABLES = ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS")
_KEEPER_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


class LocalTrainingService(TrainingService):
    platform = "local"
    supports_gpu_scheduling = True
    poll_interval = 0.25

    def __init__(
        self, context: ExperimentContext, *, gpu_reader: Callable[[], list[GpuInfo]] | None = None
    ) -> None:
        super().__init__(context)
        self._gpu_reader = gpu_reader or functools.partial(read_gpus, max_age=0)
        self._gpus: list[GpuInfo] = []
        self._gpus_read_at: float | None = None  # None: read again before the next allocation
        self._gpu_assignments: dict[str, list[int]] = {}
        self._boot_id = process_tree.read_boot_id()
        self._children: set[int] = set()  # keepers we spawned and must reap
        self._pidfds: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- hooks -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        wanted = self._option("trial_gpu_number")
        if not wanted:
            return
        gpus = await self._read_gpus()
        possible = allocate_gpus(
            gpus, wanted, assigned={}, use_active_gpu=True, only_indices=self._gpu_indices()
        )
        if isinstance(possible, str):
            raise PlatformError(f"local: trialGpuNumber is {wanted}, but {possible}")

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        name = spec.trial_id if spec.attempt == 0 else f"{spec.trial_id}.{spec.attempt}"
        trial_dir = (self.context.trials_dir / name).absolute()
        earlier = self._earlier_launch(spec, trial_dir)
        if earlier is not None:
            self._watch(spec.trial_id, earlier)
            return Submitted(earlier, f"local:{trial_dir}")
        gpus: list[int] | None = None
        if spec.gpu_number:
            choice = await self._allocate(spec.gpu_number)
            if isinstance(choice, str):
                return Deferred(f"waiting for {spec.gpu_number} free GPU(s): {choice}")
            gpus = choice
        env = self._trial_env(spec, trial_dir, gpus)
        argv = ["/bin/bash", "-c", spec.command]
        write_trial_inputs(
            trial_dir, parameter_record=spec.parameter_record, argv=argv, cwd=str(spec.code_dir), env=env
        )
        pid = self._spawn_keeper(trial_dir)
        handle: dict[str, Any] = {
            "trial_dir": str(trial_dir),
            "keeper_pid": pid,
            "keeper_start_ticks": process_tree.start_ticks(pid),
            "boot_id": self._boot_id,
            "host": "localhost",
        }
        if gpus is not None:
            handle["gpus"] = gpus
            self._gpu_assignments[spec.trial_id] = gpus
        self._watch(spec.trial_id, handle)
        return Submitted(handle, f"local:{trial_dir}")

    def _earlier_launch(self, spec: TrialSpec, trial_dir: Path) -> dict[str, Any] | None:
        """The handle of this attempt's keeper if an earlier manager already started it.

        A manager killed between spawning a keeper and recording its handle submits the trial again after
        restart; the keeper's own record identifies that launch, which is adopted rather than run twice.
        """
        keeper = read_record(trial_dir / "launch.json")
        if keeper is None:
            return None
        handle: dict[str, Any] = {
            "trial_dir": str(trial_dir),
            "keeper_pid": keeper["keeper_pid"],
            "keeper_start_ticks": keeper["keeper_start_ticks"],
            "boot_id": keeper["boot_id"],
            "host": "localhost",
        }
        command = read_record(trial_dir / "command.json") or {}
        visible = command.get("env", {}).get("CUDA_VISIBLE_DEVICES")
        if visible and spec.gpu_number:  # set by our allocation only then; otherwise inherited, not ours
            handle["gpus"] = [int(index) for index in visible.split(",")]
            self._gpu_assignments[spec.trial_id] = handle["gpus"]
        log.info("local: trial %s was already launched in %s; adopting it", spec.trial_id, trial_dir)
        return handle

    async def _adopt(self, trial: LiveTrial) -> None:
        trial_dir = Path(trial.handle["trial_dir"])
        trial.started = (trial_dir / "keeper.json").exists()
        if trial.handle.get("gpus") is not None:
            self._gpu_assignments[trial.trial_id] = list(trial.handle["gpus"])
        self._watch(trial.trial_id, trial.handle)
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        self._reap()
        batch = PollBatch()
        for trial in trials:
            batch.extend(self._collect_one(trial))
        return batch

    async def _kill(self, trial: LiveTrial) -> None:
        if self._keeper_alive(trial.handle):
            with contextlib.suppress(ProcessLookupError):
                os.kill(trial.handle["keeper_pid"], signal.SIGTERM)  # the keeper ends the tree and records it
            return
        if read_record(Path(trial.handle["trial_dir"]) / "result.json") is None:
            self._start_cleanup(trial, canceled=True)

    async def _read_file(self, handle: Mapping[str, Any], name: str) -> bytes:
        trial_dir = Path(handle["trial_dir"]).resolve()
        path = (trial_dir / FILE_ALIASES.get(name, name)).resolve()
        if not path.is_relative_to(trial_dir):
            raise ValueError(f"{name!r} is not a file of the trial directory {trial_dir}")
        return await asyncio.to_thread(path.read_bytes)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_keepers(KILL_GRACE + process_tree.SIGKILL_WAIT + 2)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for trial_id in list(self._pidfds):
            self._unwatch(trial_id)
        self._reap()

    # ---- one trial -------------------------------------------------------------------------------

    def _collect_one(self, trial: LiveTrial) -> PollBatch:
        trial_dir = Path(trial.handle["trial_dir"])
        if "reader" not in trial.state:
            trial.state["reader"] = MetricReader(trial.trial_id, trial_dir, trial.cursor)
        # liveness first: the keeper writes result.json and only then exits
        alive = self._keeper_alive(trial.handle)
        result = read_record(trial_dir / "result.json")
        cleanup = trial.state.get("cleanup")
        ended = None
        if result is not None:
            ended = ended_from_result(trial.trial_id, result, trial.cancel_status)
        elif not alive and cleanup is None and trial.cancel_status is not None:
            self._start_cleanup(trial, canceled=True)  # the keeper died before it could cancel
        elif not alive and (cleanup is None or cleanup.done()):
            ended = lost(trial.trial_id)
            if cleanup is None:
                self._start_cleanup(trial, canceled=False)  # leave nothing of it running unwatched
        batch = PollBatch()
        batch.metrics, batch.problems = trial.state["reader"].read(final=ended is not None)
        if ended is not None:
            batch.ended.append(ended)
            self._forget(trial.trial_id)
        return batch

    def _start_cleanup(self, trial: LiveTrial, *, canceled: bool) -> None:
        task = asyncio.create_task(self._clean_up_after_keeper(trial.handle, canceled=canceled))
        trial.state["cleanup"] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _clean_up_after_keeper(self, handle: Mapping[str, Any], *, canceled: bool) -> None:
        """Do the dead keeper's job: end the trial's tree and, for a cancel, write its final record."""
        trial_dir = Path(handle["trial_dir"])
        keeper = read_record(trial_dir / "keeper.json") or {}
        if keeper.get("pid") and keeper.get("boot_id") == self._boot_id:
            await process_tree.kill_trial_tree(keeper["pid"], keeper.get("start_ticks"), KILL_GRACE)
        if canceled and read_record(trial_dir / "result.json") is None:
            write_record(trial_dir / "result.json", canceled_by_manager())
        self.wakeup.set()

    def _forget(self, trial_id: str) -> None:
        self._unwatch(trial_id)
        if self._gpu_assignments.pop(trial_id, None) is not None:
            self._gpus_read_at = None  # its processes are gone: the next allocation sees the GPU free

    # ---- keeper processes ------------------------------------------------------------------------

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

    def _keeper_alive(self, handle: Mapping[str, Any]) -> bool:
        if handle.get("boot_id") != self._boot_id:
            return False
        return process_tree.is_running(handle.get("keeper_pid"), handle.get("keeper_start_ticks"))

    def _watch(self, trial_id: str, handle: Mapping[str, Any]) -> None:
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

    async def _wait_for_keepers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap()
            if not any(self._keeper_alive(trial.handle) for trial in self.live.values()):
                return
            await asyncio.sleep(0.05)
        log.warning("local: some trial keepers were still running %.0f s after the cancel", timeout)

    # ---- environment and GPUs --------------------------------------------------------------------

    def _trial_env(self, spec: TrialSpec, trial_dir: Path, gpus: list[int] | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _CHANNEL_VARIABLES}
        env.update(
            NNI_PLATFORM="local",
            NNI_EXP_ID=self.context.experiment_id,
            NNI_TRIAL_JOB_ID=spec.trial_id,
            NNI_SYS_DIR=str(trial_dir),
            NNI_OUTPUT_DIR=str(trial_dir),
            NNI_TRIAL_SEQ_ID=str(spec.sequence_id),
            NNI_CODE_DIR=str(spec.code_dir),
        )
        env.update(spec.env)
        if spec.gpu_number is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus or [])
            # NVML numbers GPUs by PCI bus; CUDA's default order may differ on mixed machines
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        return env

    async def _allocate(self, count: int) -> list[int] | str:
        gpus = await self._read_gpus()
        assigned = Counter(index for indices in self._gpu_assignments.values() for index in indices)
        return allocate_gpus(
            gpus,
            count,
            assigned=assigned,
            max_trials_per_gpu=self._option("max_trial_number_per_gpu") or 1,
            use_active_gpu=bool(self._option("use_active_gpu")),
            only_indices=self._gpu_indices(),
        )

    async def _read_gpus(self) -> list[GpuInfo]:
        now = time.monotonic()
        if self._gpus_read_at is None or now - self._gpus_read_at > GPU_READING_MAX_AGE:
            self._gpus = await asyncio.to_thread(self._gpu_reader)
            self._gpus_read_at = now
        return self._gpus

    def _option(self, name: str) -> Any:
        return getattr(self.context.service_config, name, None)

    def _gpu_indices(self) -> set[int] | None:
        indices = self._option("gpu_indices")
        if indices is None:
            return None
        if isinstance(indices, int):
            return {indices}
        if isinstance(indices, str):
            return {int(part) for part in indices.split(",") if part.strip()}
        return {int(index) for index in indices if isinstance(index, (int, str))}
