"""Remote training service: trials on a fleet of SSH hosts, surviving a bad network.

Everything flows over SSH from the manager (no port is opened towards it). Each host gets the stdlib trial
keeper and a probe (``trial_keeper/probe.py``) uploaded into its experiment root; every poll is one probe
round trip per host carrying all of that host's live trials and their cursors, and returning the new bytes of
their metric channels, which are parsed here by the same code as on every platform (``trial_files``).

Faults: the SSH keepalive notices a dead link within seconds; the host is then taken out of scheduling and
reconnected with back-off. Trials keep running on it meanwhile and are picked up where their cursors stopped,
so what they reported while the link was down arrives once, in order. A host unreachable for longer than
``unreachableGracePeriod`` has its trials reported FAILED (``lost: host … unreachable for N s``,
infrastructure), and the experiment goes on with the other hosts. Every SSH operation has a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import posixpath
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trialfleet.compat import trial_pythonpath_env
from trialfleet.errors import PlatformError
from trialfleet.training_services.base import (
    Deferred,
    ExperimentContext,
    LiveTrial,
    PollBatch,
    Submitted,
    TrainingService,
    TrialSpec,
)
from trialfleet.training_services.code_packing import pack_code_dir
from trialfleet.training_services.remote_machine import RemoteMachine, support_archive
from trialfleet.training_services.remote_trial_reader import channel_offsets, has_more, read_channels
from trialfleet.training_services.ssh import SshLinkError
from trialfleet.training_services.trial_files import ended_from_result, lost, write_trial_inputs

log = logging.getLogger(__name__)

DEFAULT_ROOT = "~/trialfleet"
KILL_GRACE = 5.0
SIGKILL_WAIT = 10.0
PREPARE_TIMEOUT = 600.0  # one host's whole preparation, uploads included
POLL_TIMEOUT = 20.0
POLL_BUDGET = 8 * 1024 * 1024  # metric-channel bytes per host per poll, shared fairly among its trials
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 10.0
LOG_FILES = ("trial.stdout", "trial.stderr", "trial.log", "keeper.log", "keeper.json", "result.json")
FILE_ALIASES = {"stdout": "trial.stdout", "stderr": "trial.stderr"}
#: inherited variables that would switch a real ``nni`` in the trial to another channel or mode
_CHANNEL_VARIABLES = ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS")


class RemoteTrainingService(TrainingService):
    platform = "remote"
    supports_gpu_scheduling = True
    poll_interval = 1.0

    def __init__(self, context: ExperimentContext, *, root: str | None = None) -> None:
        super().__init__(context)
        config: Any = context.service_config  # a RemoteConfig, or a stand-in with its attributes
        base = root or getattr(config, "remote_root", None) or DEFAULT_ROOT
        self.machines = [RemoteMachine(m, context.experiment_id, base) for m in config.machine_list]
        self._by_name = {machine.name: machine for machine in self.machines}
        self.grace_period = float(getattr(config, "unreachable_grace_period", 300))
        self._staging = context.experiment_dir / "remote"
        self._support = b""
        self._code: tuple[Path, Path] | None = None  # the configured code directory and its archive
        self._archives: dict[Path, Path] = {}
        self._gpu_assignments: dict[str, tuple[str, list[int]]] = {}
        self._reconnects: dict[str, asyncio.Task[None]] = {}
        self._to_kill: dict[str, list[Mapping[str, Any]]] = {}  # host → trials to end once it is back
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- preparation -------------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        self._staging.mkdir(parents=True, exist_ok=True)
        self._support = support_archive()
        code_dir = getattr(self.context.service_config, "trial_code_directory", None)
        if code_dir is not None:
            self._code = (Path(code_dir), await self._pack(Path(code_dir)))
        problems = await asyncio.gather(*(self._prepare_machine(m) for m in self.machines))
        failed = [(m, why) for m, why in zip(self.machines, problems, strict=True) if why]
        partial = bool(getattr(self.context.service_config, "allow_partial_fleet", False))
        if failed and (not partial or len(failed) == len(self.machines)):
            lines = "\n".join(f"  - {m.name}: {why}" for m, why in failed)
            raise PlatformError(
                f"remote: {len(failed)} of {len(self.machines)} machine(s) cannot be used:\n{lines}"
            )
        now = time.monotonic()
        for machine, why in failed:
            machine.mark_down(str(why), now)
            if not machine.permanent:
                self._start_reconnect(machine)
        await self._check_gpus_possible()

    async def _prepare_machine(self, machine: RemoteMachine) -> str | None:
        try:
            await asyncio.wait_for(machine.prepare(self._support, self._staging, self._code), PREPARE_TIMEOUT)
        except SshLinkError as exc:
            return _without_name(str(exc), machine)
        except TimeoutError:
            return f"preparation took longer than {PREPARE_TIMEOUT:g}s"
        except PlatformError as exc:
            machine.permanent = True
            await machine.ssh.close()
            return _without_name(str(exc), machine)
        return None

    async def _pack(self, code_dir: Path) -> Path:
        if code_dir not in self._archives:
            digest = hashlib.sha1(str(code_dir).encode()).hexdigest()[:12]
            dest = self._staging / f"code-{digest}.tar.gz"
            self._archives[code_dir] = await asyncio.to_thread(pack_code_dir, code_dir, dest)
        return self._archives[code_dir]

    async def _check_gpus_possible(self) -> None:
        wanted = getattr(self.context.service_config, "trial_gpu_number", None)
        if not wanted:
            return
        reasons = []
        for machine in (m for m in self.machines if m.ready):
            choice = machine.allocate(await machine.read_gpus(), wanted, assigned={})
            if not isinstance(choice, str):
                return
            reasons.append(f"  - {machine.name}: {choice}")
        raise PlatformError(
            f"remote: trialGpuNumber is {wanted}, but no machine can run such a trial:\n" + "\n".join(reasons)
        )

    # ---- launching ---------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        name = spec.trial_id if spec.attempt == 0 else f"{spec.trial_id}.{spec.attempt}"
        self._watch_links()
        placed = self._where_launched(name)
        if isinstance(placed, Deferred):
            return placed
        machine, gpus = placed, None
        if machine is None:
            choice = await self._choose(spec)
            if isinstance(choice, Deferred):
                return choice
            machine, gpus = choice
        try:
            return await self._start_on(machine, spec, name, gpus)
        except SshLinkError as exc:
            machine.launched.add(name)  # it may have started: the offer is answered by this host only
            self._lost_link(machine, exc)
            return Deferred(f"lost the link to {machine.name} while launching; waiting for it to come back")

    def _where_launched(self, name: str) -> RemoteMachine | Deferred | None:
        """The host this trial directory was launched on before (submit is idempotent), if any."""
        for machine in self.machines:
            if name not in machine.launched:
                continue
            if machine.ready:
                return machine
            if self._down_for(machine) >= self.grace_period:
                machine.launched.discard(name)
                continue
            return Deferred(f"waiting for {machine.name}, where this trial was launched ({machine.problem})")
        return None

    async def _choose(self, spec: TrialSpec) -> tuple[RemoteMachine, list[int] | None] | Deferred:
        """The least loaded reachable host (with enough free GPUs when trialGpuNumber is set)."""
        ready = [m for m in self.machines if m.ready]
        if not ready:
            why = "; ".join(f"{m.name}: {m.problem or 'not prepared'}" for m in self.machines)
            return Deferred(f"no machine is reachable: {why}")
        load = Counter(trial.handle.get("machine") for trial in self.live.values())
        ready.sort(key=lambda m: load[m.name])
        if not spec.gpu_number:
            return ready[0], None if spec.gpu_number is None else []
        reasons = []
        for machine in ready:
            try:
                gpus = await machine.read_gpus()
            except SshLinkError as exc:
                self._lost_link(machine, exc)
                continue
            assigned = Counter(
                i for host, ids in self._gpu_assignments.values() if host == machine.name for i in ids
            )
            choice = machine.allocate(gpus, spec.gpu_number, assigned)
            if not isinstance(choice, str):
                return machine, choice
            reasons.append(f"{machine.name}: {choice}")
        return Deferred(f"waiting for {spec.gpu_number} free GPU(s): " + "; ".join(reasons))

    async def _start_on(
        self, machine: RemoteMachine, spec: TrialSpec, name: str, gpus: list[int] | None
    ) -> Submitted:
        code = machine.code_dirs.get(spec.code_dir) or await machine.upload_code(
            spec.code_dir, await self._pack(spec.code_dir)
        )
        trial_dir = machine.trial_dir(name)
        local_dir = self.context.trials_dir / name
        env = self._trial_env(machine, spec, trial_dir, gpus)
        argv = ["/bin/bash", "-c", spec.command]
        cwd = posixpath.join(trial_dir, "code")
        write_trial_inputs(local_dir, parameter_record=spec.parameter_record, argv=argv, cwd=cwd, env=env)
        request = {
            "trial_dir": trial_dir,
            "code_dir": code,
            "keeper": posixpath.join(machine.root, "keeper", "keeper.py"),
            "files": {
                f: (local_dir / f).read_text(encoding="utf-8") for f in ("parameter.cfg", "command.json")
            },
            "record": {"gpus": gpus},
        }
        answer = await machine.probe("launch", request, timeout=120)
        machine.launched.add(name)
        gpus = answer.get("gpus", gpus)
        handle: dict[str, Any] = {
            "machine": machine.name,
            "name": name,
            "trial_dir": trial_dir,
            "keeper_pid": answer["keeper_pid"],
            "keeper_start_ticks": answer["keeper_start_ticks"],
            "boot_id": answer["boot_id"],
        }
        if gpus is not None:
            handle["gpus"] = gpus
            self._gpu_assignments[spec.trial_id] = (machine.name, list(gpus))
        return Submitted(handle, f"{machine.name}:{trial_dir}")

    def _trial_env(
        self, machine: RemoteMachine, spec: TrialSpec, trial_dir: str, gpus: list[int] | None
    ) -> dict[str, str]:
        env = {k: v for k, v in machine.env.items() if k not in _CHANNEL_VARIABLES}
        env.update(
            NNI_PLATFORM="remote",
            NNI_EXP_ID=self.context.experiment_id,
            NNI_TRIAL_JOB_ID=spec.trial_id,
            NNI_SYS_DIR=trial_dir,
            NNI_OUTPUT_DIR=trial_dir,
            NNI_TRIAL_SEQ_ID=str(spec.sequence_id),
            NNI_CODE_DIR=posixpath.join(trial_dir, "code"),
        )
        # the manager's PYTHONPATH names directories of its own machine; the host's shim replaces them
        env.update({k: v for k, v in spec.env.items() if k != "PYTHONPATH"})
        env.update(trial_pythonpath_env(env, shim_dir=machine.shim_dir(), real_nni=machine.real_nni))
        if spec.gpu_number is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus or [])
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        return env

    async def _adopt(self, trial: LiveTrial) -> None:
        trial.started = True  # the keeper was started when the handle was made
        machine = self._by_name.get(trial.handle.get("machine", ""))
        if machine is not None:
            machine.launched.add(trial.handle["name"])
        if trial.handle.get("gpus") is not None:
            self._gpu_assignments[trial.trial_id] = (trial.handle["machine"], list(trial.handle["gpus"]))
        self.wakeup.set()  # it may have ended while nobody watched

    # ---- polling -----------------------------------------------------------------------------------------

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        self._watch_links()
        groups: dict[str | None, list[LiveTrial]] = {}
        for trial in trials:
            groups.setdefault(trial.handle.get("machine"), []).append(trial)
        batch = PollBatch()
        for part in await asyncio.gather(
            *(self._collect_host(host, group) for host, group in groups.items())
        ):
            batch.extend(part)
        return batch

    async def _collect_host(self, host: str | None, trials: list[LiveTrial]) -> PollBatch:
        machine = self._by_name.get(host or "")
        if machine is None:
            return self._give_up(None, trials, f"lost: host {host} is not in machineList")
        if not machine.ready:
            return self._unreachable(machine, trials)
        request = {"trials": [self._poll_entry(t) for t in trials], "budget": POLL_BUDGET}
        try:
            answer = await machine.probe("poll", request, timeout=POLL_TIMEOUT)
        except SshLinkError as exc:
            self._lost_link(machine, exc)
            return self._unreachable(machine, trials)
        except PlatformError as exc:
            log.warning("remote: polling %s failed: %s", machine.name, exc)
            return PollBatch()
        batch = PollBatch()
        for trial in trials:
            batch.extend(await self._trial_update(machine, trial, answer["trials"][trial.handle["name"]]))
        return batch

    @staticmethod
    def _poll_entry(trial: LiveTrial) -> dict[str, Any]:
        offsets = trial.state.setdefault("offsets", channel_offsets(trial.cursor))
        handle = trial.handle
        keys = ("keeper_pid", "keeper_start_ticks", "boot_id")
        return {
            "name": handle["name"],
            "dir": handle["trial_dir"],
            **offsets,
            **{k: handle.get(k) for k in keys},
        }

    async def _trial_update(
        self, machine: RemoteMachine, trial: LiveTrial, info: Mapping[str, Any]
    ) -> PollBatch:
        result, more = info["result"], has_more(info)
        vanished = result is None and not info["alive"]
        batch = PollBatch()
        self._read_channels(trial, info, final=not more and (result is not None or vanished), batch=batch)
        if more:
            return batch
        if result is not None:
            batch.ended.append(ended_from_result(trial.trial_id, result, trial.cancel_status))
        elif vanished and "cleanup" not in trial.state:
            trial.state["cleanup"] = True
            canceled = trial.cancel_status is not None
            await self._send_kill(machine, trial.handle, canceled=canceled)  # end what is left of its tree
            if not canceled:
                batch.ended.append(lost(trial.trial_id))
        if batch.ended:
            self._ended_on(machine, trial)
        return batch

    @staticmethod
    def _read_channels(trial: LiveTrial, info: Mapping[str, Any], *, final: bool, batch: PollBatch) -> None:
        metrics, problems = read_channels(trial.trial_id, trial.state["offsets"], info, final=final)
        batch.metrics += metrics
        batch.problems += problems

    def _ended_on(self, machine: RemoteMachine | None, trial: LiveTrial) -> None:
        if self._gpu_assignments.pop(trial.trial_id, None) is not None and machine is not None:
            machine.forget_gpu_reading()  # its processes are gone: the next allocation sees the GPU free
        if machine is not None and machine.ready:
            self._spawn(
                machine.copy_trial_files(
                    trial.handle["trial_dir"], LOG_FILES, self.context.trials_dir / trial.handle["name"]
                )
            )

    # ---- faults ------------------------------------------------------------------------------------------

    def _watch_links(self) -> None:
        """Hosts whose link dropped (keepalive) leave scheduling and are reconnected in the background."""
        for machine in self.machines:
            if machine.prepared and not machine.ssh.connected and machine.down_since is None:
                self._lost_link(machine, "the connection closed (no answer to keepalives)")

    def _down_for(self, machine: RemoteMachine) -> float:
        return 0.0 if machine.down_since is None else time.monotonic() - machine.down_since

    def _unreachable(self, machine: RemoteMachine, trials: list[LiveTrial]) -> PollBatch:
        if machine.down_since is None:
            self._lost_link(machine, machine.problem or "not connected")
        down_for = self._down_for(machine)
        if down_for < self.grace_period:
            return PollBatch()
        self._to_kill.setdefault(machine.name, []).extend(t.handle for t in trials)
        return self._give_up(machine, trials, f"lost: host {machine.name} unreachable for {down_for:.0f} s")

    def _give_up(self, machine: RemoteMachine | None, trials: list[LiveTrial], message: str) -> PollBatch:
        batch = PollBatch()
        for trial in trials:
            batch.ended.append(lost(trial.trial_id, message))
            self._ended_on(machine, trial)
        return batch

    def _lost_link(self, machine: RemoteMachine, why: object) -> None:
        machine.mark_down(str(why), time.monotonic())
        self._start_reconnect(machine)

    def _start_reconnect(self, machine: RemoteMachine) -> None:
        task = self._reconnects.get(machine.name)
        if task is None or task.done():
            self._reconnects[machine.name] = asyncio.create_task(self._reconnect(machine))

    async def _reconnect(self, machine: RemoteMachine) -> None:
        delay = RECONNECT_FIRST_DELAY
        while True:
            await asyncio.sleep(delay)
            try:
                await asyncio.wait_for(
                    machine.reconnect(self._support, self._staging, self._code), PREPARE_TIMEOUT
                )
                break
            except (PlatformError, TimeoutError) as exc:
                machine.problem = str(exc) or "no answer"
                log.debug("remote: reconnecting %s failed: %s", machine.name, machine.problem)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
        machine.mark_up()
        for handle in self._to_kill.pop(machine.name, []):
            await self._send_kill(machine, handle, canceled=True)
        self.wakeup.set()

    # ---- cancel, files, shutdown -------------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        machine = self._by_name.get(trial.handle.get("machine", ""))
        if machine is not None:
            await self._send_kill(machine, trial.handle, canceled=True)

    async def _send_kill(self, machine: RemoteMachine, handle: Mapping[str, Any], *, canceled: bool) -> None:
        """SIGTERM the keeper (it ends the tree), or end the tree itself when the keeper is gone."""
        if not machine.ready:
            self._to_kill.setdefault(machine.name, []).append(handle)
            return
        keys = ("keeper_pid", "keeper_start_ticks", "boot_id")
        request = {"trial_dir": handle["trial_dir"], "canceled": canceled, "grace": KILL_GRACE}
        request.update({k: handle.get(k) for k in keys})
        try:
            await machine.probe("kill", request)
        except SshLinkError as exc:
            self._lost_link(machine, exc)
            self._to_kill.setdefault(machine.name, []).append(handle)
        except PlatformError as exc:
            log.warning("remote: cannot end trial %s on %s: %s", handle.get("name"), machine.name, exc)

    async def _read_file(self, handle: Mapping[str, Any], name: str) -> bytes:
        relative = posixpath.normpath(FILE_ALIASES.get(name, name))
        if posixpath.isabs(relative) or relative in (".", "..") or relative.startswith("../"):
            raise ValueError(f"{name!r} is not a file of the trial directory")
        machine = self._by_name.get(handle.get("machine", ""))
        if machine is not None and machine.ready:
            try:
                return await machine.read_trial_file(handle["trial_dir"], relative)
            except SshLinkError as exc:
                self._lost_link(machine, exc)
        local = self.context.trials_dir / handle["name"] / relative
        if local.is_file():
            return await asyncio.to_thread(local.read_bytes)
        raise PlatformError(f"{name}: host {handle.get('machine')} is unreachable and no copy was kept here")

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_trials_to_end(KILL_GRACE + SIGKILL_WAIT + 2)
        for task in self._reconnects.values():
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=60)
        for machine in self.machines:
            await machine.ssh.close()

    async def _wait_for_trials_to_end(self, timeout: float) -> None:
        """After a kill, wait until each reachable host says the trial's keeper wrote its end (or is gone)."""
        deadline = time.monotonic() + timeout
        waiting = {t.trial_id: t for t in self.live.values()}
        while waiting and time.monotonic() < deadline:
            for trial in list(waiting.values()):
                machine = self._by_name.get(trial.handle.get("machine", ""))
                if machine is None or not machine.ready or await self._has_ended(machine, trial):
                    waiting.pop(trial.trial_id)
            if waiting:
                await asyncio.sleep(0.1)
        if waiting:
            log.warning(
                "remote: trials %s were still running %.0f s after the cancel", sorted(waiting), timeout
            )

    async def _has_ended(self, machine: RemoteMachine, trial: LiveTrial) -> bool:
        entry = {**self._poll_entry(trial), "metrics": 1 << 60, "stdout": 1 << 60}
        with contextlib.suppress(PlatformError):
            info = (await machine.probe("poll", {"trials": [entry]}))["trials"][entry["name"]]
            return info["result"] is not None or not info["alive"]
        return True


def _without_name(message: str, machine: RemoteMachine) -> str:
    prefix = f"{machine.name}: "
    return message[len(prefix) :] if message.startswith(prefix) else message
