"""OpenPAI's REST server v2 over httpx (OpenPAI has no maintained Python client).

Only what the service needs: cluster info, storages, virtual clusters, jobs (submit, detail, list, stop) and the
log manager. Errors are translated here, once: every failure is a :class:`PaiApiError` (a PlatformError) that
names the host, what was asked, the HTTP status and OpenPAI's own ``code`` and ``message``; a rate limit is a
:class:`RateLimited` carrying when the window resets. Transient failures (5xx, a broken connection) are retried
a few times with back-off before they are raised; a 429 is never retried here, the caller paces itself.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from trialfleet.errors import PlatformError

log = logging.getLogger(__name__)

API_PREFIX = "/rest-server/api/v2"
TIMEOUT = 30.0


class PaiApiError(PlatformError):
    """A request OpenPAI refused or could not answer."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status  # None: no HTTP answer at all
        self.code = code  # OpenPAI's error code: NoJobError, ConflictJobError, …

    @property
    def transient(self) -> bool:
        return self.status is None or self.status >= 500


class RateLimited(PaiApiError):
    """HTTP 429: one of OpenPAI's rate limits (600 requests a minute, 60 job lists a minute, 60 jobs an hour)."""

    def __init__(self, message: str, *, reset: float, what: str) -> None:
        super().__init__(message, status=429)
        self.reset = reset  # epoch seconds when the limit's window starts again
        self.what = what  # the request refused: "submitting job x", "the job list", …


def token_claims(token: str) -> dict[str, Any]:
    """The payload of an OpenPAI token (a JWT), unverified; empty when the token is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return {}
    return payload if isinstance(payload, dict) else {}


def authorization(username: str, token: str) -> str:
    """A user token goes as a bearer token; an application token as Basic ``user:token`` (OpenPAI's rule)."""
    if token_claims(token).get("application") is True:
        return "Basic " + base64.b64encode(f"{username}:{token}".encode()).decode()
    return f"Bearer {token}"


class OpenpaiClient:
    """One user's view of one OpenPAI cluster at ``host`` (``https://pai.example.org``)."""

    retries = 3  # further tries of a request that failed transiently …
    backoff = 0.5  # … after this many seconds, doubling each time

    def __init__(
        self, host: str, username: str, token: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.host = host
        self.username = username
        self._http = httpx.AsyncClient(
            base_url=host + API_PREFIX,
            headers={"Authorization": authorization(username, token)},
            timeout=TIMEOUT,
            transport=transport,
        )

    async def close(self) -> None:
        await self._http.aclose()

    def framework(self, job: str) -> str:
        """``{user}~{job}``, as it goes into a URL path."""
        return quote(f"{self.username}~{job}", safe="~")

    # ---- the API ---------------------------------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        return dict(await self._json("GET", "/info", "the cluster's information"))

    async def storage(self, name: str) -> dict[str, Any]:
        return dict(await self._json("GET", f"/storages/{quote(name, safe='')}", f"storage {name!r}"))

    async def storages(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/storages", "the storages"))["storages"])

    async def virtual_cluster(self, name: str) -> dict[str, Any]:
        path = f"/virtual-clusters/{quote(name, safe='')}"
        return dict(await self._json("GET", path, f"virtual cluster {name!r}"))

    async def virtual_clusters(self) -> dict[str, Any]:
        return dict(await self._json("GET", "/virtual-clusters", "the virtual clusters"))

    async def submit(self, name: str, protocol: str) -> None:
        """Post a job protocol as YAML text (a 202 answers it)."""
        headers = {"Content-Type": "text/yaml; charset=utf-8"}
        await self._request(
            "POST", "/jobs", f"submitting job {name}", content=protocol.encode(), headers=headers
        )

    async def job(self, name: str) -> dict[str, Any]:
        return dict(await self._json("GET", f"/jobs/{self.framework(name)}", f"job {name}"))

    async def jobs(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        return list(await self._json("GET", "/jobs", "the job list", params=dict(params)))

    async def stop(self, name: str) -> None:
        path = f"/jobs/{self.framework(name)}/executionType"
        await self._request("PUT", path, f"stopping job {name}", json={"value": "STOP"})

    async def log_text(self, container_log: str, which: str = "all") -> str:
        """A task's log (``all``, ``stdout``, ``stderr``) through its log-list path and the log manager."""
        listing = await self._json("GET", container_log.removeprefix("/api/v2"), "a task's log list")
        uri = next((entry["uri"] for entry in listing["locations"] if entry.get("name") == which), None)
        if uri is None:
            raise PaiApiError(f"openpai: {self.host}: the task has no {which} log")
        response = await self._request("GET", self.host + uri, f"the task's {which} log")
        return response.text

    # ---- requests --------------------------------------------------------------------------------------

    async def _json(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        response = await self._request(method, path, what, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise PaiApiError(f"openpai: {self.host}: {what}: the answer is not JSON") from exc

    async def _request(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return await self._once(method, path, what, **kwargs)
            except RateLimited:
                raise
            except PaiApiError as exc:
                if not exc.transient or attempt == self.retries:
                    raise
                log.info(
                    "openpai: %s (try %d of %d, again in %.1f s)", exc, attempt + 1, self.retries + 1, delay
                )
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    async def _once(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise PaiApiError(f"openpai: cannot reach {self.host} ({what}): {exc!r}") from exc
        if response.status_code < 400:
            return response
        if response.status_code == 429:
            message = f"openpai: {self.host}: {what}: {_refusal(response)}"
            raise RateLimited(message, reset=_reset(response), what=what)
        code, message = _error(response)
        text = f"openpai: {self.host}: {what}: HTTP {response.status_code} {code + ': ' if code else ''}{message}"
        raise PaiApiError(text, status=response.status_code, code=code)


def _error(response: httpx.Response) -> tuple[str | None, str]:
    """OpenPAI's ``{"code", "message"}`` body, or the text of whatever answered (a proxy's error page)."""
    try:
        body = response.json()
    except ValueError:
        return None, _refusal(response)
    if isinstance(body, dict) and "message" in body:
        code = body.get("code")
        return (str(code) if code else None), str(body["message"])
    return None, _refusal(response)


def _refusal(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    return f"HTTP {response.status_code} {text[:200]}" if text else f"HTTP {response.status_code}"


def _reset(response: httpx.Response) -> float:
    """When a rate limit's window starts again: express-rate-limit's ``X-RateLimit-Reset`` (epoch seconds),
    else ``Retry-After``, else a minute from now."""
    for header, base in (("X-RateLimit-Reset", 0.0), ("Retry-After", time.time())):
        try:
            return base + float(response.headers[header])
        except (KeyError, ValueError):
            continue
    return time.time() + 60.0
