"""The workers of a reuse-mode fleet (:mod:`.reuse`) as the manager knows them, and the record of them it keeps in
its experiment directory so that a restarted manager re-adopts the idle ones too (those running a trial are also
found from the trial's handle)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: in the manager's experiment directory: the workers in use (:class:`WorkerRegistry`)
REGISTRY = "reuse-workers.json"


@dataclass
class Worker:
    name: str
    job_id: str
    worker_dir: str
    trials: set[str] = field(default_factory=set)
    idle_since: float | None = None
    released_at: float | None = None


class WorkerRegistry:
    """The workers a manager uses, in a file of its experiment directory, so that a restarted manager re-adopts
    the idle ones too (those running a trial are also found from the trial's handle). A worker released is left
    out (it exits); one whose job ended is forgotten at the restarted manager's first look. How long a worker
    has been idle is kept as a wall-clock time, so the restarted manager releases it on time, before the worker
    would end itself. A worker missing here (the manager died between submitting its job and this write) ends
    itself once idle."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path, self.clock = path, clock

    def save(self, workers: Iterable[Worker]) -> None:
        offset = time.time() - self.clock()  # monotonic → wall clock
        entries = [
            {
                "name": w.name,
                "job_id": w.job_id,
                "worker_dir": w.worker_dir,
                "idle_since": None if w.idle_since is None else w.idle_since + offset,
            }
            for w in workers
        ]
        temporary = self.path.with_name(f"{self.path.name}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps({"workers": entries}))
            os.replace(temporary, self.path)
        except OSError as exc:  # a restarted manager would then start new workers, these end themselves
            log.warning("cannot record the reuse workers in %s: %s", self.path, exc)

    def load(self) -> list[Worker]:
        try:
            return [self._worker(entry) for entry in json.loads(self.path.read_text())["workers"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("cannot read the reuse workers of an earlier manager from %s: %r", self.path, exc)
            return []

    def _worker(self, entry: Mapping[str, Any]) -> Worker:
        now = self.clock()
        idle = entry.get("idle_since")
        # a worker that had a trial counts as idle from now on at the most (its trial may have ended meanwhile)
        idle_since = now if idle is None else min(float(idle) - (time.time() - now), now)
        worker_dir = str(entry["worker_dir"])
        return Worker(str(entry["name"]), str(entry["job_id"]), worker_dir, idle_since=idle_since)
