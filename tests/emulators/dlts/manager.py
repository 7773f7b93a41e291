"""The job manager (``src/ClusterManager/job_manager.py`` and ``job_launcher.py``): moves jobs through their states.

``unapproved`` -> ``queued`` (``ApproveJob``, user quota) -> ``scheduling`` (the scheduler found GPUs and the
launcher created the pod) -> ``running`` (the container started) -> ``finished``/``failed`` (its exit code);
``killing`` -> ``killed`` and ``pausing`` -> ``paused`` once the pod is deleted; ``error`` when the launcher keeps
failing. A preemptible job the scheduler must evict goes back to ``queued``.

A job leaves a state only after the state's delay on the emulator's clock and, with ``wait_for_poll``, after a
client has read that state, so every state is seen at least once.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from tests.emulators.dlts.backend import Backend
from tests.emulators.dlts.clock import iso_utc
from tests.emulators.dlts.endpoints import advance_endpoints, reset_endpoints
from tests.emulators.dlts.jobs import Job
from tests.emulators.dlts.launch import (
    POD_IP,
    LaunchError,
    LaunchRefused,
    Pod,
    bootstrap_exit_line,
    check_launchable,
    missing_volumes,
    pod_mounts,
    pod_variables,
    start_pod,
)
from tests.emulators.dlts.scheduler import plan
from tests.emulators.dlts.statusdetail import pod_detail, with_finished_time
from tests.emulators.dlts.vc import job_gpus

STOPPING = {"killing": "killed", "pausing": "paused", "preempting": "queued"}


class JobManager:
    """One pass over every job of a cluster per :meth:`step`; :meth:`run` loops until stopped."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.config = backend.config
        self.table = backend.table
        self._gpu_busy: dict[str, list[int]] = {}  # job id -> indices of the fake GPUs it holds
        self._evicting: set[str] = set()  # preemptible jobs being moved back to queued

    def run(self, stop: threading.Event, period: float = 0.02) -> None:
        while not stop.is_set():
            self.step()
            self.backend.wake.wait(period)
            self.backend.wake.clear()

    def step(self) -> None:
        with self.table.lock:
            for job in self.table.all():
                self._advance(job)
            self._schedule()
            for job in self.table.all():
                advance_endpoints(job)

    def _ready(self, job: Job) -> bool:
        if self.backend.faults.held(job.status):
            return False
        if self.config.wait_for_poll and not job.seen:
            return False
        return self.backend.clock.time() - job.entered_at >= self.config.delays.get(job.status, 0.0)

    def _advance(self, job: Job) -> None:
        status = job.status
        if job.run is not None and status in ("running", "killing", "pausing"):
            job.log.ingest(job.run.log_path, job.job_id, self.backend.clock.time())
        if job.job_id in self._evicting:
            self._stop(job, "preempting")
        elif status == "unapproved" and self._ready(job):
            self._approve(job)
        elif status == "scheduling" and self._ready(job):
            self._start(job)
        elif status == "running" and job.run is not None:
            self._watch(job)
        elif status in ("killing", "pausing"):
            self._stop(job, status)

    def _approve(self, job: Job) -> None:
        """``ApproveJob``: within the user quota (if the VC sets one) the job is queued, else it waits."""
        team = self.config.team(job.vc_name)
        if team is None or not self.config.auto_approve:
            return
        preemptible = _preemptible(job)
        if not preemptible and team.user_quota is not None:
            held = sum(
                job_gpus(j)
                for j in self.table.all()
                if j.user_name == job.user_name
                and j.vc_name == job.vc_name
                and j.status in ("running", "queued", "scheduling")
                and not _preemptible(j)
            )
            wanted = job_gpus(job)
            if wanted > 0 and team.user_quota < held + wanted:
                job.detail = [
                    {
                        "message": (
                            f"exceeds the user quota in VC: {held} (used) + {wanted} (requested) > "
                            f"{team.user_quota} (user quota). Will need admin approval."
                        )
                    }
                ]
                return
        message = (
            "waiting for available preemptible resource."
            if preemptible
            else "waiting for available resource."
        )
        job.detail = [{"message": message}]
        self.backend.set_status(job.job_id, "queued")

    def _schedule(self) -> None:
        """``take_job_actions``: launch the allowed queued jobs, evict preemptible ones that lost their GPUs."""
        for job, allowed, message in plan(self.table.all(), self.config):
            if job.status == "queued" and allowed and self._ready(job):
                self._launch(job)
            elif job.status in ("scheduling", "running") and not allowed and _preemptible(job):
                self._evicting.add(job.job_id)
            elif job.status == "queued" and not allowed:
                job.detail = [{"message": message}]

    def _launch(self, job: Job) -> None:
        """``submit_job_impl``: the pod is created (``scheduling``), or the attempt fails."""
        now = self.backend.clock.time()
        try:
            injected = self.backend.faults.take_launch_error(job.job_id)
            if injected is not None:
                raise LaunchError(injected)
            check_launchable(job.params)
            pod_mounts(job.params, self.backend.spec)  # a mountpoint the emulator cannot serve fails here
        except LaunchRefused as refused:
            job.error_msg = str(refused)  # SetJobError: the job stays queued and is tried again
            job.entered_at = now
            return
        except LaunchError as error:
            self._launch_failed(job, str(error))
            return
        reset_endpoints(job)
        job.detail = [{"finishedAt": iso_utc(now), "hostIP": POD_IP, "message": "ContainerCreating"}]
        self.backend.set_status(job.job_id, "scheduling")

    def _launch_failed(self, job: Job, message: str) -> None:
        job.launch_failures += 1
        job.entered_at = self.backend.clock.time()  # the next attempt comes one queued delay later
        if job.launch_failures >= self.config.launch_retries:
            job.error_msg = "Cannot submit job!" + message
            job.detail = with_finished_time(
                job.detail, "error", self.backend.clock.time(), "Server error in job submission"
            )
            self.backend.set_status(job.job_id, "error")

    def _start(self, job: Job) -> None:
        """The kubelet mounts the volumes and starts the container; the pod runs once they are there."""
        mounts = pod_mounts(job.params, self.backend.spec)
        if missing_volumes(mounts):
            return  # the NFS mount fails: the pod stays ContainerCreating and the job scheduling
        now = self.backend.clock.time()
        gpu_ids = self._take_gpus(job)
        env = pod_variables(job.params, self.config, gpu_ids)
        self.backend.logs_dir.mkdir(parents=True, exist_ok=True)
        job.run = start_pod(job.params, mounts, env, self.backend.logs_dir, now)
        started = iso_utc(now)
        job.detail = [{"message": f"started at: {started}", "startedAt": started}]
        self.backend.set_status(job.job_id, "running")

    def _watch(self, job: Job) -> None:
        """``UpdateJobStatus``: a pod that ended makes the job ``finished`` (exit 0) or ``failed``."""
        pod: Pod = job.run
        code = pod.container.poll()
        if code is None or not self._ready(job):
            return
        now = self.backend.clock.time()
        pod.exit_code = code
        job.log.ingest(pod.log_path, job.job_id, now, final=True)
        job.log.append(job.job_id, bootstrap_exit_line(code, now), now)
        status = "finished" if code == 0 else "failed"
        job.detail = with_finished_time(job.detail, status, now)
        if status == "failed":
            job.error_msg = ""  # the python launcher reports no diagnostics
        self._extract_log(job)
        self._delete_pod(job, wait=True)
        self.backend.set_status(job.job_id, status)

    def _stop(self, job: Job, status: str) -> None:
        """``kill_job_impl``: the pod is deleted, then the job takes the desired state."""
        if status != "preempting" and not self._ready(job):
            return
        pod: Pod | None = job.run
        now = self.backend.clock.time()
        if pod is not None and not pod.stopped.is_set():
            if pod.detail is None:
                pod.detail = pod_detail(pod, job.status, now)  # read before the pod is deleted
                threading.Thread(target=self._kill_pod, args=(pod,), daemon=True).start()
            return
        detail = pod.detail if pod is not None else pod_detail(None, job.status, now)
        job.detail = with_finished_time(detail, STOPPING[status], now)
        self._delete_pod(job, wait=False)
        self._evicting.discard(job.job_id)
        self.backend.set_status(job.job_id, STOPPING[status])

    def _kill_pod(self, pod: Pod) -> None:
        try:
            pod.exit_code = pod.container.stop(grace=self.config.kill_grace)
        finally:
            pod.stopped.set()
            self.backend.wake.set()

    def _delete_pod(self, job: Job, *, wait: bool) -> None:
        pod: Pod | None = job.run
        if pod is not None:
            if wait:
                pod.container.stop(grace=0)  # only stragglers left in the background remain to be killed
            pod.close_services()
            # fluentd ships what the pod printed up to its end, also when it was killed
            job.log.ingest(pod.log_path, job.job_id, self.backend.clock.time(), final=True)
        job.run = None
        self._gpu_busy.pop(job.job_id, None)
        advance_endpoints(job)

    def _extract_log(self, job: Job) -> None:
        """``_extract_job_log``: one page after ``jobLogCursor`` appended to ``logs/log-pod-<pod>.txt`` in /job."""
        if self.config.log_backend != "elasticsearch":
            return
        pods, cursor = job.log.page(job.log_cursor)
        directory = self.backend.spec.work_root / job.params["jobPath"] / "logs"
        directory.mkdir(parents=True, exist_ok=True)
        for pod_name, text in pods.items():
            with open(directory / f"log-pod-{pod_name}.txt", "a", encoding="utf-8") as out:
                out.write(text)
        if cursor is not None:
            job.log_cursor = cursor

    def _take_gpus(self, job: Job) -> list[str]:
        busy = {i for ids in self._gpu_busy.values() for i in ids}
        free = [i for i in range(10_000) if i not in busy][: job_gpus(job)]
        self._gpu_busy[job.job_id] = free
        cluster = self.backend.spec.name
        return [f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'dlts-emulator/{cluster}/{i}')}" for i in free]

    def evict(self, job_id: str) -> None:
        """Preempt a preemptible job as the scheduler does when its GPUs are needed: back to ``queued``."""
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None or job.status not in ("scheduling", "running"):
                raise ValueError(f"job {job_id} is not scheduling or running")
            if not _preemptible(job):
                raise ValueError(f"job {job_id} is not preemptible; DLTS never preempts it")
            self._evicting.add(job_id)
            self.backend.wake.set()

    def forget(self, job: Job) -> None:
        """A job lost from the database: its pod is deleted and nothing of it stays."""
        pod: Pod | None = job.run
        if pod is not None:
            threading.Thread(target=pod.container.stop, args=(self.config.kill_grace,), daemon=True).start()
            pod.close_services()
        self._gpu_busy.pop(job.job_id, None)
        self._evicting.discard(job.job_id)

    def shutdown(self) -> None:
        with self.table.lock:
            pods: list[Any] = [j.run for j in self.table.all() if j.run is not None]
        for pod in pods:
            pod.close_services()
            pod.container.stop(grace=0)


def _preemptible(job: Job) -> bool:
    return job.params.get("preemptionAllowed") is True


__all__ = ["JobManager"]
