"""The hostile clients of issue 44, against whichever manager currently serves a port, in background threads,
and a second process that takes the database's write lock now and then. None may change what an experiment
stores, and none may get an answer of 500: ``HostileClients.problems`` lists what went wrong.

* customized trials 900 levels deep, with NaN, with Infinity (refused: 4xx, nothing stored);
* trial-file requests for a 300-character name, a path out of the trial directory, ``command.json``;
* slow readers of a trial's stdout (a few bytes at a time) and of the whole lists;
* another process holding ``BEGIN IMMEDIATE`` on the database for 0.3 s about every second, and once, 5 s
  after it started, for 45 s.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx

API = "/api/v1/nni"
DEEP = "[" * 900 + "]" * 900

#: one hold of the lock longer than SQLite's 30 s busy timeout, which used to end the manager, even the last one
#: started (the kills go on meanwhile: the trials stay RUNNING in the database while it cannot be written)
LONG_HOLD = 45.0

LOCK_TAKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
start = time.monotonic()
long_hold = float(sys.argv[2])
while True:
    conn.execute("BEGIN IMMEDIATE")
    if long_hold and time.monotonic() - start > 5:
        time.sleep(long_hold)
        long_hold = 0
    time.sleep(0.3)
    conn.execute("COMMIT")
    time.sleep(1.0)
"""

BAD_TRIALS = [
    '{"parameters": {"x": ' + DEEP + "}}",
    '{"x": NaN}',
    '{"x": Infinity, "pause": 0.01}',
]


class HostileClients:
    def __init__(self, port: int, database: Path, long_hold: float = LONG_HOLD) -> None:
        self.port = port  # where the manager of the moment listens: may be changed while they run
        self.database = database
        self.long_hold = long_hold
        self.problems: list[str] = []
        self.requests = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._forever, args=(step,), daemon=True)
            for step in (self._bad_trials, self._bad_files, self._slow_reader, self._lists)
        ]
        self._lock_taker: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HostileClients:
        self._lock_taker = subprocess.Popen(
            [sys.executable, "-c", LOCK_TAKER, str(self.database), str(self.long_hold)]
        )
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        assert self._lock_taker is not None
        self._lock_taker.kill()
        self._lock_taker.wait()

    def _forever(self, step: Callable[[httpx.Client], None]) -> None:
        while not self._stop.is_set():
            # the manager is being killed and restarted: a refused connection or a cut answer is expected
            base = f"http://127.0.0.1:{self.port}{API}"
            with httpx.Client(base_url=base, timeout=10) as http, contextlib.suppress(httpx.TransportError):
                step(http)
            self._stop.wait(0.05)

    def _check(self, response: httpx.Response, *, ok: bool = False) -> None:
        self.requests += 1
        expected = response.status_code == 200 if ok else 400 <= response.status_code < 500
        if not expected:
            self.problems.append(f"{response.request.method} {response.request.url}: {response.status_code}")

    def _bad_trials(self, http: httpx.Client) -> None:
        for body in BAD_TRIALS:
            headers = {"content-type": "application/json"}
            self._check(http.post("/trial-jobs", content=body, headers=headers))

    def _a_trial(self, http: httpx.Client) -> str | None:
        response = http.get("/trial-jobs?status=RUNNING")
        jobs = response.json() if response.status_code == 200 else []
        return str(jobs[0]["trialJobId"]) if jobs else None

    def _bad_files(self, http: httpx.Client) -> None:
        trial_id = self._a_trial(http)
        if trial_id is None:
            return
        for name in ("a" * 300, "..%2F..%2Fdb%2Ftrialfleet.sqlite", "command.json"):
            self._check(http.get(f"/trial-file/{trial_id}/{name}"))

    def _slow_reader(self, http: httpx.Client) -> None:
        trial_id = self._a_trial(http)
        if trial_id is None:
            return
        with http.stream("GET", f"/trial-file/{trial_id}/trial.stdout") as response:
            if response.status_code != 404:  # a trial that ended meanwhile
                self._check(response, ok=True)
            for _ in response.iter_raw(64):
                time.sleep(0.2)
                if self._stop.is_set():
                    break

    def _lists(self, http: httpx.Client) -> None:
        for path in ("/trial-jobs", "/metric-data", "/check-status", "/job-statistics"):
            self._check(http.get(path), ok=True)
