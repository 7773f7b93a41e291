"""Slurm training service: every trial attempt is one batch job running the trial keeper on a cluster node.

The trial directories, a copy of the keeper and of the ``nni`` shim (and of the code, when it is not on the
shared directory already) live under ``<sharedDirectory>/<experiment id>/``, which the nodes see too:
everything but job control goes through files (docs/trial-directory.md). Job control is ``sbatch``,
``scancel`` and one batched ``squeue`` per due poll (:class:`~.slurm_status.JobWatcher`), run by a
:class:`~.slurm_runner.CommandRunner`. The job id is in the handle, so a restarted manager re-adopts its jobs;
``submit`` finds a job it already launched by its name and comment.

The manager runs either on a cluster host (commands and files local), or outside the cluster with
``loginNode`` set: then commands and files go through that host over SSH (:mod:`.slurm_login`), and a broken
link only delays what the service learns; the jobs run on.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.base import (
    Deferred,
    ExperimentContext,
    LiveTrial,
    PollBatch,
    Submitted,
    TrainingService,
    TrialSpec,
    TrialStarted,
    TrialWaiting,
)
from trialfleet.training_services.slurm_files import (
    ClusterFiles,
    LocalClusterFiles,
    TrialInputs,
    TrialLook,
    support_paths,
)
from trialfleet.training_services.slurm_runner import CommandRunner, LocalCommandRunner
from trialfleet.training_services.slurm_script import (
    SCRIPT_NAME,
    JobResources,
    TrialJob,
    job_comment,
    job_name,
    reserved_options,
    sbatch_argv,
    sbatch_script,
)
from trialfleet.training_services.slurm_status import (
    JobWatcher,
    SlurmJob,
    accounting_enabled,
    result_grace,
    trial_outcome,
)
from trialfleet.training_services.ssh import SshLinkError

log = logging.getLogger(__name__)

FILE_ALIASES = {"stdout": "trial.stdout", "stderr": "trial.stderr"}
#: a cancelled job still running after this long is cancelled again, the hard way (SIGKILL after KillWait)
ESCALATE_AFTER = 15.0
SHUTDOWN_WAIT = 60.0


class SlurmTrainingService(TrainingService):
    platform = "slurm"
    supports_gpu_scheduling = True  # Slurm places GPU requests; CUDA_VISIBLE_DEVICES comes from GRES
    poll_interval = 1.0  # trial directories; Slurm itself is asked by the watcher's back-off

    def __init__(self, context: ExperimentContext, *, runner: CommandRunner | None = None) -> None:
        super().__init__(context)
        shared = Path(self._option("shared_directory"))
        login = self._option("login_node")
        self.files: ClusterFiles
        if login is None:
            self.root = PurePosixPath(shared.absolute()) / context.experiment_id
            self.files = LocalClusterFiles(shared, Path(self.root))
            self.runner: CommandRunner = runner or LocalCommandRunner()
        else:
            from trialfleet.training_services.slurm_login import LoginNode, LoginNodeFiles, SshCommandRunner

            node = LoginNode(login)
            self.root = PurePosixPath(shared) / context.experiment_id
            self.files = LoginNodeFiles(node, str(self.root), context.experiment_dir / "slurm")
            self.runner = runner or SshCommandRunner(node)
        self.watcher = JobWatcher(self.runner, use_sacct=False)
        self._cancel_sent: dict[str, float] = {}
        self._unreadable: str | None = None  # why the last look at the trial directories failed

    @property
    def support_dir(self) -> PurePosixPath:
        return PurePosixPath(self.files.support_dir)

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        reserved = reserved_options(self._option("sbatch_options") or [])
        if reserved:
            raise PlatformError(
                f"slurm: sbatchOptions {reserved} set options trialfleet sets itself; remove them"
            )
        try:
            await self.files.prepare()
            config = await self.runner.run(["scontrol", "show", "config"])
            if config.code != 0:
                raise PlatformError(
                    f"slurm: cannot reach the Slurm controller from {self.runner.description}: "
                    f"scontrol show config failed (exit {config.code}): {config.err.strip()}"
                )
            self.watcher.use_sacct = self._use_sacct(accounting_enabled(config.out))
        except PlatformError:
            await self.files.close()  # a failed start leaves no SSH connection behind
            raise

    def _use_sacct(self, enabled: bool) -> bool:
        wanted = self._option("use_sacct")
        if wanted and not enabled:
            raise PlatformError("slurm: useSacct is true but this cluster has no job accounting (slurmdbd)")
        return enabled if wanted is None else bool(wanted)

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        name = spec.trial_id if spec.attempt == 0 else f"{spec.trial_id}.{spec.attempt}"
        trial_dir = str(self.root / "trials" / name)
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
            return Deferred(f"the login node is unreachable: {exc}")
        return self._submitted(job_id, trial_dir)

    async def _sbatch(self, spec: TrialSpec, trial_dir: str) -> str:
        code_dir = await self.files.code_dir(spec.code_dir)
        job = self._trial_job(spec, trial_dir, code_dir)
        inputs = TrialInputs(
            spec.parameter_record, ["/bin/bash", "-c", spec.command], code_dir, sbatch_script(job)
        )
        await self.files.write_trial(trial_dir, inputs)
        argv = sbatch_argv(job, self._resources(spec), posixpath.join(trial_dir, SCRIPT_NAME))
        result = await self.runner.run(argv)
        job_id = result.out.strip().split(";")[0]
        if result.code != 0 or not job_id.isdigit():
            raise PlatformError(f"slurm: sbatch refused trial {spec.trial_id}: {result.err.strip()}")
        return job_id

    def _submitted(self, job_id: str, trial_dir: str) -> Submitted:
        self.watcher.watch(job_id)
        handle = {"job_id": job_id, "trial_dir": trial_dir}
        return Submitted(handle, f"slurm:{job_id}:{trial_dir}", started=False)

    async def _earlier_job(self, spec: TrialSpec, trial_dir: str) -> str | None:
        """The job of this attempt when an earlier manager submitted it already (see base.py)."""
        try:
            name = job_name(self.context.experiment_id, spec.trial_id)
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
        started = (await self.files.read_job_id(trial_dir) or "").strip()
        return started if started.isdigit() else None

    def _trial_job(self, spec: TrialSpec, trial_dir: str, code_dir: str) -> TrialJob:
        keeper, shim_dir = support_paths(self.files.support_dir)
        env = {
            "NNI_PLATFORM": "slurm",
            "NNI_EXP_ID": self.context.experiment_id,
            "NNI_TRIAL_JOB_ID": spec.trial_id,
            "NNI_SYS_DIR": trial_dir,
            "NNI_OUTPUT_DIR": trial_dir,
            "NNI_TRIAL_SEQ_ID": str(spec.sequence_id),
            "NNI_CODE_DIR": code_dir,
        }
        # the manager's PYTHONPATH names its own directories; the job puts the shim copy there instead
        env.update({k: v for k, v in spec.env.items() if k != "PYTHONPATH"})
        if spec.gpu_number == 0:
            env["CUDA_VISIBLE_DEVICES"] = ""  # as on every platform: 0 GPUs means none visible
        return TrialJob(
            experiment_id=self.context.experiment_id,
            trial_id=spec.trial_id,
            attempt=spec.attempt,
            trial_dir=trial_dir,
            keeper=keeper,
            shim_dir=shim_dir,
            env=env,
            setup_script=self._option("setup_script"),
            python_path=self._option("python_path"),
        )

    def _resources(self, spec: TrialSpec) -> JobResources:
        time_limit = self._option("time_limit") or getattr(self.context.config, "max_trial_duration", None)
        return JobResources(
            partition=self._option("partition"),
            account=self._option("account"),
            qos=self._option("qos"),
            time_limit=time_limit,
            cpus=self._option("cpus_per_trial"),
            memory_mb=self._option("memory"),
            gpus=spec.gpu_number,
            gpu_request_style=self._option("gpu_request_style") or "gres",
            extra=tuple(self._option("sbatch_options") or ()),
        )

    # ---- polling ---------------------------------------------------------------------------------------

    async def _adopt(self, trial: LiveTrial) -> None:
        self.watcher.watch(trial.handle["job_id"])
        try:
            trial.started = await self.files.keeper_started(trial.handle["trial_dir"])
        except PlatformError as exc:  # the next poll looks again
            log.warning("slurm: cannot look at trial %s yet: %s", trial.trial_id, exc)
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        await self.watcher.refresh()
        try:
            looks = await self.files.look(trials)
        except PlatformError as exc:  # nothing was read: the next look starts from the same cursors
            if self._unreadable is None:
                log.warning("slurm: cannot read the trial directories (retried): %s", exc)
            self._unreadable = str(exc)
            return PollBatch()
        if self._unreadable is not None:
            log.info("slurm: the trial directories are readable again")
            self._unreadable = None
        batch = PollBatch()
        for trial in trials:
            batch.extend(await self._collect_one(trial, looks[trial.trial_id]))
        return batch

    async def _collect_one(self, trial: LiveTrial, look: TrialLook) -> PollBatch:
        job_id = trial.handle["job_id"]
        job = self.watcher.jobs.get(job_id)
        # not trial.started: Slurm says RUNNING while the setup script runs, before the keeper is there
        keeper_started = trial.state.get("keeper_started") or look.keeper_started
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        if not trial.started and (keeper_started or (job is not None and job.running)):
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = self._waiting(trial, job)
        since = self.watcher.ended_for(job_id)
        ended = trial_outcome(
            trial.trial_id,
            look.result,
            job,
            keeper_started=keeper_started,
            cancel_status=trial.cancel_status,
            gone=self.watcher.gone(job_id),
            settled=job is not None and since is not None and since >= result_grace(job, keeper_started),
        )
        if ended is None and (look.result is not None or trial.cancel_status is not None):
            self.watcher.hurry()  # the end is near: learn Slurm's side of it soon
            await self._escalate_cancel(trial)
        if look.more:
            ended = None  # metrics are still to be read: the end comes after them
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
            self.watcher.forget(job_id)
            self._cancel_sent.pop(trial.trial_id, None)
        return batch

    @staticmethod
    def _waiting(trial: LiveTrial, job: SlurmJob | None) -> list[TrialWaiting]:
        """Why Slurm keeps the job pending ("Resources", "Priority"), reported once per change."""
        reason = job.reason if job is not None and job.waiting else None
        if reason == trial.state.get("waiting_reason"):
            return []
        trial.state["waiting_reason"] = reason
        return [TrialWaiting(trial.trial_id, reason, time.time())] if reason else []

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """SIGTERM to the keeper alone when it runs (it ends the tree and records it); else cancel the job.

        A cancel that cannot be sent (the controller or the login node does not answer) is sent again by
        :meth:`_escalate_cancel` once the trial can be looked at again.
        """
        job_id = trial.handle["job_id"]
        job = self.watcher.jobs.get(job_id)
        self._cancel_sent[trial.trial_id] = time.monotonic()
        self.watcher.hurry()
        try:
            keeper_started = await self.files.keeper_started(trial.handle["trial_dir"])
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

    async def _read_file(self, handle: Mapping[str, Any], name: str) -> bytes:
        relative = posixpath.normpath(FILE_ALIASES.get(name, name))
        if posixpath.isabs(relative) or relative in (".", "..") or relative.startswith("../"):
            raise ValueError(f"{name!r} is not a file of the trial directory {handle['trial_dir']}")
        return await self.files.read_file(handle["trial_dir"], relative)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_jobs_to_end(SHUTDOWN_WAIT)
        await self.files.close()

    async def _wait_for_jobs_to_end(self, timeout: float) -> None:
        """After close() cancelled them, wait until every trial's keeper recorded its end or its job ended."""
        deadline = time.monotonic() + timeout
        waiting = dict(self.live)
        while waiting and time.monotonic() < deadline:
            jobs, ended_dirs = await self._ended_jobs(list(waiting.values()))
            for trial_id, trial in list(waiting.items()):
                job = jobs.get(trial.handle["job_id"]) if jobs is not None else None
                if trial.handle["trial_dir"] in ended_dirs or (
                    jobs is not None and (job is None or job.ended)
                ):
                    waiting.pop(trial_id)
                else:
                    await self._escalate_cancel(trial)
            if waiting:
                await asyncio.sleep(0.5)
        if waiting:
            log.warning(
                "slurm: jobs of trials %s still ran %.0f s after the cancel", sorted(waiting), timeout
            )

    async def _ended_jobs(self, trials: list[LiveTrial]) -> tuple[dict[str, SlurmJob] | None, set[str]]:
        """What Slurm says of the trials' jobs (None: it could not be asked), and which trials have result.json."""
        jobs: dict[str, SlurmJob] | None = None
        ended_dirs: set[str] = set()
        try:
            jobs = await self.watcher.query(trial.handle["job_id"] for trial in trials)
            ended_dirs = await self.files.results_written([trial.handle["trial_dir"] for trial in trials])
        except PlatformError as exc:
            log.warning("slurm: cannot confirm that the cancelled jobs ended: %s", exc)
        return jobs, ended_dirs

    def _option(self, name: str) -> Any:
        return getattr(self.context.service_config, name, None)
