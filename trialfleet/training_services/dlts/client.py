"""The DLTS dashboard's API (``<dashboard>api/...``), as NNI's removed service used it, over httpx.

Every call carries ``email`` and ``password`` (DLTS's md5 token of ``email:masterToken``) as query parameters.
DLTS's habits are turned into Python here, once: a refused submit answers HTTP 200 with ``{"error": ...}``
(:class:`DltsRefused`), an unknown job reads as ``{}`` (None), a kill that cannot happen answers 200 with
"Cannot Kill ..." (False), and the log answers 404 once there is nothing more to read. An unreachable
dashboard or a 5xx/429 is :class:`DltsUnavailable`: nothing happened, ask again later.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

import httpx

from trialfleet.errors import PlatformError

log = logging.getLogger(__name__)

TIMEOUT = 30.0
LOG_PAGES = 1000  # at most this many log pages per read: a log that never ends must not hang a reader


class DltsUnavailable(PlatformError):
    """The dashboard did not answer, or answered 5xx/429: retried later."""


class DltsRefused(PlatformError):
    """DLTS refused the request with a message of its own."""


class DashboardClient:
    """One dashboard, one user, one cluster."""

    def __init__(self, dashboard: str, cluster: str, email: str, password: str) -> None:
        self.dashboard = dashboard
        self.cluster = cluster
        self.email = email
        self.host = urlsplit(dashboard).netloc or dashboard
        self._http = httpx.AsyncClient(
            base_url=dashboard, params={"email": email, "password": password}, timeout=TIMEOUT
        )

    async def close(self) -> None:
        await self._http.aclose()

    # ---- requests ----------------------------------------------------------------------------------

    async def _request(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise DltsUnavailable(f"dlts: cannot reach the dashboard {self.host} to {what}: {exc!r}") from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise DltsUnavailable(self._describe(response, what))
        if response.status_code == 403:
            raise PlatformError(
                f"dlts: the dashboard {self.host} refused the credentials of {self.email} to {what} "
                f"(403 {response.text.strip() or 'Forbidden'}): check email and password (DLTS's md5 token)"
            )
        return response

    def _describe(self, response: httpx.Response, what: str) -> str:
        text = response.text.strip()[:500]
        return f"dlts: the dashboard {self.host} could not {what}: HTTP {response.status_code} {text}"

    def _json(self, response: httpx.Response, what: str) -> Any:
        if response.status_code != 200:
            raise PlatformError(self._describe(response, what))
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise PlatformError(self._describe(response, what) + " (not JSON)") from exc

    # ---- the API -----------------------------------------------------------------------------------

    async def gpu_type(self, team: str) -> str:
        """The first GPU model of the team's virtual cluster on this cluster (``metadata`` is a JSON string)."""
        what = f"read team {team!r} on cluster {self.cluster!r}"
        vc = self._json(await self._request("GET", f"api/teams/{team}/clusters/{self.cluster}", what), what)
        try:
            metadata = json.loads(vc["metadata"])
            return str(next(iter(metadata)))
        except (TypeError, KeyError, ValueError, StopIteration) as exc:
            raise PlatformError(
                f"dlts: team {team!r} on cluster {self.cluster!r} of {self.host} names no GPU type "
                f"(its answer: {json.dumps(vc)[:300]}); set gpuType"
            ) from exc

    async def submit(self, body: dict[str, Any]) -> str:
        """Submit a job; its id, or :class:`DltsRefused` with DLTS's message."""
        what = f"submit job {body.get('jobName')!r} to cluster {self.cluster!r}"
        answer = self._json(
            await self._request("POST", f"api/clusters/{self.cluster}/jobs", what, json=body), what
        )
        if isinstance(answer, dict) and "jobId" in answer:
            return str(answer["jobId"])
        message = answer.get("error") if isinstance(answer, dict) else None
        raise DltsRefused(f"dlts: {self.host} refused to {what}: {message or answer}")

    async def job(self, job_id: str) -> dict[str, Any] | None:
        """The job's v2 detail (``jobStatus``, ``jobStatusDetail`` …); None for a job DLTS does not know."""
        what = f"read job {job_id} on cluster {self.cluster!r}"
        detail = self._json(
            await self._request("GET", f"api/v2/clusters/{self.cluster}/jobs/{job_id}", what), what
        )
        if not isinstance(detail, dict):
            raise PlatformError(f"dlts: {self.host} answered {detail!r} to {what}")
        return detail or None

    async def error_message(self, job_id: str) -> str | None:
        """DLTS's ``errorMsg`` of a job (why the launcher gave up), which the v2 detail leaves out."""
        what = f"read the status of job {job_id} on cluster {self.cluster!r}"
        response = await self._request("GET", f"api/clusters/{self.cluster}/jobs/{job_id}/status", what)
        if response.status_code == 404:
            return None
        answer = self._json(response, what)
        return str(answer["message"]) if isinstance(answer, dict) and answer.get("message") else None

    async def kill(self, job_id: str) -> bool:
        """Ask DLTS to kill the job; False when it cannot (ended already, unknown)."""
        what = f"kill job {job_id} on cluster {self.cluster!r}"
        path = f"api/clusters/{self.cluster}/jobs/{job_id}/status"
        answer = self._json(await self._request("PUT", path, what, json={"status": "killing"}), what)
        result = str(answer.get("result", "")) if isinstance(answer, dict) else str(answer)
        if not result.startswith("Success"):
            log.debug("dlts: %s: %s", what, result)
        return result.startswith("Success")

    async def log(self, job_id: str) -> str:
        """The job's whole log as DLTS keeps it (its pods' output), read page by page with the log cursor."""
        what = f"read the log of job {job_id} on cluster {self.cluster!r}"
        path = f"api/clusters/{self.cluster}/jobs/{job_id}/log"
        parts: list[str] = []
        cursor: str | None = None
        for _ in range(LOG_PAGES):
            params = {"cursor": cursor} if cursor else None  # merged with the credentials
            response = await self._request("GET", path, what, params=params)
            if response.status_code == 404:  # nothing (more) to read
                break
            page = self._json(response, what)
            parts.append(_page_text(page.get("log")))
            cursor = page.get("cursor")
            if not cursor:  # the legacy log backend answers the whole text at once
                break
        return "".join(parts)


def _page_text(log_field: Any) -> str:
    """A log page: ``{pod name: text}`` (one pod for a RegularJob), or a plain text."""
    if isinstance(log_field, dict):
        return "".join(str(text) for _, text in sorted(log_field.items()))
    return str(log_field or "")
