"""The one place that asks OpenPAI about an experiment's jobs: one job list call per due query, with back-off."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.openpai.client import OpenpaiClient, PaiApiError, RateLimited
from trialfleet.training_services.openpai.status import PaiJob

log = logging.getLogger(__name__)

LIVE_STATES = ("WAITING", "RUNNING", "STOPPING", "UNKNOWN")
#: a job OpenPAI has not known for this long (and at least _MISSING_LOOKS looks) is gone
GONE_AFTER = 30.0
_MISSING_LOOKS = 3


class JobWatcher(BatchJobWatcher[PaiJob]):
    """The one place that asks OpenPAI about jobs: one job list call for every live job when a query is due.

    The list asks for this experiment's live jobs only (``keyword`` = the experiment's job-name prefix, ``state``
    = the live states); a watched job missing from it has ended (or is not visible yet, or is gone), and its
    detail is read once. A 429 waits for the limit's window to pass; :meth:`hurry` never asks sooner than
    ``min_interval`` after the last query. The rest is :mod:`..batch.watcher`'s.
    """

    platform = "openpai"
    missing_looks = _MISSING_LOOKS
    gone_after = GONE_AFTER

    def __init__(self, client: OpenpaiClient, keyword: str, **pacing: Any) -> None:
        super().__init__(**pacing)
        self.client = client
        self.keyword = keyword
        self.virtual_clusters: dict[str, dict[str, Any]] = {}  # VC name → its usage, while jobs wait in it

    def hurry(self) -> None:
        self._interval = self.min_interval
        if self.unreachable is None:  # soon, but never sooner than min_interval after the last query
            self._next_query = min(self._next_query, self._last_query + self.min_interval)

    def _failure_pause(self, error: PlatformError) -> float | None:
        return error.reset - time.time() if isinstance(error, RateLimited) else None

    async def query(self, job_ids: list[str]) -> dict[str, PaiJob]:
        params = {"username": self.client.username, "keyword": self.keyword, "state": ",".join(LIVE_STATES)}
        listed = {row["name"]: PaiJob.from_summary(row) for row in await self.client.jobs(params)}
        found = {}
        for name in sorted(job_ids):
            job = listed.get(name) or await self._detail(name)
            if job is not None:
                found[name] = job
        return found

    async def _detail(self, name: str) -> PaiJob | None:
        """A job the list did not show: ended, or not visible yet, or gone (None)."""
        try:
            return PaiJob.from_detail(await self.client.job(name))
        except PaiApiError as exc:
            if exc.status != 404:
                raise
        return None

    async def _looked(self, found: Mapping[str, PaiJob], changed: bool) -> bool:
        """The usage of each virtual cluster a job of ours waits in, for the waiting reason."""
        waiting = {job.virtual_cluster for job in self.jobs.values() if job.state == "WAITING"}
        self.virtual_clusters = {}
        for name in sorted(vc for vc in waiting if vc):
            try:
                self.virtual_clusters[name] = await self.client.virtual_cluster(name)
            except PaiApiError as exc:
                log.debug("openpai: cannot read virtual cluster %s: %s", name, exc)
        return False
