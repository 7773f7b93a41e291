"""express-rate-limit 5 (``config/rate-limit.js``) and the emulator's fault knobs.

A limiter counts hits per key in fixed windows (its memory store forgets every key each ``windowMs``), sets
``X-RateLimit-Limit``/``-Remaining``/``-Reset`` on every counted request, and over the limit answers 429 with
the text "Too many requests, please try again later." and ``Retry-After``. A limit of 0 disables it.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field

from .clock import Clock


@dataclass
class Hit:
    limit: int
    current: int
    reset: float  # epoch seconds
    window: float

    @property
    def blocked(self) -> bool:
        return bool(self.limit) and self.current > self.limit

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(self.limit - self.current, 0)),
            "X-RateLimit-Reset": str(math.ceil(self.reset)),
        }
        if self.blocked:
            headers["Retry-After"] = str(math.ceil(self.window))
        return headers


class Limiter:
    def __init__(self, clock: Clock, window: float, limit: int) -> None:
        self.clock = clock
        self.window = window
        self.limit = limit
        self.hits: dict[str, int] = {}
        self.reset = clock.now() + window
        self._lock = threading.Lock()

    def hit(self, key: str) -> Hit:
        with self._lock:
            now = self.clock.now()
            if now >= self.reset:  # the store's interval has fired (maybe several times)
                self.hits.clear()
                self.reset += self.window * math.ceil((now - self.reset + 1e-9) / self.window)
            self.hits[key] = self.hits.get(key, 0) + 1
            return Hit(self.limit, self.hits[key], self.reset, self.window)


@dataclass
class FaultRule:
    status: int
    remaining: int
    method: str | None = None
    path: re.Pattern[str] | None = None  # searched in the request path (with its /rest-server prefix)

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or self.path.search(path) is not None


@dataclass
class Faults:
    rules: list[FaultRule] = field(default_factory=list)
    hide_next: list[int] = field(default_factory=list)  # for each next job created: GETs answered 404
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(
        self, count: int = 1, status: int = 503, method: str | None = None, path: str | None = None
    ) -> None:
        """The next ``count`` requests (matching ``method``/``path`` if given) get ``status`` instead of an answer."""
        with self.lock:
            self.rules.append(FaultRule(status, count, method, re.compile(path) if path else None))

    def take(self, method: str, path: str) -> int | None:
        with self.lock:
            for rule in self.rules:
                if rule.remaining > 0 and rule.matches(method, path):
                    rule.remaining -= 1
                    return rule.status
            self.rules = [rule for rule in self.rules if rule.remaining > 0]
        return None

    def hide_next_jobs(self, gets: int = 1, jobs: int = 1) -> None:
        """The next ``jobs`` submitted jobs answer 404 NoJobError to their first ``gets`` GETs of their detail or
        config, and the job list leaves them out meanwhile (a database that has not caught up yet)."""
        with self.lock:
            self.hide_next.extend([gets] * jobs)

    def hidden_gets_for_new_job(self) -> int:
        with self.lock:
            return self.hide_next.pop(0) if self.hide_next else 0

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.hide_next.clear()


__all__ = ["FaultRule", "Faults", "Hit", "Limiter"]
