"""Slurm training service: every trial attempt is one batch job running the trial keeper on a cluster node, or,
with ``reuseMode``, runs in a long-lived worker job that runs trial after trial (:mod:`..batch.reuse`).

The trial directories, a copy of the keeper and of the ``nni`` shim (and of the code, when it is not on the
shared directory already) live under ``<sharedDirectory>/<experiment id>/``, which the nodes see too:
everything but job control goes through files (docs/trial-directory.md). Job control is ``sbatch``,
``scancel`` and one batched ``squeue`` per due poll (:class:`~.status.JobWatcher`), run by a
:class:`~.runner.CommandRunner`. The job id is in the handle, so a restarted manager re-adopts its jobs;
``submit`` finds a job it already launched by its name and comment.

The manager runs either on a cluster host (commands and files local), or outside the cluster with
``loginNode`` set: then commands and files go through that host over SSH (:mod:`.login`), and a broken
link only delays what the service learns; the jobs run on.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import replace
from pathlib import Path, PurePosixPath

from trialfleet.errors import PlatformError
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.batch.outcome import JobView
from trialfleet.training_services.batch.reuse import (
    REUSE_POLL_INTERVAL,
    ReusePolicy,
    WorkerFleet,
    runs_in_worker,
    worker_argv,
)
from trialfleet.training_services.batch.service import BatchHandle, BatchJobService
from trialfleet.training_services.batch.workers import REGISTRY
from trialfleet.training_services.environment import job_variables
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.mounted_storage import MountedStorage, on_storage
from trialfleet.training_services.naming import attempt_name, nni_job_name
from trialfleet.training_services.shared_storage import shared_storage_for
from trialfleet.training_services.slurm.config import SlurmConfig
from trialfleet.training_services.slurm.runner import CommandRunner, LocalCommandRunner
from trialfleet.training_services.slurm.script import (
    JOB_ID_FILE,
    SCRIPT_NAME,
    JobResources,
    TrialJob,
    WorkerJob,
    job_comment,
    reserved_options,
    sbatch_argv,
    sbatch_script,
    worker_script,
)
from trialfleet.training_services.slurm.shared_directory import SharedDirectory
from trialfleet.training_services.slurm.status import (
    SLURM_OUTCOMES,
    JobWatcher,
    SlurmJob,
    SlurmOutcomes,
    accounting_enabled,
    result_grace,
)
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.ssh import SshLinkError
from trialfleet.training_services.trial_dir import KEEPER_RECORD, command_record, input_files
from trialfleet.training_services.trial_files import TrialFiles

log = logging.getLogger(__name__)

#: a cancelled job still running after this long is cancelled again, the hard way (SIGKILL after KillWait)
ESCALATE_AFTER = 15.0
SHUTDOWN_WAIT = 60.0


class SlurmHandle(BatchHandle):
    job_id: str


LiveTrial = base.LiveTrial[SlurmHandle]


class SlurmTrainingService(BatchJobService[SlurmConfig, SlurmJob, SlurmHandle]):
    platform = "slurm"
    config_class = SlurmConfig
    poll_interval = 1.0  # trial directories; Slurm itself is asked by the watcher's back-off
    ships_code = True  # copied to the shared directory, or packed and uploaded through the login node

    @classmethod
    def shipped_code_directories(cls, config: SlurmConfig, working_directory: Path) -> list[Path]:
        code_dir = Path(config.trial_code_directory)
        if config.login_node is None and on_storage(code_dir, Path(config.shared_directory)):
            return []  # already on the shared directory: used in place
        return [code_dir]

    def __init__(self, context: ExperimentContext, *, runner: CommandRunner | None = None) -> None:
        super().__init__(context)
        shared = Path(self.config.shared_directory)
        self.shared: SharedDirectory
        if self.config.login_node is None:
            self.root = PurePosixPath(shared.absolute()) / context.experiment_id
            self.shared = MountedStorage(shared, str(shared.absolute()), context.experiment_id)
            self.runner: CommandRunner = runner or LocalCommandRunner()
        else:
            from trialfleet.training_services.slurm.login import (
                LoginNodeDirectory,
                SshCommandRunner,
                login_link,
            )

            link = login_link(self.config.login_node)
            self.root = PurePosixPath(shared) / context.experiment_id
            self.shared = LoginNodeDirectory(link, str(self.root), context.experiment_dir / "slurm")
            self.runner = runner or SshCommandRunner(link)
        self.watcher = JobWatcher(self.runner, use_sacct=False)
        self._cancel_sent: dict[str, float] = {}
        # with a shared storage the code comes from it; the nodes see it at remoteMountPoint
        self.shared_storage = shared_storage_for(context.config, context.experiment_id)
        if self.config.reuse_mode:
            per_gpu, idle = self.config.max_trial_number_per_gpu, float(self.config.worker_idle_timeout)
            self.reuse_policy = ReusePolicy.of(self.config.trial_gpu_number, per_gpu, idle)
            registry = context.experiment_dir / REGISTRY
            self.fleet = WorkerFleet(
                self, self.shared.trials, str(self.root), self.watcher, self.reuse_policy, registry=registry
            )
            if self.config.login_node is None:
                self.poll_interval = REUSE_POLL_INTERVAL

    @property
    def support_dir(self) -> PurePosixPath:
        return PurePosixPath(self.shared.layout.directory)

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        reserved = reserved_options(self.config.sbatch_options)
        if reserved:
            raise PlatformError(
                f"slurm: sbatchOptions {reserved} set options trialfleet sets itself; remove them"
            )
        try:
            await self.shared.prepare()
            if self.shared_storage is not None:
                await self._prepare_shared_storage()
            config = await self.runner.run(["scontrol", "show", "config"])
            if config.code != 0:
                raise PlatformError(
                    f"slurm: cannot reach the Slurm controller from {self.runner.description}: "
                    f"scontrol show config failed (exit {config.code}): {config.err.strip()}"
                )
            self.watcher.use_sacct = self._use_sacct(accounting_enabled(config.out))
        except PlatformError:
            await self.shared.close()  # a failed start leaves no SSH connection behind
            raise

    async def _prepare_shared_storage(self) -> None:
        assert self.shared_storage is not None
        if not posixpath.isabs(self.shared_storage.config.remote_mount_point):
            raise PlatformError(
                "slurm: sharedStorage.remoteMountPoint must be an absolute path: it is where the nodes "
                "see the storage"
            )
        await self.shared_storage.prepare_here()
        await self.shared_storage.code_dir(Path(self.config.trial_code_directory))

    async def _code_dir(self, code_dir: Path) -> str:
        """The code directory as the nodes see it: on the shared storage when there is one."""
        if self.shared_storage is None:
            return await self.shared.code_dir(code_dir)
        relative = await self.shared_storage.code_dir(code_dir)
        return posixpath.join(self.shared_storage.config.remote_mount_point, relative)

    def _use_sacct(self, enabled: bool) -> bool:
        wanted = self.config.use_sacct
        if wanted and not enabled:
            raise PlatformError("slurm: useSacct is true but this cluster has no job accounting (slurmdbd)")
        return enabled if wanted is None else bool(wanted)

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[SlurmHandle] | Deferred:
        trial_dir = str(self.root / "trials" / attempt_name(spec.trial_id, spec.attempt))
        if self.fleet is not None:
            return await self._launch_in_worker(spec, trial_dir)
        try:
            earlier = await self._earlier_job(spec, trial_dir)
        except PlatformError as exc:
            return Deferred(f"cannot ask Slurm whether the trial was submitted already: {exc}")
        if earlier is not None:
            log.info("slurm: trial %s already has job %s; adopting it", spec.trial_id, earlier)
            return self._submitted(earlier, trial_dir)
        try:
            job_id = await self._sbatch(spec, trial_dir)
        except SshLinkError as exc:  # sbatch may have run: the next offer finds its job by name
            return Deferred(f"the login node is unreachable: {exc}", sticky=True)
        return self._submitted(job_id, trial_dir)

    async def _sbatch(self, spec: TrialSpec, trial_dir: str) -> str:
        code_dir = await self._code_dir(spec.code_dir)
        job = self._trial_job(spec, trial_dir, code_dir)
        # env None: the trial inherits the job's environment, which exists only on the node (GRES, modules)
        command = command_record(["/bin/bash", "-c", spec.command], code_dir, None)
        files = input_files(spec.parameter_record, command)
        files[SCRIPT_NAME] = sbatch_script(job)  # private, as command.json: it holds environment values
        await self.shared.trials.write(trial_dir, files)
        argv = sbatch_argv(job, self._resources(spec), posixpath.join(trial_dir, SCRIPT_NAME))
        result = await self.runner.run(argv)
        job_id = result.out.strip().split(";")[0]
        if result.code != 0 or not job_id.isdigit():
            raise PlatformError(f"slurm: sbatch refused trial {spec.trial_id}: {result.err.strip()}")
        return job_id

    async def _launch_in_worker(self, spec: TrialSpec, trial_dir: str) -> Submitted[SlurmHandle] | Deferred:
        """Reuse mode: the trial's own environment goes into command.json (the job's is its worker's), and its
        keeper holds it to maxTrialDuration (the job's time limit is the worker's)."""
        assert self.fleet is not None
        try:
            code_dir = await self._code_dir(spec.code_dir)
            env = job_variables(
                self.platform, self.context.experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir
            )
            limit = self.context.config.max_trial_duration
            command = command_record(["/bin/bash", "-c", spec.command], code_dir, env, max_duration=limit)
            return await self.fleet.launch(spec, trial_dir, input_files(spec.parameter_record, command))
        except SshLinkError as exc:  # the next offer finds an attempt already given to a worker (assigned.json)
            return Deferred(f"the login node is unreachable: {exc}", sticky=True)

    async def start_worker(self, name: str, worker_dir: str) -> str:
        """Reuse mode: submit a worker job (:class:`~..batch.reuse.WorkerJobs`)."""
        argv = worker_argv(self.shared.layout.worker, worker_dir, str(self.root / "trials"), self.reuse_policy)
        job = WorkerJob(
            experiment_id=self.context.experiment_id,
            worker=name,
            worker_dir=worker_dir,
            argv=argv,
            shim_dir=self.shared.layout.shim_dir,
            setup_script=self.config.setup_script,
            python_path=self.config.python_path,
        )
        await self.shared.trials.write(worker_dir, {SCRIPT_NAME: worker_script(job)})
        resources = replace(
            self._resources(None), time_limit=self.config.time_limit, gpus=self.config.trial_gpu_number
        )
        result = await self.runner.run(sbatch_argv(job, resources, posixpath.join(worker_dir, SCRIPT_NAME)))
        job_id = result.out.strip().split(";")[0]
        if result.code != 0 or not job_id.isdigit():
            raise PlatformError(f"slurm: sbatch refused worker {name}: {result.err.strip()}")
        return job_id

    async def end_worker(self, job_id: str) -> None:
        await self._scancel(job_id)

    def _submitted(self, job_id: str, trial_dir: str) -> Submitted[SlurmHandle]:
        self.watcher.watch(job_id)
        handle: SlurmHandle = {"job_id": job_id, "trial_dir": trial_dir}
        return Submitted(handle, f"slurm:{job_id}:{trial_dir}", started=False)

    async def _earlier_job(self, spec: TrialSpec, trial_dir: str) -> str | None:
        """The job of this attempt when an earlier manager submitted it already (see base.py)."""
        try:
            name = nni_job_name(self.context.experiment_id, spec.trial_id)
        except ValueError as exc:
            raise PlatformError(f"slurm: {exc}") from exc
        argv = ["squeue", "--noheader", "--states=all", f"--name={name}", "--Format=JobID:|,Comment:|"]
        result = await self.runner.run(argv)
        if result.code != 0:
            raise PlatformError(f"squeue failed (exit {result.code}): {result.err.strip()}")
        for line in result.out.splitlines():
            job_id, _, comment = line.removesuffix("|").partition("|")
            if comment.strip() == job_comment(spec.attempt) and job_id.strip().isdigit():
                return job_id.strip()
        # a job that started wrote its id; this finds it after Slurm forgot it (MinJobAge)
        started = (await self.shared.read(posixpath.join(trial_dir, JOB_ID_FILE)) or b"").decode().strip()
        return started if started.isdigit() else None

    def _trial_job(self, spec: TrialSpec, trial_dir: str, code_dir: str) -> TrialJob:
        paths = (trial_dir, code_dir, self.shared.layout)
        options = {"setup_script": self.config.setup_script, "python_path": self.config.python_path}
        return TrialJob.of(self.platform, self.context.experiment_id, spec, paths, **options)

    def _resources(self, spec: TrialSpec | None) -> JobResources:
        config = self.config
        return JobResources(
            partition=config.partition,
            account=config.account,
            qos=config.qos,
            time_limit=config.time_limit or self.context.config.max_trial_duration,
            cpus=config.cpus_per_trial,
            memory_mb=config.memory,
            gpus=spec.gpu_number if spec is not None else None,
            gpu_request_style=config.gpu_request_style,
            extra=tuple(config.sbatch_options),
        )

    # ---- polling ---------------------------------------------------------------------------------------

    @property
    def job_watcher(self) -> JobWatcher:
        return self.watcher

    def _outcomes(self, trial: LiveTrial) -> SlurmOutcomes:
        return SLURM_OUTCOMES

    @property
    def trial_files(self) -> TrialFiles:
        return self.shared.trials

    def _waiting_reason(self, job: SlurmJob) -> str | None:
        """Why Slurm keeps the job pending ("Resources", "Priority")."""
        return job.reason if job.waiting else None

    def _result_grace(self, trial: LiveTrial, job: SlurmJob, keeper_started: bool) -> float:
        return result_grace(job, keeper_started)

    async def _still_ending(self, trial: LiveTrial, job: SlurmJob | None) -> None:
        await self._escalate_cancel(trial)

    async def _trial_ended(self, trial: LiveTrial, ended: TrialEnded, view: JobView[SlurmJob]) -> None:
        self._cancel_sent.pop(trial.trial_id, None)

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """SIGTERM to the keeper alone when it runs (it ends the tree and records it); else cancel the job.

        A cancel that cannot be sent (the controller or the login node does not answer) is sent again by
        :meth:`_escalate_cancel` once the trial can be looked at again.
        """
        if self.fleet is not None and runs_in_worker(trial.handle):
            await self.fleet.cancel(trial)  # the worker signals the keeper, which ends the trial's tree
            return
        job_id = trial.handle["job_id"]
        job = self.watcher.jobs.get(job_id)
        self._cancel_sent[trial.trial_id] = time.monotonic()
        self.watcher.hurry()
        try:
            keeper_started = await self.shared.trials.exists(trial.handle["trial_dir"], KEEPER_RECORD)
            if keeper_started and (job is None or not job.ended):
                result = await self.runner.run(["scancel", "--batch", "--signal=TERM", job_id])
                if result.code == 0:
                    return
        except PlatformError as exc:
            log.warning("slurm: cannot cancel job %s yet (retried): %s", job_id, exc)
            return
        await self._scancel(job_id)

    async def _scancel(self, job_id: str) -> None:
        try:
            result = await self.runner.run(["scancel", job_id])
        except PlatformError as exc:
            log.warning("slurm: scancel %s failed (retried): %s", job_id, exc)
            return
        if result.code != 0:
            log.warning("slurm: scancel %s failed (retried): %s", job_id, result.err.strip())

    async def _escalate_cancel(self, trial: LiveTrial) -> None:
        """Confirm a cancel: a job still running long after it was asked to end is cancelled outright."""
        sent = self._cancel_sent.get(trial.trial_id)
        if sent is None or time.monotonic() - sent < ESCALATE_AFTER:
            return
        job = self.watcher.jobs.get(trial.handle["job_id"])
        if job is None or not job.ended:
            log.warning("slurm: job %s still runs after its cancel; scancel again", trial.handle["job_id"])
            self._cancel_sent[trial.trial_id] = time.monotonic()
            await self._scancel(trial.handle["job_id"])

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
            if self.fleet is not None:
                await self.fleet.close()
        await self.shared.close()

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        """The cancelled trials whose keeper recorded its end or whose job ended; each other one is cancelled
        again, the hard way, once it has had its time (see :meth:`_escalate_cancel`)."""
        jobs: dict[str, SlurmJob] | None = None
        ended: set[str] = set()
        try:
            jobs = await self.watcher.query(trial.handle["job_id"] for trial in trials)
            ended = await self.shared.trials.ended(trials)
        except PlatformError as exc:
            log.warning("slurm: cannot confirm that the cancelled jobs ended: %s", exc)
        for trial in trials:
            job = jobs.get(trial.handle["job_id"]) if jobs is not None else None
            if jobs is not None and (job is None or job.ended):
                ended.add(trial.trial_id)
            elif trial.trial_id not in ended and not runs_in_worker(trial.handle):
                await self._escalate_cancel(trial)
        return ended
