"""The one place that asks a cluster about its jobs: one batched ``query(ids)`` per due look, with back-off.

Looks start ``min_interval`` apart and back off (by half each time) towards ``max_interval`` while nothing changes; a change,
a new job or :meth:`JobWatcher.hurry` brings them back. Ended jobs are kept and not asked about again. A job the
platform has not known for ``missing_looks`` looks in a row (and, where set, for ``gone_after`` seconds) is
gone. A failed look is logged once per reason and retried later; it never raises.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Generic, Protocol, TypeVar

from trialfleet.errors import PlatformError

log = logging.getLogger(__name__)


class WatchedJob(Protocol):
    """What the watcher needs of a platform's job record (a frozen dataclass: equality is "unchanged")."""

    @property
    def ended(self) -> bool: ...


J = TypeVar("J", bound=WatchedJob)


class JobWatcher(ABC, Generic[J]):
    """Paces and batches the looks at a platform's jobs; a platform fills in :meth:`query`."""

    #: the name in log messages ("slurm: job status query failed …")
    platform: str = "batch"
    #: looks in a row without the job before it counts as gone (None: never, the platform forgets no job) …
    missing_looks: int | None = 2
    #: … and for at least this long (seconds)
    gone_after: float = 0.0
    #: ask again about jobs that ended (a platform that ships the trial's files with its job's state)
    requery_ended: bool = False

    #: the pacing of looks (seconds) when the constructor is given none
    MIN_INTERVAL, MAX_INTERVAL = 2.0, 30.0

    def __init__(
        self,
        *,
        min_interval: float | None = None,
        max_interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval = self.MIN_INTERVAL if min_interval is None else min_interval
        self.max_interval = self.MAX_INTERVAL if max_interval is None else max_interval
        self.clock = clock
        self.jobs: dict[str, J] = {}
        self.ended_at: dict[str, float] = {}  # the cache of finished jobs: when each was first seen ended
        self.read_at: dict[str, float] = {}  # when the platform last answered about the job
        self.unreachable: str | None = None  # why the last look failed
        self._missing: dict[str, tuple[int, float]] = {}  # job → (looks without it, since when)
        self._watched: dict[str, None] = {}  # in the order jobs were watched
        self._unread: set[str] = set()
        self._interval = self.min_interval
        self._next_query = 0.0
        self._last_query = -float("inf")

    # ---- the hook ----------------------------------------------------------------------------------------

    @abstractmethod
    async def query(self, job_ids: list[str]) -> Mapping[str, J]:
        """What the platform says of ``job_ids`` now; a job left out is one the platform does not know (a job
        that could not be read this time is passed to :meth:`unread` instead). Raises PlatformError."""

    def unread(self, job_id: str, error: PlatformError) -> None:
        """For :meth:`query`: this job could not be read this time (neither known nor unknown)."""
        self._unread.add(job_id)
        self._failed(str(error))

    # ---- for the service ---------------------------------------------------------------------------------

    def watch(self, job_id: str) -> None:
        self._watched.setdefault(job_id, None)
        self.hurry()

    def forget(self, job_id: str) -> None:
        self._watched.pop(job_id, None)
        for table in (self.jobs, self.ended_at, self.read_at, self._missing):
            table.pop(job_id, None)

    def seed(self, jobs: Mapping[str, J]) -> None:
        """What an earlier listing said of jobs (trials adopted next start from it)."""
        now = self.clock()
        for job_id, job in jobs.items():
            self.jobs[job_id] = job
            if job.ended:
                self.ended_at.setdefault(job_id, now)

    def reread(self, job_id: str) -> None:
        """Read the job at the next look, even when it ended already."""
        self.ended_at.pop(job_id, None)
        self.hurry()

    def hurry(self) -> None:
        self._interval = self.min_interval
        self._next_query = 0.0

    def gone(self, job_id: str) -> bool:
        """The platform no longer knows the job."""
        looks, since = self._missing.get(job_id, (0, self.clock()))
        if self.missing_looks is None:
            return False
        return looks >= self.missing_looks and self.clock() - since >= self.gone_after

    def ended_for(self, job_id: str) -> float | None:
        """Seconds since the job was first seen ended, None while it is live."""
        since = self.ended_at.get(job_id)
        return None if since is None else self.clock() - since

    def live(self, skip: Collection[str] = ()) -> list[str]:
        """The watched jobs a look asks about."""
        return [
            job_id
            for job_id in self._watched
            if (self.requery_ended or job_id not in self.ended_at)
            and not self.gone(job_id)
            and job_id not in skip
        ]

    async def refresh(self, skip: Collection[str] = ()) -> None:
        """Ask the platform about the live jobs (but those in ``skip``) when a look is due."""
        now = self.clock()
        live = self.live(skip)
        if now < self._next_query or not live:
            return
        self._last_query = now
        self._unread = set()
        try:
            found = await self.query(live)
        except PlatformError as exc:
            self._failed(str(exc))
            pause = self._failure_pause(exc)
            if pause is not None:  # the platform said when to ask again
                self._next_query = now + max(self.min_interval, pause)
                return
            changed = False
        else:
            if not self._unread:
                self._answered()
            changed = self._update(live, found, now)
            changed |= await self._looked(found, changed)
        self._pace(now, changed)

    # ---- inside --------------------------------------------------------------------------------------------

    async def _looked(self, found: Mapping[str, J], changed: bool) -> bool:
        """After a successful look (hook: read more of what changed); True if that changed something."""
        return False

    def _failure_pause(self, error: PlatformError) -> float | None:
        """How long to wait after this failed look (a rate limit's window); None: back off as usual."""
        return None

    def _pace(self, now: float, changed: bool) -> None:
        self._interval = self.min_interval if changed else min(self._interval * 1.5, self.max_interval)
        self._next_query = now + self._interval

    def _failed(self, message: str) -> None:
        if self.unreachable != message:
            log.warning("%s: job status query failed (retried later): %s", self.platform, message)
        self.unreachable = message

    def _answered(self) -> None:
        if self.unreachable is not None:
            log.info("%s: job status queries answer again", self.platform)
        self.unreachable = None

    def _update(self, asked: list[str], found: Mapping[str, J], now: float) -> bool:
        changed = False
        for job_id in asked:
            if job_id in self._unread:
                continue
            job = found.get(job_id)
            self.read_at[job_id] = now
            if job is None:
                looks, since = self._missing.get(job_id, (0, now))
                self._missing[job_id] = (looks + 1, since)
                changed |= self.gone(job_id)
                continue
            self._missing.pop(job_id, None)
            changed |= self.jobs.get(job_id) != job
            self.jobs[job_id] = job
            if job.ended:
                self.ended_at.setdefault(job_id, now)
        return changed
