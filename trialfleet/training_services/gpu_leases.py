"""An experiment's side of the machine-wide GPU leases (``trial_keeper/leases.py``; docs/shared-fleet.md).

:meth:`GpuLeases.take` reads every experiment's leases, chooses and leases under the machine's chooser lock, so
that two managers racing cannot both take one GPU; an experiment that has to wait says so in a wait record, and
GPUs that come free go to the experiments that waited longest first. The manager's own hold on a lease lasts
until it forgets the trial; the keeper holds it from its start (command.json's ``leases``), so a lease outlives
a crashed manager and ends with the trial.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.trial_keeper import leases

#: ``choose(count, trials on each GPU, GPUs leased to other experiments with their holder)`` → GPUs or why not
Chooser = Callable[[int, Mapping[int, int], Mapping[int, str]], "list[int] | str"]


@dataclass(frozen=True)
class Taken:
    gpus: list[int]
    paths: list[str]  # the lease files, for the keeper to hold


@dataclass
class Holdings:
    """What one experiment holds and waits for on one machine."""

    gpus: list[int] = field(default_factory=list)
    waiting: int = 0  # GPUs one of its trials waits for (0: none waits)
    waiting_since: float | None = None

    def record(self) -> dict[str, Any]:
        """As plain data (REST, the web UI, ``experiment list --json``)."""
        return {"gpus": sorted(self.gpus), "waiting": self.waiting, "waitingSince": self.waiting_since}

    def describe(self) -> str:
        held = f"GPU {','.join(map(str, sorted(self.gpus)))}" if self.gpus else "no GPU"
        return held + (f", waits for {self.waiting}" if self.waiting else "")


class GpuLeases:
    """One experiment's leases on one machine's lease directory."""

    def __init__(self, experiment_id: str, directory: str | None = None) -> None:
        self.experiment_id = experiment_id
        self.path = leases.directory(directory)
        self._holds: dict[str, list[int]] = {}  # trial → the descriptors of our hold on its leases
        self._wait_fd: int | None = None
        self._waiting_since: float | None = None
        self._asked_at = 0.0

    def take(self, trial_id: str, attempt: str, count: int, choose: Chooser) -> Taken | str:
        """Choose ``count`` GPUs with ``choose`` and lease them to the trial, or say why it waits."""
        with leases.choosing(self.path):
            held = leases.live_leases(self.path, clean=True)
            assigned = Counter(int(lease["gpu"]) for lease in held)
            others = {
                int(lease["gpu"]): leases.holder(lease)
                for lease in held
                if lease.get("experiment") != self.experiment_id
            }
            choice = self._not_my_turn(count, assigned, others, choose) or choose(count, assigned, others)
            if isinstance(choice, str):
                self._wait(count)
                return choice
            record = {"experiment": self.experiment_id, "trial": trial_id, "attempt": attempt}
            fds = leases.take(self.path, choice, dict(record, pid=os.getpid(), host=os.uname().nodename))
            self._stop_waiting()
        self._holds.setdefault(trial_id, []).extend(fds)
        names = [leases.lease_name(gpu, self.experiment_id, attempt) for gpu in choice]
        return Taken(list(choice), [os.path.join(self.path, name) for name in names])

    def release(self, trial_id: str) -> None:
        """Our hold on the trial's leases ends (its keeper's, if it still runs, goes on)."""
        leases.release(self._holds.pop(trial_id, []))

    def close(self) -> None:
        for trial_id in list(self._holds):
            self.release(trial_id)
        if self._wait_fd is not None:
            with leases.choosing(self.path):
                self._stop_waiting()

    def _not_my_turn(
        self, count: int, assigned: Mapping[int, int], others: Mapping[int, str], choose: Chooser
    ) -> str | None:
        """Why this experiment must let others go first: they waited longer, and the free GPUs are not enough
        for them and for us."""
        mine = self._waiting_since if self._waiting_since is not None else time.time()
        waits = leases.live_waits(self.path, clean=True)
        ahead = [w for w in waits if w.get("experiment") != self.experiment_id and float(w["since"]) < mine]
        if not ahead:
            return None
        wanted = count + sum(int(w.get("count") or 1) for w in ahead)
        if isinstance(choose(wanted, assigned, others), list):
            return None
        return leases.turn_message(ahead[0])

    def _wait(self, count: int) -> None:
        now = time.time()
        if self._waiting_since is None or now - self._asked_at > leases.WAIT_STALE_SECONDS:
            self._waiting_since = now  # a wait given up (its trial canceled) does not keep its place
        elif self._wait_fd is not None and now - self._asked_at < 1.0:
            self._asked_at = now
            return
        self._asked_at = now
        record = leases.wait_record(self.experiment_id, count, self._waiting_since)
        fd = leases.create_held(self.path, leases.wait_name(self.experiment_id), record)
        old, self._wait_fd = self._wait_fd, fd
        leases.release([old] if old is not None else [])

    def _stop_waiting(self) -> None:
        self._waiting_since = None
        if self._wait_fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.path, leases.wait_name(self.experiment_id)))
        leases.release([self._wait_fd])
        self._wait_fd = None


def machine_holdings(directory: str | None = None) -> dict[str, Holdings]:
    """Every experiment's leases and waits in this machine's lease directory, by experiment id."""
    path = directory or os.environ.get(leases.DIRECTORY_VARIABLE) or leases.DEFAULT_DIRECTORY
    return holdings_of(leases.live_leases(path), leases.live_waits(path))


def holdings_of(held: list[dict[str, Any]], waits: list[dict[str, Any]]) -> dict[str, Holdings]:
    """Lease and wait records (``leases.live_leases``, ``live_waits``) by experiment id."""
    found: dict[str, Holdings] = {}
    for lease in held:
        found.setdefault(str(lease.get("experiment")), Holdings()).gpus.append(int(lease["gpu"]))
    for wait in waits:
        holding = found.setdefault(str(wait.get("experiment")), Holdings())
        holding.waiting, holding.waiting_since = int(wait.get("count") or 1), float(wait["since"])
    return found


def holdings_record(holdings: Mapping[str, Holdings]) -> dict[str, Any]:
    """``{experiment: {"gpus", "waiting", "waitingSince"}}``."""
    return {experiment: held.record() for experiment, held in holdings.items()}
