"""One cluster's RestAPI (``src/RestAPI/dlwsrestapi.py`` over ``JobRestAPIUtils``): what the dashboard forwards to.

Methods return what the Flask resource returns; the dashboard layer (``dashboard.py``) turns that into HTTP.
A job whose status a client reads is marked *seen*, which lets the job manager move it on.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.emulators.dlts.clock import Clock
from tests.emulators.dlts.config import ClusterSpec, EmulatorConfig, alias_of
from tests.emulators.dlts.faults import Faults
from tests.emulators.dlts.jobs import (
    ACTIVE_STATUS,
    JobTable,
    can_operate,
    can_read,
    detail_v1,
    detail_v2,
    list_record_v1,
    list_record_v2,
)
from tests.emulators.dlts.submit import DEFAULT_JOB_PRIORITY, PRIORITY_RANGES, SubmitContext, submit_job
from tests.emulators.dlts.vc import node_status, vc_row, vc_status

# job_op.py: (states an operation accepts, the state it sets)
OPS: dict[str, tuple[frozenset[str], str]] = {
    "kill": (frozenset({"unapproved", "queued", "scheduling", "running", "pausing", "paused"}), "killing"),
    "pause": (frozenset({"unapproved", "queued", "scheduling", "running"}), "pausing"),
    "resume": (frozenset({"paused"}), "unapproved"),
    "approve": (frozenset({"unapproved"}), "queued"),
}
PAST_TENSE = {"kill": "killed", "pause": "paused", "resume": "resumed", "approve": "approved"}


class Backend:
    def __init__(self, spec: ClusterSpec, config: EmulatorConfig, clock: Clock, faults: Faults) -> None:
        self.spec = spec
        self.config = config
        self.clock = clock
        self.faults = faults
        self.table = JobTable()
        self.wake = threading.Event()  # set on every change, so the job manager looks again at once
        self.logs_dir = spec.storage / ".dlts-emulator" / "pod-logs"

    def set_status(self, job_id: str, status: str) -> None:
        job = self.table.get(job_id)
        if job is not None:
            now = self.clock.time()
            job.status, job.entered_at, job.seen = status, now, False
            job.history.append((status, now))
            self.wake.set()

    # --- jobs -------------------------------------------------------------------------------------------

    def post_job(self, params: dict[str, Any]) -> dict[str, Any]:
        """``PostJob``: ``{"jobId"}``, or ``{"error": "Cannot create job!..."}``; raises BackendFailure (500)."""
        injected = self.faults.take_submit_error()
        if injected is not None:
            return {"error": "Cannot create job!" + injected}
        with self.table.lock:
            ctx = SubmitContext(self.config, self.clock.time(), self._add_job, self._set_priority)
            output = submit_job(params, ctx)
        self.wake.set()
        if "jobId" in output:
            return {"jobId": output["jobId"]}
        return {"error": "Cannot create job!" + output.get("error", "")}

    def _add_job(self, params: dict[str, Any]) -> bool:
        return self.table.add(params, self.clock.time())

    def _set_priority(self, job_id: str, priority: int) -> None:
        job = self.table.get(job_id)
        if job is not None:
            job.priority = priority

    def job_detail_v2(self, email: str, job_id: str) -> dict[str, Any]:
        """``GetJobDetailV2``: ``{}`` for an unknown job or one the user may not read."""
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None or not can_read(self.config, email, job):
                return {}
            job.seen = True
            self.wake.set()
            return detail_v2(job)

    def job_detail_v1(self, email: str, job_id: str) -> dict[str, Any] | None:
        """``GetJobDetail``; None where Flask fails on the missing job (a 500, so the dashboard's 502)."""
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None or not can_read(self.config, email, job):
                return None
            job.seen = True
            self.wake.set()
            legacy = self.config.log_backend == "legacy"
            return detail_v1(job, job.log.text() if legacy else "")

    def job_status(self, job_id: str) -> dict[str, Any] | None:
        """``GetJobStatus``: no access check at all; None for an unknown job."""
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None:
                return None
            job.seen = True
            self.wake.set()
            return {"errorMsg": job.error_msg, "jobStatus": job.status, "jobTime": job.job_time}

    def op_job(self, email: str, job_id: str, op: str) -> bool:
        """``op_job``: the owner or a VC admin moves the job from an accepted state to the op's state."""
        from_states, to_state = OPS[op]
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None or not can_operate(self.config, email, job) or job.status not in from_states:
                return False
            self.set_status(job_id, to_state)
            return True

    def op_jobs(self, email: str, job_ids: list[str], op: str) -> dict[str, str]:
        """``op_jobs``: a message per known job id (unknown ids are left out)."""
        from_states, _ = OPS[op]
        result: dict[str, str] = {}
        with self.table.lock:
            for job_id in job_ids:
                job = self.table.get(job_id)
                if job is None:
                    continue
                if not can_operate(self.config, email, job):
                    result[job_id] = f"unauthorized to {op}"
                elif job.status not in from_states:
                    result[job_id] = f'cannot {op} a(n) "{job.status}" job'
                else:
                    self.set_status(job_id, OPS[op][1])
                    result[job_id] = f"successfully {PAST_TENSE[op]}"
        return result

    def job_log(self, email: str, job_id: str, cursor: str | None) -> dict[str, Any]:
        """``GetJobLog``: ``{"log": {pod: text}, "cursor"}``, or the whole text in the legacy backend."""
        with self.table.lock:
            job = self.table.get(job_id)
            if job is None or not can_read(self.config, email, job):
                return {"cursor": None, "log": {}}
            if self.config.log_backend == "legacy":
                text = job.log.text()
                return {"cursor": None, "log": text} if text else {"cursor": None, "log": {}}
            pods, next_cursor = job.log.page(cursor)
            return {"cursor": next_cursor, "log": pods}

    def list_jobs(self, email: str, vc_name: str, owner: str, num: int) -> list[Any]:
        """``get_job_list`` rows (all active jobs, then the latest ``num`` others) of a VC."""
        everyone = owner == "all" and self.config.has_access(email, vc_name, "Collaborator")
        with self.table.lock:
            jobs = self.table.union_list(email, vc_name, everyone, num)
            for job in jobs:
                job.seen = True
            self.wake.set()
            return jobs

    def list_jobs_v1(self, email: str, vc_name: str, owner: str, num: int) -> dict[str, list[dict[str, Any]]]:
        return _categorize([list_record_v1(j) for j in self.list_jobs(email, vc_name, owner, num)])

    def list_jobs_v2(self, email: str, vc_name: str, owner: str, num: int) -> dict[str, list[dict[str, Any]]]:
        return _categorize([list_record_v2(j) for j in self.list_jobs(email, vc_name, owner, num)])

    def priorities(self) -> dict[str, int]:
        with self.table.lock:
            return {j.job_id: j.priority for j in self.table.all() if j.priority is not None}

    def update_priorities(self, email: str, wanted: dict[str, Any]) -> tuple[Any, int]:
        """``update_job_priorites``: owners and VC admins only; answers the active jobs' new priorities."""
        with self.table.lock:
            active: dict[str, int] = {}
            for job_id, priority in wanted.items():
                job = self.table.get(job_id)
                if job is None:
                    continue
                admin = self.config.has_access(email, job.vc_name, "Admin")
                if job.user_name != email and not admin:
                    return (
                        f"Operation aborted. User {job.user_name} is unauthorized to update priority for job {job_id}",
                        403,
                    )
                low, high = PRIORITY_RANGES["Admin" if admin else "User"]
                job.priority = min(max(int(priority), low), high)
                if job.status in ACTIVE_STATUS:
                    active[job_id] = job.priority
        return {job_id: active.get(job_id, DEFAULT_JOB_PRIORITY) for job_id in wanted}, 200

    # --- teams ------------------------------------------------------------------------------------------

    def list_vcs(self, email: str) -> list[dict[str, Any]]:
        rows = []
        for team in self.config.teams:
            if self.config.has_access(email, team.name, "User"):
                rows.append({**vc_row(team), "admin": self.config.has_access(email, team.name, "Admin")})
        return rows

    def get_vc(self, email: str, vc_name: str) -> dict[str, Any] | None:
        team = self.config.team(vc_name)
        if team is None or not self.config.has_access(email, vc_name, "User"):
            return None
        with self.table.lock:
            jobs = [j for j in self.table.all() if j.vc_name == vc_name]
            return vc_status(team, jobs, node_status(self.config.teams))

    def work_dir(self, email: str) -> Path:
        """The host directory a user's ``/work`` (with the default work path) and ``/home/<alias>`` map to."""
        return self.spec.work_root / alias_of(email)


def _categorize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``ListJobs``: running training jobs, running visualization jobs, waiting ones, and the rest as finished.

    A running job of any other ``jobType`` is dropped, as DLTS does.
    """
    groups: dict[str, list[dict[str, Any]]] = {
        "queuedJobs": [],
        "runningJobs": [],
        "finishedJobs": [],
        "visualizationJobs": [],
    }
    for record in records:
        if record["jobStatus"] == "running":
            kind = {"training": "runningJobs", "visualization": "visualizationJobs"}.get(record["jobType"])
            if kind:
                groups[kind].append(record)
        elif record["jobStatus"] in ("queued", "scheduling", "unapproved"):
            groups["queuedJobs"].append(record)
        else:
            groups["finishedJobs"].append(record)
    return {**groups, "meta": {name: len(items) for name, items in groups.items()}}


__all__ = ["OPS", "Backend"]
