"""Remote training service: trials on a fleet of SSH hosts, surviving a bad network.

Everything flows over SSH from the manager (no port is opened towards it). Each host gets the support bundle
(the stdlib trial keeper, the probe and the ``nni`` shim) in its experiment root, and runs one long-lived probe
over the open link (:mod:`.runner`). Every poll is one round trip to it per host, carrying all of that host's live
trials and their cursors and returning the new bytes of their metric channels, which are parsed here by the same
code as on every platform (:mod:`..trial_files`); and it reports each trial's end the moment the keeper writes it,
so the manager polls then rather than at its next tick.

Faults: the SSH keepalive notices a dead link within seconds; the host is then taken out of scheduling and
reconnected with back-off (:class:`~..ssh_link.SshLink`). Trials keep running on it meanwhile and are picked up
where their cursors stopped, so what they reported while the link was down arrives once, in order. A host
unreachable for longer than ``unreachableGracePeriod`` has its trials reported FAILED (``lost: host …
unreachable for N s``, infrastructure), and the experiment goes on with the other hosts. Every SSH operation
has a timeout.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import posixpath
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from trialfleet.compat import trial_pythonpath_env
from trialfleet.errors import PlatformError
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.code_packing import pack_code_dir
from trialfleet.training_services.environment import environment_change, trial_environment
from trialfleet.training_services.events import PollBatch
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.remote.config import RemoteConfig
from trialfleet.training_services.remote.machine import RemoteMachine
from trialfleet.training_services.shared_storage import shared_storage_for
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.ssh import SshLinkError
from trialfleet.training_services.trial_dir import (
    LOG_FILES,
    command_record,
    ended_from_result,
    input_files,
    lost,
    relative_file,
    write_trial_inputs,
)
from trialfleet.training_services.trial_files import KEEPER_KEYS, GpuKeys, KeeperHandle, TrialLook
from trialfleet.trial_keeper.keeper import SIGKILL_WAIT

if TYPE_CHECKING:
    pass

T = TypeVar("T")

log = logging.getLogger(__name__)

KILL_GRACE = 5.0
PREPARE_TIMEOUT = 600.0  # one host's whole preparation, uploads included
LOG_COPY_DELAY = 0.3  # an ended trial's logs are copied to the manager this long after its end is seen


class RemoteHandle(KeeperHandle, GpuKeys):
    machine: str  # the host's name
    name: str  # the attempt's name (its directory's)
    trial_dir: str  # on the host


LiveTrial = base.LiveTrial[RemoteHandle]


class RemoteTrainingService(TrainingService[RemoteConfig, RemoteHandle]):
    platform = "remote"
    config_class = RemoteConfig
    poll_interval = 1.0
    ships_code = True  # packed and uploaded to every host
    concurrent_submits = True  # a launch reserves its host and GPUs before its first wait
    preload_modules = ("asyncssh",)  # its import (~0.2 s) is the first thing connecting to the hosts does

    @classmethod
    def refusals(cls, service_config: RemoteConfig) -> list[str]:
        from trialfleet.training_services.remote.placeholders import fleet_refusals

        return fleet_refusals(service_config)

    def __init__(self, context: ExperimentContext, *, root: str | None = None) -> None:
        super().__init__(context)
        base = root or self.config.remote_root
        self.shared = shared_storage_for(context.config, context.experiment_id)
        reuse = self.config.reuse_mode
        self.machines = [
            RemoteMachine(
                m, context.experiment_id, base, self.shared, on_ended=self._ended_on_host, reuse=reuse
            )
            for m in self.config.machine_list
        ]
        for machine in self.machines:
            machine.link.on_up = functools.partial(self._back_up, machine)
        self._by_name = {machine.name: machine for machine in self.machines}
        self.grace_period = float(self.config.unreachable_grace_period)
        self._staging = context.experiment_dir / "remote"
        self._code: tuple[Path, Path] | None = None  # the configured code directory and its archive
        self._archives: dict[Path, Path] = {}
        self._shared_code: dict[Path, str] = {}  # code directory → its copy, relative to the storage's mount
        self._gpu_assignments: dict[str, tuple[str, list[int]]] = {}  # trial → host and GPUs, once chosen
        self._launching: dict[str, str] = {}  # trial directory → the host launching it: counted as its load
        self._once_running: dict[tuple[str, str, Path], asyncio.Future[Any]] = {}  # see _once
        self._to_kill: dict[str, list[RemoteHandle]] = {}  # host → trials to end once it is back
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- preparation -------------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        self._staging.mkdir(parents=True, exist_ok=True)
        code_dir = Path(self.config.trial_code_directory)
        if self.shared is not None:  # the code goes on the storage once; hosts read it from their mount
            await self.shared.prepare_here()
            self._shared_code[code_dir] = await self.shared.code_dir(code_dir)
        else:
            self._code = (code_dir, await self._pack(code_dir))
        problems = await asyncio.gather(*(self._prepare_machine(m) for m in self.machines))
        failed = [(m, why) for m, why in zip(self.machines, problems, strict=True) if why]
        if failed and (not self.config.allow_partial_fleet or len(failed) == len(self.machines)):
            lines = "\n".join(f"  - {m.name}: {why}" for m, why in failed)
            raise PlatformError(
                f"remote: {len(failed)} of {len(self.machines)} machine(s) cannot be used:\n{lines}"
            )
        for machine, why in failed:
            machine.link.mark_down(str(why))
        await self._check_gpus_possible()

    async def _prepare_machine(self, machine: RemoteMachine) -> str | None:
        try:
            await asyncio.wait_for(machine.prepare(self._code), PREPARE_TIMEOUT)
        except SshLinkError as exc:
            return _without_name(str(exc), machine)
        except TimeoutError:
            return f"preparation took longer than {PREPARE_TIMEOUT:g}s"
        except PlatformError as exc:
            machine.link.permanent = True
            await machine.close()
            return _without_name(str(exc), machine)
        return None

    async def _pack(self, code_dir: Path) -> Path:
        if code_dir not in self._archives:
            digest = hashlib.sha1(str(code_dir).encode()).hexdigest()[:12]
            dest = self._staging / f"code-{digest}.tar.gz"
            packing = asyncio.to_thread(pack_code_dir, code_dir, dest)
            self._archives[code_dir] = await self._once(("pack", "", code_dir), packing)
        return self._archives[code_dir]

    async def _check_gpus_possible(self) -> None:
        wanted = self.config.trial_gpu_number
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

    async def gpu_leases(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for machine in (m for m in self.machines if m.ready):
            try:
                found[machine.name] = await machine.gpu_leases()
            except (SshLinkError, PlatformError) as exc:
                log.info("remote: %s: no lease reading (%s)", machine.name, exc)
        return found

    def unavailable(self) -> str | None:
        if any(machine.ready for machine in self.machines):
            return None
        return "no machine is reachable: " + "; ".join(
            f"{m.name}: {m.link.problem or 'not prepared'}" for m in self.machines
        )

    # ---- launching ---------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[RemoteHandle] | Deferred:
        name = attempt_name(spec.trial_id, spec.attempt)
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
        self._launching[name] = machine.name
        launched = False
        try:
            result = await self._start_on(machine, spec, name, gpus)
            launched = isinstance(result, Submitted)
            return result
        except SshLinkError:
            machine.launched.add(name)  # it may have started: the offer is answered by this host only
            why = f"lost the link to {machine.name} while launching; waiting for it to come back"
            return Deferred(why, sticky=True)
        finally:
            self._launching.pop(name, None)
            if not launched:
                self._gpu_assignments.pop(spec.trial_id, None)  # its reservation, made by the choice

    def _where_launched(self, name: str) -> RemoteMachine | Deferred | None:
        """The host this trial directory was launched on before (submit is idempotent), if any."""
        for machine in self.machines:
            if name not in machine.launched:
                continue
            if machine.ready:
                return machine
            if machine.link.down_for() >= self.grace_period:
                machine.launched.discard(name)
                continue
            why = machine.link.problem
            return Deferred(f"waiting for {machine.name}, where this trial was launched ({why})", sticky=True)
        return None

    async def _choose(self, spec: TrialSpec) -> tuple[RemoteMachine, list[int] | None] | Deferred:
        """The least loaded reachable host (with enough free GPUs when trialGpuNumber is set), counting the
        launches under way; the GPUs chosen are reserved at once, so a launch running meanwhile picks others."""
        ready = [m for m in self.machines if m.ready]
        if not ready:
            why = "; ".join(f"{m.name}: {m.link.problem or 'not prepared'}" for m in self.machines)
            return Deferred(f"no machine is reachable: {why}")
        load = Counter(trial.handle.get("machine") for trial in self.live.values())
        load.update(self._launching.values())
        ready.sort(key=lambda m: load[m.name])
        if not spec.gpu_number:
            return ready[0], None if spec.gpu_number is None else []
        reasons = []
        for machine in ready:
            try:
                gpus = await machine.read_gpus()
            except SshLinkError:
                continue
            assigned = Counter(
                i for host, ids in self._gpu_assignments.values() if host == machine.name for i in ids
            )
            choice = machine.allocate(gpus, spec.gpu_number, assigned)
            if not isinstance(choice, str):
                self._gpu_assignments[spec.trial_id] = (machine.name, list(choice))
                return machine, choice
            reasons.append(f"{machine.name}: {choice}")
        return Deferred(f"waiting for {spec.gpu_number} free GPU(s): " + "; ".join(reasons))

    async def _start_on(
        self, machine: RemoteMachine, spec: TrialSpec, name: str, gpus: list[int] | None
    ) -> Submitted[RemoteHandle] | Deferred:
        code = await self._code_on(machine, spec.code_dir)
        trial_dir = machine.trial_dir(name)
        cwd = posixpath.join(trial_dir, "code")
        env, unset = environment_change(
            self._trial_env(machine, spec, trial_dir, gpus), machine.env, spec.env
        )
        command = command_record(["/bin/bash", "-c", spec.command], cwd, env, env_unset=unset)
        files = input_files(spec.parameter_record, command)
        request = {
            "trial_dir": trial_dir,
            "code_dir": code,
            "files": files,
            "record": {"gpus": gpus},
        }
        if gpus:  # leased on the host as it launches, or refused there
            request["lease"] = machine.lease_request(self.context.experiment_id, spec.trial_id, name, gpus)
        # a copy here too, readable while the host is unreachable: written while the host launches, so that the
        # launches of one round reach the host together and share a session (RemoteMachine.launch)
        copy = asyncio.ensure_future(
            asyncio.to_thread(write_trial_inputs, self.context.trials_dir / name, files)
        )
        try:
            answer = await machine.launch(request)
        finally:
            (copied,) = await asyncio.gather(copy, return_exceptions=True)
        if isinstance(copied, BaseException):
            raise copied
        if "refused" in answer:
            return Deferred(f"waiting for {spec.gpu_number} free GPU(s): {machine.refused(answer)}")
        machine.launched.add(name)
        self._spawn(machine.watch(trial_dir))
        gpus = answer.get("gpus", gpus)
        handle: RemoteHandle = {
            "machine": machine.name,
            "name": name,
            "trial_dir": trial_dir,
            "keeper_pid": answer["keeper_pid"],
            "keeper_start_ticks": answer["keeper_start_ticks"],
            "boot_id": answer["boot_id"],
        }
        if gpus is not None:
            handle["gpus"] = gpus
            self._gpu_assignments[spec.trial_id] = (machine.name, list(gpus))  # (an earlier launch's, if any)
        return Submitted(handle, f"{machine.name}:{trial_dir}")

    async def _code_on(self, machine: RemoteMachine, code_dir: Path) -> str:
        """Where ``code_dir`` is on the host: on the shared storage's mount, or uploaded once."""
        if self.shared is not None:
            if code_dir not in self._shared_code:
                self._shared_code[code_dir] = await self._once(
                    ("upload", "", code_dir), self.shared.code_dir(code_dir)
                )
            return machine.on_shared(self._shared_code[code_dir])
        if code_dir in machine.code_dirs:
            return machine.code_dirs[code_dir]
        return await self._once(("upload", machine.name, code_dir), self._upload(machine, code_dir))

    async def _upload(self, machine: RemoteMachine, code_dir: Path) -> str:
        return await machine.upload_code(code_dir, await self._pack(code_dir))

    async def _once(self, key: tuple[str, str, Path], work: Coroutine[Any, Any, T]) -> T:
        """``work`` (packing or uploading a code directory), unless the same is under way for another launch:
        then its outcome. Launches overlap (``concurrent_submits``): the first trials of a host all need its
        code at once."""
        running = self._once_running.get(key)
        if running is None:
            running = self._once_running[key] = asyncio.ensure_future(work)
            running.add_done_callback(lambda _: self._once_running.pop(key, None))
        else:
            work.close()
        return cast(T, await asyncio.shield(running))

    def _trial_env(
        self, machine: RemoteMachine, spec: TrialSpec, trial_dir: str, gpus: list[int] | None
    ) -> dict[str, str]:
        env = trial_environment(
            self.platform,
            self.context.experiment_id,
            spec,
            trial_dir=trial_dir,
            code_dir=posixpath.join(trial_dir, "code"),
            inherited=machine.env,
            gpus=gpus,
        )
        env.update(trial_pythonpath_env(env, shim_dir=machine.layout.shim_dir, real_nni=machine.real_nni))
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
        batch = PollBatch()
        for part in await asyncio.gather(
            *(self._collect_host(host, group) for host, group in self._by_host(trials).items())
        ):
            batch.extend(part)
        return batch

    @staticmethod
    def _by_host(trials: list[LiveTrial]) -> dict[str | None, list[LiveTrial]]:
        groups: dict[str | None, list[LiveTrial]] = {}
        for trial in trials:
            groups.setdefault(trial.handle.get("machine"), []).append(trial)
        return groups

    async def _collect_host(self, host: str | None, trials: list[LiveTrial]) -> PollBatch:
        machine = self._by_name.get(host or "")
        if machine is None:
            return self._give_up(None, trials, f"lost: host {host} is not in machineList")
        if not machine.ready:
            return self._unreachable(machine, trials)
        try:
            looks = await machine.files.look(trials)
        except SshLinkError:
            return self._unreachable(machine, trials)
        except PlatformError as exc:
            log.warning("remote: polling %s failed: %s", machine.name, exc)
            return PollBatch()
        batch = PollBatch()
        for trial in trials:
            batch.extend(await self._trial_update(machine, trial, looks[trial.trial_id]))
        return batch

    async def _trial_update(self, machine: RemoteMachine, trial: LiveTrial, look: TrialLook) -> PollBatch:
        vanished = look.result is None and not look.alive
        batch = PollBatch()
        batch.metrics, batch.problems = look.read_metrics(
            not look.more and (look.result is not None or vanished)
        )
        if look.more:
            return batch
        if look.result is not None:
            batch.ended.append(ended_from_result(trial.trial_id, look.result, trial.cancel_status))
        elif vanished and "cleanup" not in trial.state:
            trial.state["cleanup"] = True
            canceled = trial.cancel_status is not None
            await self._send_kill(machine, trial.handle, canceled=canceled)  # end what is left of its tree
            if not canceled:
                batch.ended.append(lost(trial.trial_id))
        if batch.ended:
            self._ended_on(machine, trial)
        return batch

    def _ended_on(self, machine: RemoteMachine | None, trial: LiveTrial) -> None:
        if self._gpu_assignments.pop(trial.trial_id, None) is not None and machine is not None:
            machine.forget_gpu_reading()  # its processes are gone: the next allocation sees the GPU free
        if machine is not None and machine.ready:
            local = self.context.trials_dir / trial.handle["name"]
            self._spawn(self._copy_logs(machine, trial.handle["trial_dir"], local))

    def _ended_on_host(self, trial_dir: str) -> None:
        """A host's runner saw a keeper write its end record: poll now rather than at the tick."""
        self.wakeup.set()

    async def _copy_logs(self, machine: RemoteMachine, trial_dir: str, local: Path) -> None:
        # after the next trial's launch, which the same poll usually triggers: the copy is not on its path
        await asyncio.sleep(LOG_COPY_DELAY)
        if machine.ready:
            await machine.copy_trial_files(trial_dir, LOG_FILES, local)

    # ---- faults ------------------------------------------------------------------------------------------

    def _watch_links(self) -> None:
        """Hosts whose link dropped (keepalive) leave scheduling and are reconnected in the background."""
        for machine in self.machines:
            if machine.prepared or machine.link.down_since is not None:
                machine.link.ensure()

    def _unreachable(self, machine: RemoteMachine, trials: list[LiveTrial]) -> PollBatch:
        machine.link.ensure()
        down_for = machine.link.down_for()
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

    async def _back_up(self, machine: RemoteMachine) -> None:
        """The host is reachable again: end what was cancelled while it was away, and poll at once."""
        for handle in self._to_kill.pop(machine.name, []):
            await self._send_kill(machine, handle, canceled=True)
        self.wakeup.set()

    # ---- cancel, files, shutdown -------------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        machine = self._by_name.get(trial.handle.get("machine", ""))
        if machine is not None:
            await self._send_kill(machine, trial.handle, canceled=True)

    async def _send_kill(self, machine: RemoteMachine, handle: RemoteHandle, *, canceled: bool) -> None:
        """SIGTERM the keeper (it ends the tree), or end the tree itself when the keeper is gone."""
        if not machine.ready:
            self._to_kill.setdefault(machine.name, []).append(handle)
            return
        request = {"trial_dir": handle["trial_dir"], "canceled": canceled, "grace": KILL_GRACE}
        request.update({k: handle.get(k) for k in KEEPER_KEYS})
        try:
            await machine.probe.call("kill", request)
        except SshLinkError:
            self._to_kill.setdefault(machine.name, []).append(handle)
        except PlatformError as exc:
            log.warning("remote: cannot end trial %s on %s: %s", handle.get("name"), machine.name, exc)

    async def _read_file(self, handle: RemoteHandle, name: str) -> bytes:
        relative = relative_file(name, handle["trial_dir"])
        machine = self._by_name.get(handle.get("machine", ""))
        if machine is not None and machine.ready:
            try:
                return await machine.files.read(handle["trial_dir"], relative)
            except SshLinkError:
                pass
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
            await self._wait_for_trials_to_end(self._trials_ended, KILL_GRACE + SIGKILL_WAIT + 2)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=60)
        for machine in self.machines:
            await machine.close()

    async def _trials_ended(self, trials: list[LiveTrial]) -> set[str]:
        """Those whose keeper wrote its end or is gone; a host that cannot be asked counts as done."""
        ended: set[str] = set()
        for host, group in self._by_host(trials).items():
            machine = self._by_name.get(host or "")
            if machine is None or not machine.ready:
                ended.update(t.trial_id for t in group)
                continue
            try:
                ended |= await machine.files.ended(group)
            except PlatformError:
                ended.update(t.trial_id for t in group)
        return ended


def _without_name(message: str, machine: RemoteMachine) -> str:
    prefix = f"{machine.name}: "
    return message[len(prefix) :] if message.startswith(prefix) else message
