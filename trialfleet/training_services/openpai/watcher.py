"""The one place that asks OpenPAI about an experiment's jobs: one job list call per due query, with back-off."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from trialfleet.training_services.openpai.client import OpenpaiClient, PaiApiError, RateLimited
from trialfleet.training_services.openpai.status import PaiJob

log = logging.getLogger(__name__)

LIVE_STATES = ("WAITING", "RUNNING", "STOPPING", "UNKNOWN")
#: a job OpenPAI has not known for this long (and at least _MISSING_LOOKS looks) is gone
GONE_AFTER = 30.0
_MISSING_LOOKS = 3


class JobWatcher:
    """The one place that asks OpenPAI about jobs: one job list call for every live job when a query is due.

    The list asks for this experiment's live jobs only (``keyword`` = the experiment's job-name prefix, ``state``
    = the live states); a watched job missing from it has ended (or is not visible yet, or is gone), and its
    detail is read once. Queries start ``min_interval`` apart and back off towards ``max_interval`` while nothing
    changes; a change, a new job or :meth:`hurry` brings them back. A 429 waits for the limit's window to pass.
    A failed query is logged and retried later; it never raises.
    """

    def __init__(
        self,
        client: OpenpaiClient,
        keyword: str,
        *,
        min_interval: float = 2.0,
        max_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.keyword = keyword
        self.min_interval, self.max_interval = min_interval, max_interval
        self.clock = clock
        self.gone_after = GONE_AFTER
        self.jobs: dict[str, PaiJob] = {}
        self.ended_at: dict[str, float] = {}
        self.virtual_clusters: dict[str, dict[str, Any]] = {}  # VC name → its usage, while jobs wait in it
        self._missing: dict[str, tuple[int, float]] = {}  # job → (looks without it, since when)
        self._watched: set[str] = set()
        self._interval = min_interval
        self._next_query = 0.0
        self._last_query = -float("inf")
        self._failing: str | None = None

    def watch(self, name: str) -> None:
        self._watched.add(name)
        self.hurry()

    def forget(self, name: str) -> None:
        self._watched.discard(name)
        for table in (self.jobs, self.ended_at, self._missing):
            table.pop(name, None)

    def hurry(self) -> None:
        self._interval = self.min_interval
        if self._failing is None:  # soon, but never sooner than min_interval after the last query
            self._next_query = min(self._next_query, self._last_query + self.min_interval)

    def gone(self, name: str) -> bool:
        looks, since = self._missing.get(name, (0, self.clock()))
        return looks >= _MISSING_LOOKS and self.clock() - since >= self.gone_after

    def ended_for(self, name: str) -> float | None:
        since = self.ended_at.get(name)
        return None if since is None else self.clock() - since

    async def refresh(self, skip: Collection[str] = ()) -> None:
        """Ask OpenPAI about the watched jobs still live (but those in ``skip``) when a query is due."""
        now = self.clock()
        live = sorted(name for name in self._watched if name not in self.ended_at and name not in skip)
        if now < self._next_query or not live:
            return
        self._last_query = now
        try:
            changed = await self._query(live, now)
        except RateLimited as exc:
            self._next_query = max(now + self.min_interval, now + exc.reset - time.time())
            self._log_failure(f"{exc}; asking again in {self._next_query - now:.0f} s")
            return
        except PaiApiError as exc:
            changed = False
            self._log_failure(f"{exc} (retried later)")
        else:
            if self._failing is not None:
                log.info("openpai: job status queries answer again")
            self._failing = None
        self._interval = self.min_interval if changed else min(self._interval * 1.5, self.max_interval)
        self._next_query = now + self._interval

    def _log_failure(self, message: str) -> None:
        if self._failing is None:
            log.warning("openpai: job status query failed: %s", message)
        self._failing = message

    async def _query(self, live: list[str], now: float) -> bool:
        params = {"username": self.client.username, "keyword": self.keyword, "state": ",".join(LIVE_STATES)}
        listed = {row["name"]: PaiJob.from_summary(row) for row in await self.client.jobs(params)}
        changed = False
        for name in live:
            job = listed.get(name) or await self._detail(name, now)
            if job is None:
                continue
            changed |= self.jobs.get(name) != job
            self.jobs[name] = job
            self._missing.pop(name, None)
            if job.ended:
                self.ended_at[name] = now
        await self._read_virtual_clusters()
        return changed

    async def _detail(self, name: str, now: float) -> PaiJob | None:
        """A job the list did not show: ended, or not visible yet, or gone (counted in ``_missing``)."""
        try:
            return PaiJob.from_detail(await self.client.job(name))
        except PaiApiError as exc:
            if exc.status != 404:
                raise
        looks, since = self._missing.get(name, (0, now))
        self._missing[name] = (looks + 1, since)
        return None

    async def _read_virtual_clusters(self) -> None:
        """The usage of each virtual cluster a job of ours waits in, for the waiting reason."""
        waiting = {job.virtual_cluster for job in self.jobs.values() if job.state == "WAITING"}
        self.virtual_clusters = {}
        for name in sorted(vc for vc in waiting if vc):
            try:
                self.virtual_clusters[name] = await self.client.virtual_cluster(name)
            except PaiApiError as exc:
                log.debug("openpai: cannot read virtual cluster %s: %s", name, exc)
