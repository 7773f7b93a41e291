"""Command jobs and the asynchronous state machine that moves them, as AML does (cluster-platforms.md §6.3, §9.4):

    NotStarted → Starting → (Provisioning) → Preparing → Queued → Running → Finalizing → Completed | Failed
    any state before the end → CancelRequested → Canceled;   NotResponding and Paused by fault knobs only

A state is left only after ``Timing.state_delay`` has passed on the emulator's clock *and*, when
``Timing.require_seen`` is on, after some client was shown it (a job GET, a list, run details): every state stays
visible for at least one client poll however fast the machine is. Running is left when the command's process ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.emulators.container import Container

from .clock import Clock

IN_PROGRESS = ("NotStarted", "Starting", "Provisioning", "Preparing", "Queued", "Running")
POST_PROCESSING = ("CancelRequested", "Finalizing")
TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding", "Paused")


@dataclass
class Timing:
    state_delay: float = 0.05  # least time in each passing state (emulator clock seconds)
    require_seen: bool = True  # leave a state only once a client has been shown it
    provisioning: bool = False  # pass through Provisioning, as when the cluster scales up from zero
    cancel_grace: float = 3.0  # SIGTERM, then SIGKILL after this many seconds
    tick: float = 0.01  # how often the controller looks at the jobs (real seconds)
    queue_latency: float = 0.0  # the scheduling-latency knob: extra time every job spends Queued


@dataclass
class Job:
    name: str
    properties: dict[str, Any]  # as the client sent them, plus what the service fills in
    created: float
    status: str = "NotStarted"
    entered: float = 0.0
    seen: bool = False
    history: list[tuple[str, float]] = field(default_factory=list)
    container: Container | None = None
    exit_code: int | None = None
    error: dict[str, Any] | None = None
    start_time: float | None = None
    end_time: float | None = None
    cancel_requested: bool = False
    stopping: bool = False
    hidden_gets: int = 0  # GETs still answered 404 (eventual consistency after create)
    hold: str | None = None  # a state this job may not leave (quota, stuck pool)
    archived: bool = False
    deleted: bool = False  # DELETE accepted: cancelled if need be, then removed once terminal

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def run_error(code: str, message: str, location: str, when: float) -> dict[str, Any]:
    """Run history's ErrorResponse: where AML puts why a run failed (the job resource has no error)."""
    return {
        "error": {
            "code": code,
            "message": message,
            "messageFormat": message,
            "messageParameters": {},
            "details": [],
        },
        "environment": location,
        "location": location,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S.000000+00:00", time.gmtime(when)),
        "componentName": "CommonRuntime",
    }


class JobEngine:
    """Owns every job and moves each one on; ``launch`` starts a job's container, ``finish`` runs after its end."""

    def __init__(
        self,
        clock: Clock,
        timing: Timing,
        launch: Callable[[Job], Container],
        failure_for: Callable[[Job], tuple[str, str] | None],
        location: str,
        finish: Callable[[Job], None] | None = None,
    ) -> None:
        self.clock = clock
        self.timing = timing
        self.launch = launch
        self.failure_for = failure_for  # a (code, message) for a job whose preparation must fail (image pull)
        self.finish = finish
        self.location = location
        self.jobs: dict[str, Job] = {}
        self.held_states: set[str] = set()  # states no job may leave (e.g. Queued: no quota)
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="aml-emulator-jobs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        with self.lock:
            containers = [job.container for job in self.jobs.values() if job.container is not None]
        for container in containers:
            container.stop(grace=1.0)

    def add(self, job: Job) -> None:
        with self.lock:
            job.entered = self.clock.now()
            job.history.append((job.status, job.entered))
            self.jobs[job.name] = job

    def observe(self, job: Job) -> str:
        """The status a client is shown now; showing it lets the job leave that state."""
        with self.lock:
            job.seen = True
            return job.status

    def request_cancel(self, job: Job) -> None:
        with self.lock:
            if not job.terminal:
                job.cancel_requested = True
                self._step(job, self.clock.now())

    def force(self, job: Job, status: str, error: dict[str, Any] | None = None) -> None:
        """Put a job straight into ``status`` (fault knobs: NotResponding, Paused, node loss)."""
        with self.lock:
            if status in TERMINAL and job.container is not None and job.container.poll() is None:
                job.container.stop(grace=0.1)
            if error is not None:
                job.error = error
            self._enter(job, status, self.clock.now())

    def _loop(self) -> None:
        while not self._stop.wait(self.timing.tick):
            self.step_all()

    def step_all(self) -> None:
        now = self.clock.now()
        with self.lock:
            for job in list(self.jobs.values()):
                try:
                    self._step(job, now)
                except Exception as error:  # one broken job must not stop the controller
                    job.error = run_error(
                        "SystemError", f"The emulator failed to run the job: {error}", self.location, now
                    )
                    self._enter(job, "Failed", now)
                if job.deleted and job.terminal and not job.stopping:
                    del self.jobs[job.name]

    def _enter(self, job: Job, status: str, now: float) -> None:
        if status == job.status:
            return
        job.status, job.entered, job.seen = status, now, False
        job.history.append((status, now))
        if status in TERMINAL:
            job.end_time = job.end_time or now
            if self.finish is not None:
                self.finish(job)

    def _ready(self, job: Job, now: float) -> bool:
        if job.hold == job.status or job.status in self.held_states:
            return False
        if self.timing.require_seen and not job.seen:
            return False
        extra = self.timing.queue_latency if job.status == "Queued" else 0.0
        return now - job.entered >= self.timing.state_delay + extra

    def _step(self, job: Job, now: float) -> None:
        if job.terminal:
            return
        if job.cancel_requested and job.status != "CancelRequested":
            self._enter(job, "CancelRequested", now)
            self._stop_container(job)
            return
        if not self._ready(job, now):
            return
        following = self._next(job, now)
        if following is not None:
            self._enter(job, following, now)

    def _next(self, job: Job, now: float) -> str | None:
        status = job.status
        if status == "NotStarted":
            return "Starting"
        if status == "Starting":
            return "Provisioning" if self.timing.provisioning else "Preparing"
        if status == "Provisioning":
            return "Preparing"
        if status == "Preparing":
            return self._after_preparing(job, now)
        if status == "Queued":
            job.container = self.launch(job)
            job.start_time = now
            return "Running"
        if status == "Running":
            return self._after_running(job, now)
        if status == "Finalizing":
            return "Completed" if job.exit_code == 0 else "Failed"
        if status == "CancelRequested":
            return "Canceled" if not job.stopping else None
        return None

    def _after_preparing(self, job: Job, now: float) -> str:
        failure = self.failure_for(job)
        if failure is None:
            return "Queued"
        job.error = run_error(failure[0], failure[1], self.location, now)
        return "Failed"

    def _after_running(self, job: Job, now: float) -> str | None:
        assert job.container is not None
        code = job.container.poll()
        if code is None:
            return None
        job.exit_code = code
        if code != 0:
            message = (
                f"Execution failed. User process 'bash' exited with status code {code}. "
                "Please check log file 'user_logs/std_log.txt' for error details."
            )
            job.error = run_error("UserError", message, self.location, now)
        return "Finalizing"

    def _stop_container(self, job: Job) -> None:
        container = job.container
        if container is None or container.poll() is not None:
            return
        job.stopping = True

        def stop() -> None:
            code = container.stop(grace=self.timing.cancel_grace)
            with self.lock:
                job.exit_code = code
                job.stopping = False

        threading.Thread(target=stop, name=f"aml-cancel-{job.name}", daemon=True).start()
