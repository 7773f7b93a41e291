"""Ray's Jobs API through its maintained client, ``ray.job_submission.JobSubmissionClient``, made async.

The client is synchronous (``requests``) except for following a log (an ``aiohttp`` WebSocket); its calls run in
threads with a time limit. Every failure becomes a :class:`~trialfleet.errors.PlatformError` naming the head's
address and Ray's own message; a submission id that is taken already is :class:`SubmittedAlready`. ``ray`` is
imported here, when the platform is used, never by ``platform: local``.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.extras import install_hint
from trialfleet.training_services.ray.status import RayJob

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

    from trialfleet.training_services.ray.submission import JobRequest

CALL_TIMEOUT = 60.0  # the head answering nothing for this long counts as unreachable
T = TypeVar("T")
_STATUS = re.compile(r"Request failed with status code (\d+)")
_REFUSALS = (400, 413, 422)  # the request itself is wrong: sending it again changes nothing


class SubmittedAlready(PlatformError):
    """Ray has a job with this submission id already (Ray refuses a second one: this is how submit is idempotent)."""


class RequestRefused(PlatformError):
    """Ray refused the request as malformed (400): sending it again would be refused again."""


class RayJobs:
    """One Ray cluster's Jobs API, at ``address`` (the head's dashboard)."""

    def __init__(self, address: str, headers: Mapping[str, str]) -> None:
        self.address = address
        self.headers = dict(headers)
        self._client: JobSubmissionClient | None = None

    async def connect(self) -> None:
        """Build the client, which checks that the head answers and runs a Ray with the Jobs API."""
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError as exc:
            raise PlatformError(
                f"ray: the Ray client is not installed ({exc}); {install_hint('ray')}"
            ) from exc
        make = functools.partial(JobSubmissionClient, self.address, headers=self.headers or None)
        self._client = await self._call(make, "connecting")

    async def submit(self, request: JobRequest) -> None:
        client = self._connected()
        try:
            await self._call(
                functools.partial(client.submit_job, **request.kwargs()),
                f"submitting {request.submission_id}",
            )
        except PlatformError as exc:
            if "already exists" in str(exc):
                raise SubmittedAlready(str(exc)) from exc
            raise

    async def jobs(self) -> dict[str, RayJob]:
        """Every submission job the cluster knows, by submission id: one request."""
        client = self._connected()
        details = await self._call(client.list_jobs, "listing jobs")
        jobs = [job_of(detail) for detail in details if detail.submission_id]
        return {job.submission_id: job for job in jobs}

    async def job(self, submission_id: str) -> RayJob | None:
        client = self._connected()
        try:
            return job_of(
                await self._call(functools.partial(client.get_job_info, submission_id), "reading a job")
            )
        except PlatformError as exc:
            if "does not exist" in str(exc):
                return None
            raise

    async def stop(self, submission_id: str) -> bool:
        client = self._connected()
        return bool(
            await self._call(functools.partial(client.stop_job, submission_id), f"stopping {submission_id}")
        )

    async def logs(self, submission_id: str) -> str:
        client = self._connected()
        text = await self._call(functools.partial(client.get_job_logs, submission_id), "reading a job's log")
        return str(text)

    async def follow(self, submission_id: str) -> AsyncIterator[str]:
        """The job's log from its beginning, chunk by chunk, until the job ended (a WebSocket)."""
        client = self._connected()
        try:
            async for chunk in client.tail_job_logs(submission_id):
                yield chunk
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # aiohttp's errors, or RuntimeError for a connection closed early
            raise self._error(exc, f"following the log of {submission_id}") from exc

    # ---- plumbing ---------------------------------------------------------------------------------------

    def _connected(self) -> JobSubmissionClient:
        if self._client is None:
            raise PlatformError(f"ray: not connected to {self.address}")
        return self._client

    async def _call(self, function: Callable[[], T], what: str) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(function), CALL_TIMEOUT)
        except asyncio.TimeoutError as exc:  # not the builtin before Python 3.11
            raise PlatformError(
                f"ray: {what}: the head at {self.address} did not answer in {CALL_TIMEOUT:g} s"
            ) from exc
        except Exception as exc:
            raise self._error(exc, what) from exc

    def _error(self, exc: BaseException, what: str) -> PlatformError:
        message = " ".join(str(exc).split()) or type(exc).__name__
        if len(message) > 2000:  # Ray's 500s carry a whole server traceback
            message = message[:1000] + " … " + message[-800:]
        status = _STATUS.search(str(exc))
        refused = status is not None and int(status.group(1)) in _REFUSALS
        error_class = RequestRefused if refused else PlatformError
        return error_class(f"ray: {what} at {self.address} failed: {message}")


def job_of(details: Any) -> RayJob:
    """Ray's ``JobDetails`` → :class:`RayJob`."""
    status = getattr(details.status, "value", details.status)
    error_type = getattr(details.error_type, "value", details.error_type)
    return RayJob(
        submission_id=str(details.submission_id),
        status=str(status),
        error_type=str(error_type) if error_type else None,
        message=details.message,
        exit_code=details.driver_exit_code,
        node_id=details.driver_node_id,
        metadata=dict(details.metadata or {}),
    )
