"""A DLTS (DLWorkspace) dashboard emulator: the API NNI's removed ``dlts`` training service used, over real HTTP.

Start it in-process::

    with DltsEmulator(storage=tmp_path / "nfs") as dlts:
        httpx.post(f"{dlts.url}api/clusters/{dlts.cluster}/jobs", params=dlts.credentials, json={...})

or on its own with ``python -m tests.emulators.dlts --port P --storage DIR``.

It serves the dashboard routes of ``src/dashboard/server/api`` (v1 and v2) with their authentication
(``email`` + ``password`` = hex md5 of ``email:masterToken``), body checks, status codes and bodies; the
RestAPI's rules behind them (``SubmitJob``, job operations, logs, endpoints, VCs); and a job manager that moves
jobs ``unapproved`` -> ``queued`` -> ``scheduling`` -> ``running`` -> ``finished``/``failed`` (``killing`` ->
``killed``, ``pausing`` -> ``paused``, ``error``), running each job's ``cmd`` as a local container with the
cluster's NFS export (a host directory) mounted at ``/job``, ``/work``, ``/home/<alias>`` and ``/data``.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.emulators.container import remove_created_mountpoints
from tests.emulators.dlts import control
from tests.emulators.dlts.app import DashboardApp
from tests.emulators.dlts.backend import Backend
from tests.emulators.dlts.clock import Clock, ManualClock, SystemClock
from tests.emulators.dlts.config import (
    DEFAULT_DELAYS,
    ClusterSpec,
    EmulatorConfig,
    Team,
    User,
    alias_of,
    password_for,
)
from tests.emulators.dlts.faults import DEFAULT_LAUNCH_ERROR, Faults
from tests.emulators.dlts.jobs import Job
from tests.emulators.dlts.manager import JobManager
from tests.emulators.dlts.web import RequestLog, Server


class DltsEmulator:
    """One emulated DLTS installation: a dashboard on a free loopback port, its clusters, teams and users."""

    def __init__(
        self,
        storage: Path | str,
        *,
        cluster: str = "emu-cluster",
        team: str = "platform",
        email: str = "trialfleet@example.com",
        clusters: list[ClusterSpec] | None = None,
        teams: list[Team] | None = None,
        users: list[User] | None = None,
        master_token: str | None = None,
        delays: Mapping[str, float] | None = None,
        clock: Clock | None = None,
        wait_for_poll: bool = True,
        auto_approve: bool = True,
        log_backend: str = "elasticsearch",
        kill_grace: float = 1.0,
        launch_retries: int = 5,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.storage = Path(storage).resolve()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = EmulatorConfig(
            clusters=clusters or [ClusterSpec(cluster, self.storage)],
            teams=teams or [Team(team)],
            users=users or [User(email, {team: "User"})],
            master_token=master_token or secrets.token_hex(16),
            delays={**DEFAULT_DELAYS, **(delays or {})},
            wait_for_poll=wait_for_poll,
            auto_approve=auto_approve,
            log_backend=log_backend,
            kill_grace=kill_grace,
            launch_retries=launch_retries,
        )
        self.cluster = self.config.clusters[0].name
        self.team = self.config.teams[0].name
        self.email = self.config.users[0].email
        self.faults = Faults()
        self._log = RequestLog()
        self.backends = {
            c.name: Backend(c, self.config, self.clock, self.faults) for c in self.config.clusters
        }
        self.managers = {name: JobManager(backend) for name, backend in self.backends.items()}
        app = DashboardApp(
            self.config, self.backends, self.faults, self._log, lambda r: control.handle(self, r)
        )
        self._server = Server(app.dispatch, host, port)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> DltsEmulator:
        for spec in self.config.clusters:
            spec.work_root.mkdir(parents=True, exist_ok=True)
            spec.data_root.mkdir(parents=True, exist_ok=True)
            for user in self.config.users:
                (spec.work_root / user.alias).mkdir(exist_ok=True)  # DLTS creates each user's home on the NFS
        for name, manager in self.managers.items():
            thread = threading.Thread(
                target=manager.run, args=(self._stop,), name=f"dlts-jobs-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self._server.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for backend in self.backends.values():
            backend.wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._server.stop()
        for manager in self.managers.values():
            manager.shutdown()
        remove_created_mountpoints()

    def __enter__(self) -> DltsEmulator:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- what a client configures --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The dashboard URL, with the trailing slash NNI's ``dltsConfig.dashboard`` has."""
        return f"http://{self._server.host}:{self._server.port}/"

    @property
    def master_token(self) -> str:
        return self.config.master_token

    @property
    def password(self) -> str:
        return password_for(self.email, self.master_token)

    @property
    def credentials(self) -> dict[str, str]:
        """The query parameters every dashboard call carries."""
        return {"email": self.email, "password": self.password}

    def password_for(self, email: str) -> str:
        return password_for(email, self.master_token)

    def work_dir(self, email: str | None = None, cluster: str | None = None) -> Path:
        """The host directory of ``/work`` (default work path) and ``/home/<alias>`` for a user's jobs."""
        return self.backends[cluster or self.cluster].work_dir(email or self.email)

    def data_dir(self, cluster: str | None = None) -> Path:
        """The host directory of ``/data`` (default data path)."""
        return self.backends[cluster or self.cluster].spec.data_root

    def describe(self) -> dict[str, Any]:
        return {
            "dashboard": self.url,
            "cluster": self.cluster,
            "clusters": [c.name for c in self.config.clusters],
            "team": self.team,
            "email": self.email,
            "password": self.password,
            "master_token": self.master_token,
            "storage": str(self.storage),
            "work_dir": str(self.work_dir()),
            "data_dir": str(self.data_dir()),
        }

    # --- observing and steering ----------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._log.entries()

    def clear_requests(self) -> None:
        self._log.clear()

    def _find(self, job_id: str) -> tuple[Backend, Job]:
        for backend in self.backends.values():
            job = backend.table.get(job_id)
            if job is not None:
                return backend, job
        raise KeyError(job_id)

    def job(self, job_id: str) -> dict[str, Any]:
        backend, job = self._find(job_id)
        with backend.table.lock:
            pod = job.run
            return {
                "jobId": job.job_id,
                "cluster": backend.spec.name,
                "status": job.status,
                "history": [status for status, _ in job.history],
                "seen": job.seen,
                "errorMsg": job.error_msg,
                "jobStatusDetail": job.detail,
                "jobParams": job.params,
                "pid": pod.container.pid if pod is not None else None,
                "logPath": str(pod.log_path) if pod is not None else None,
                "log": job.log.text(),
                "endpoints": job.endpoints,
            }

    def jobs(self) -> list[dict[str, Any]]:
        return [self.job(j.job_id) for b in self.backends.values() for j in b.table.all()]

    def history(self, job_id: str) -> list[str]:
        return list(self.job(job_id)["history"])

    def set_delays(self, **delays: float) -> None:
        self.config.delays.update(delays)

    def set_scheduling_latency(self, seconds: float) -> None:
        """The scheduling-latency knob: every job waits ``seconds`` in ``queued`` before it is scheduled (a busy
        cluster's queue; the reuse benchmark sets 10 s)."""
        self.config.delays["queued"] = seconds

    def step(self) -> None:
        """One job manager pass on every cluster now (the background passes continue too)."""
        for manager in self.managers.values():
            manager.step()

    def pause(self, job_id: str) -> None:
        """An admin pauses the job (DLTS's PauseJob): ``pausing``, then ``paused`` once the pod is gone."""
        backend, job = self._find(job_id)
        admin = next(
            (u.email for u in self.config.users if self.config.has_access(u.email, job.vc_name, "Admin")),
            job.user_name,
        )
        if not backend.op_job(admin, job_id, "pause"):
            raise ValueError(f"job {job_id} cannot be paused from {job.status!r}")

    def fail_launch(self, message: str = DEFAULT_LAUNCH_ERROR, job_id: str | None = None) -> None:
        """The launcher fails on the next job (or ``job_id``) as often as it retries: the job turns ``error``."""
        self.faults.launch_error(message, count=self.config.launch_retries, job_id=job_id)

    def preempt(self, job_id: str) -> None:
        """The scheduler evicts a preemptible job: its pod is deleted and it is ``queued`` again."""
        backend, _ = self._find(job_id)
        self.managers[backend.spec.name].evict(job_id)

    def lose(self, job_id: str) -> None:
        """The job disappears from the database: reads answer ``{}``, kills "Cannot Kill", its pod is deleted."""
        backend, _ = self._find(job_id)
        with backend.table.lock:
            job = backend.table.remove(job_id)
            if job is not None:
                self.managers[backend.spec.name].forget(job)


__all__ = ["ClusterSpec", "DltsEmulator", "ManualClock", "SystemClock", "Team", "User", "alias_of"]
