"""Slurm training service: every trial attempt is one batch job running the trial keeper on a cluster node.

The trial directories, a copy of the keeper and of the ``nni`` shim (and of the code, when it is not on the
shared directory already) live under ``<sharedDirectory>/<experiment id>/``, which the nodes see too:
everything but job control goes through files (docs/trial-directory.md). Job control is ``sbatch``,
``scancel`` and one batched ``squeue`` per due poll (:class:`~.slurm_status.JobWatcher`), run by a
:class:`~.slurm_runner.CommandRunner` on this machine. The job id is in the handle, so a restarted manager
re-adopts its jobs; ``submit`` finds a job it already launched by its name and comment.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trialfleet.compat import SHIM_PATH
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
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.slurm_runner import CommandRunner, LocalCommandRunner
from trialfleet.training_services.slurm_script import (
    JOB_ID_FILE,
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
from trialfleet.training_services.trial_files import (
    KEEPER_SCRIPT,
    MetricReader,
    read_record,
    write_trial_inputs,
)

log = logging.getLogger(__name__)

FILE_ALIASES = {"stdout": "trial.stdout", "stderr": "trial.stderr"}
#: a cancelled job still running after this long is cancelled again, the hard way (SIGKILL after KillWait)
ESCALATE_AFTER = 15.0
SHUTDOWN_WAIT = 60.0
_PYCACHE = shutil.ignore_patterns("__pycache__")


class SlurmTrainingService(TrainingService):
    platform = "slurm"
    supports_gpu_scheduling = True  # Slurm places GPU requests; CUDA_VISIBLE_DEVICES comes from GRES
    poll_interval = 1.0  # files on the shared directory; Slurm itself is asked by the watcher's back-off

    def __init__(self, context: ExperimentContext, *, runner: CommandRunner | None = None) -> None:
        super().__init__(context)
        self.runner: CommandRunner = runner or LocalCommandRunner()
        self.watcher = JobWatcher(self.runner, use_sacct=False)
        root = Path(self._option("shared_directory")) / context.experiment_id
        self.root = root.absolute()
        self.support_dir = self.root / ".trialfleet" / _support_version()
        self._code_copies: dict[Path, Path] = {}
        self._cancel_sent: dict[str, float] = {}

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        if self._option("login_node") is not None:
            raise PlatformError(
                "slurm: loginNode (driving Slurm over SSH from outside the cluster) is not available yet; "
                "run the manager on a cluster host that sees sharedDirectory and leave loginNode out"
            )
        reserved = reserved_options(self._option("sbatch_options") or [])
        if reserved:
            raise PlatformError(
                f"slurm: sbatchOptions {reserved} set options trialfleet sets itself; remove them"
            )
        config = await self.runner.run(["scontrol", "show", "config"])
        if config.code != 0:
            raise PlatformError(
                f"slurm: cannot reach the Slurm controller from {self.runner.description}: "
                f"scontrol show config failed (exit {config.code}): {config.err.strip()}"
            )
        self.watcher.use_sacct = self._use_sacct(accounting_enabled(config.out))
        await asyncio.to_thread(self._install_support_files)

    def _use_sacct(self, enabled: bool) -> bool:
        wanted = self._option("use_sacct")
        if wanted and not enabled:
            raise PlatformError("slurm: useSacct is true but this cluster has no job accounting (slurmdbd)")
        return enabled if wanted is None else bool(wanted)

    def _install_support_files(self) -> None:
        """The keeper and the nni shim on the shared directory, in a directory named after their content.

        A new manager (resume) never rewrites files that running trials may be reading.
        """
        target = self.support_dir
        if target.exists():
            return
        staging = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        try:
            (self.root / "trials").mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(SHIM_PATH / "nni", staging / "shim" / "nni", ignore=_PYCACHE)
            shutil.copyfile(KEEPER_SCRIPT, staging / "keeper.py")
            os.replace(staging, target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.exists():  # another manager may have won the rename
                raise PlatformError(f"slurm: cannot prepare {target} on the shared directory: {exc}") from exc

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        name = spec.trial_id if spec.attempt == 0 else f"{spec.trial_id}.{spec.attempt}"
        trial_dir = self.root / "trials" / name
        try:
            earlier = await self._earlier_job(spec, trial_dir)
        except PlatformError as exc:
            return Deferred(f"cannot ask Slurm whether the trial was submitted already: {exc}")
        if earlier is not None:
            log.info("slurm: trial %s already has job %s; adopting it", spec.trial_id, earlier)
            return self._submitted(earlier, trial_dir)
        code_dir = await asyncio.to_thread(self._code_dir_on_cluster, spec.code_dir)
        job = self._trial_job(spec, trial_dir, code_dir)
        await asyncio.to_thread(self._write_job_files, spec, job, code_dir)
        argv = sbatch_argv(job, self._resources(spec), str(trial_dir / SCRIPT_NAME))
        result = await self.runner.run(argv)
        job_id = result.out.strip().split(";")[0]
        if result.code != 0 or not job_id.isdigit():
            raise PlatformError(f"slurm: sbatch refused trial {spec.trial_id}: {result.err.strip()}")
        return self._submitted(job_id, trial_dir)

    def _submitted(self, job_id: str, trial_dir: Path) -> Submitted:
        self.watcher.watch(job_id)
        handle = {"job_id": job_id, "trial_dir": str(trial_dir)}
        return Submitted(handle, f"slurm:{job_id}:{trial_dir}", started=False)

    async def _earlier_job(self, spec: TrialSpec, trial_dir: Path) -> str | None:
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
        started = await asyncio.to_thread(_read_text, trial_dir / JOB_ID_FILE)
        return started.strip() if started and started.strip().isdigit() else None

    def _trial_job(self, spec: TrialSpec, trial_dir: Path, code_dir: Path) -> TrialJob:
        support = self.support_dir
        env = {
            "NNI_PLATFORM": "slurm",
            "NNI_EXP_ID": self.context.experiment_id,
            "NNI_TRIAL_JOB_ID": spec.trial_id,
            "NNI_SYS_DIR": str(trial_dir),
            "NNI_OUTPUT_DIR": str(trial_dir),
            "NNI_TRIAL_SEQ_ID": str(spec.sequence_id),
            "NNI_CODE_DIR": str(code_dir),
        }
        # the manager's PYTHONPATH names its own directories; the job puts the shim copy there instead
        env.update({k: v for k, v in spec.env.items() if k != "PYTHONPATH"})
        if spec.gpu_number == 0:
            env["CUDA_VISIBLE_DEVICES"] = ""  # as on every platform: 0 GPUs means none visible
        return TrialJob(
            experiment_id=self.context.experiment_id,
            trial_id=spec.trial_id,
            attempt=spec.attempt,
            trial_dir=str(trial_dir),
            keeper=str(support / "keeper.py"),
            shim_dir=str(support / "shim"),
            env=env,
            setup_script=self._option("setup_script"),
            python_path=self._option("python_path"),
        )

    def _write_job_files(self, spec: TrialSpec, job: TrialJob, code_dir: Path) -> None:
        trial_dir = Path(job.trial_dir)
        argv = ["/bin/bash", "-c", spec.command]
        # env None: the trial inherits the job's environment, which exists only on the node (GRES, modules)
        write_trial_inputs(
            trial_dir, parameter_record=spec.parameter_record, argv=argv, cwd=str(code_dir), env=None
        )
        # private, as command.json: it holds the trial's environment values
        fd = os.open(trial_dir / SCRIPT_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(sbatch_script(job))

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

    def _code_dir_on_cluster(self, code_dir: Path) -> Path:
        """The code directory itself when the nodes see it (it is under sharedDirectory), else a copy there.

        The copy is made once per experiment, the first time a trial needs it, honouring ``.nniignore``.
        """
        source = code_dir.resolve()
        if source.is_relative_to(Path(self._option("shared_directory")).resolve()):
            return code_dir
        if code_dir not in self._code_copies:
            target = self.root / "code" / hashlib.sha256(str(source).encode()).hexdigest()[:16]
            if not target.exists():
                try:
                    _copy_code(source, target)
                except OSError as exc:
                    raise PlatformError(f"slurm: cannot copy {source} to {target}: {exc}") from exc
            self._code_copies[code_dir] = target
        return self._code_copies[code_dir]

    # ---- polling ---------------------------------------------------------------------------------------

    async def _adopt(self, trial: LiveTrial) -> None:
        self.watcher.watch(trial.handle["job_id"])
        trial.started = (Path(trial.handle["trial_dir"]) / "keeper.json").exists()
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        await self.watcher.refresh()
        batch = PollBatch()
        for trial in trials:
            batch.extend(await self._collect_one(trial))
        return batch

    async def _collect_one(self, trial: LiveTrial) -> PollBatch:
        job_id, trial_dir = trial.handle["job_id"], Path(trial.handle["trial_dir"])
        reader = trial.state.setdefault("reader", MetricReader(trial.trial_id, trial_dir, trial.cursor))
        job = self.watcher.jobs.get(job_id)
        result = read_record(trial_dir / "result.json")
        # not trial.started: Slurm says RUNNING while the setup script runs, before the keeper is there
        keeper_started = trial.state.get("keeper_started") or (trial_dir / "keeper.json").exists()
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        if not trial.started and (keeper_started or (job is not None and job.running)):
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = self._waiting(trial, job)
        since = self.watcher.ended_for(job_id)
        ended = trial_outcome(
            trial.trial_id,
            result,
            job,
            keeper_started=keeper_started,
            cancel_status=trial.cancel_status,
            gone=self.watcher.gone(job_id),
            settled=job is not None and since is not None and since >= result_grace(job, keeper_started),
        )
        if ended is None and (result is not None or trial.cancel_status is not None):
            self.watcher.hurry()  # the end is near: learn Slurm's side of it soon
            await self._escalate_cancel(trial)
        batch.metrics, batch.problems = reader.read(final=ended is not None)
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
        """SIGTERM to the keeper alone when it runs (it ends the tree and records it); else cancel the job."""
        job_id = trial.handle["job_id"]
        job = self.watcher.jobs.get(job_id)
        keeper_started = (Path(trial.handle["trial_dir"]) / "keeper.json").exists()
        self._cancel_sent[trial.trial_id] = time.monotonic()
        self.watcher.hurry()
        if keeper_started and (job is None or not job.ended):
            result = await self.runner.run(["scancel", "--batch", "--signal=TERM", job_id])
            if result.code == 0:
                return
        await self._scancel(job_id)

    async def _scancel(self, job_id: str) -> None:
        result = await self.runner.run(["scancel", job_id])
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
        trial_dir = Path(handle["trial_dir"]).resolve()
        path = (trial_dir / FILE_ALIASES.get(name, name)).resolve()
        if not path.is_relative_to(trial_dir):
            raise ValueError(f"{name!r} is not a file of the trial directory {trial_dir}")
        return await asyncio.to_thread(path.read_bytes)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_jobs_to_end(SHUTDOWN_WAIT)

    async def _wait_for_jobs_to_end(self, timeout: float) -> None:
        """After close() cancelled them, wait until every trial's keeper recorded its end or its job ended."""
        deadline = time.monotonic() + timeout
        waiting = dict(self.live)
        while waiting and time.monotonic() < deadline:
            jobs = {}
            try:
                jobs = await self.watcher.query(trial.handle["job_id"] for trial in waiting.values())
            except PlatformError as exc:
                log.warning("slurm: cannot confirm that the cancelled jobs ended: %s", exc)
            for trial_id, trial in list(waiting.items()):
                job = jobs.get(trial.handle["job_id"])
                if (Path(trial.handle["trial_dir"]) / "result.json").exists() or job is None or job.ended:
                    waiting.pop(trial_id)
                else:
                    await self._escalate_cancel(trial)
            if waiting:
                await asyncio.sleep(0.5)
        if waiting:
            log.warning(
                "slurm: jobs of trials %s still ran %.0f s after the cancel", sorted(waiting), timeout
            )

    def _option(self, name: str) -> Any:
        return getattr(self.context.service_config, name, None)


@functools.cache
def _support_version() -> str:
    digest = hashlib.sha256(KEEPER_SCRIPT.read_bytes())
    for path in sorted((SHIM_PATH / "nni").rglob("*.py")):
        digest.update(path.relative_to(SHIM_PATH).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _copy_code(source: Path, target: Path) -> None:
    """Copy the shippable files of a code directory (``.nniignore`` honoured, NNI's size limits checked)."""
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for relative in check_code_dir(source):
        src, dst = source / relative, staging / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    staging.mkdir(parents=True, exist_ok=True)  # an empty code directory is still a directory
    os.replace(staging, target)
