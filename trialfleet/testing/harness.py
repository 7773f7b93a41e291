"""What the contract suite drives a platform with: contexts, polling, the trials' side of the test.

Trials are small Python scripts that write NNI's ``.nni/metrics`` stream themselves (no SDK involved) and are
steered through files in a control directory that the test and the trials share. Where that directory is as
the trials see it, and how the test reads the trials' process table, is the platform's :class:`TrialHost`:
the default, :class:`LocalTrialHost`, is a directory and the process table of this machine, true of every
platform whose workers run here (local, test sshd hosts, a single-node Slurm, protocol emulators).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.events import PollBatch, TrialEnded, TrialMetric, TrialProblem

HANG_GUARD = 60.0  # seconds before a wait is declared stuck: a failure message, not a timing check
HOSTILE = [
    "with space",
    "it's",
    'double "quoted"',
    "semi;colon",
    "$(touch pwned)",
    "`touch pwned`",
    "new\nline",
    "ünïcødé ✓",
    "",
    "*",
    "$HOME",
]

TRIAL_PRELUDE = """
import json, os, sys, time
SYS_DIR = os.environ["NNI_SYS_DIR"]
_metrics = open(os.path.join(SYS_DIR, ".nni", "metrics"), "ab", buffering=0)

def frame(payload):
    _metrics.write(b"ME%06d" % len(payload) + payload)

def parameter_record():
    with open(os.path.join(SYS_DIR, "parameter.cfg")) as f:
        return json.load(f)

def report(kind, sequence, value=None, raw_value=None):
    record = {"parameter_id": parameter_record()["parameter_id"], "trial_job_id": os.environ["NNI_TRIAL_JOB_ID"],
              "type": kind, "sequence": sequence, "value": json.dumps(value) if raw_value is None else raw_value}
    frame((json.dumps(record) + "\\n").encode())

def control(name):
    return os.path.join(sys.argv[1], name)

def touch(name):
    open(control(name), "a").close()

def wait_for(name):
    while not os.path.exists(control(name)):
        time.sleep(0.02)
"""


def make_context(
    experiment_dir: Path,
    service_config: TrainingServiceConfig,
    experiment_id: str = "contract",
    **experiment_fields: Any,
) -> ExperimentContext:
    """A context around a real, validated experiment config holding ``service_config``."""
    data: dict[str, Any] = {
        "experimentName": "contract",
        "searchSpace": {"x": {"_type": "choice", "_value": [1]}},
        "trialConcurrency": 1,
        "tuner": {"name": "Random"},
        "trainingService": service_config,
        **experiment_fields,
    }
    config = ExperimentConfig.from_dict(data)
    service = config.training_services[0]
    return ExperimentContext(experiment_id, experiment_dir, config, service)


def process_start_ticks(pid: int) -> int | None:
    """Start time of a live (non-zombie) process of this machine, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


class TrialHost:
    """The trials' side of a contract test: their control directory and their processes.

    ``local`` is the control directory on this machine; ``seen_by_trials`` the same directory as trials see it
    (a container's mount, a path on a worker) when it differs. Override :meth:`start_ticks` and :meth:`kill`
    when trials run on machines whose process table this one cannot read.
    """

    def __init__(self, local: Path, seen_by_trials: str | None = None) -> None:
        self.local = local
        self.seen_by_trials = seen_by_trials or str(local)

    def touch(self, name: str) -> None:
        (self.local / name).touch()

    def exists(self, name: str) -> bool:
        return (self.local / name).exists()

    def read_text(self, name: str) -> str:
        return (self.local / name).read_text()

    async def wait_for(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANG_GUARD
        while not self.exists(name):
            assert loop.time() < deadline, f"stuck: {name} never appeared in {self.local}"
            await asyncio.sleep(0.02)

    def start_ticks(self, pid: int) -> int | None:
        """A trial process's start time, None once it is gone (or a zombie)."""
        return process_start_ticks(pid)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class LocalTrialHost(TrialHost):
    """Trials that see this machine's file system and run in its process table."""


@dataclass
class Seen:
    """Everything polled so far."""

    started: list[str] = field(default_factory=list)
    metrics: list[TrialMetric] = field(default_factory=list)
    problems: list[TrialProblem] = field(default_factory=list)
    ended: dict[str, TrialEnded] = field(default_factory=dict)
    waiting_reasons: list[str] = field(default_factory=list)  # every waiting reason reported, in order

    def add(self, batch: PollBatch) -> None:
        self.started += [s.trial_id for s in batch.started]
        self.waiting_reasons += [w.reason for w in batch.waiting]
        self.metrics += batch.metrics
        self.problems += batch.problems
        for ended in batch.ended:
            assert ended.trial_id not in self.ended, f"{ended.trial_id} reported ended twice"
            self.ended[ended.trial_id] = ended


async def poll_until(
    service: TrainingService,
    done: Callable[[Seen], bool],
    seen: Seen | None = None,
    *,
    guard: float = HANG_GUARD,
) -> Seen:
    """Poll as the manager does (woken by the service, or every ``poll_interval``) until ``done(seen)``."""
    seen = seen if seen is not None else Seen()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard
    while not done(seen):
        assert loop.time() < deadline, f"stuck: condition not reached after {guard}s; seen {seen}"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(service.wakeup.wait(), service.poll_interval)
        seen.add(await service.poll())
    return seen


async def wait_for_file(path: Path) -> None:
    """Wait until ``path`` (a file of this machine a trial writes) exists."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_GUARD
    while not path.exists():
        assert loop.time() < deadline, f"stuck: {path} never appeared"
        await asyncio.sleep(0.02)


async def wait_until_gone(
    pids: list[int], start_ticks: Callable[[int], int | None] = process_start_ticks
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_GUARD
    while any(start_ticks(pid) is not None for pid in pids):
        assert loop.time() < deadline, f"stuck: processes {pids} survived SIGKILL"
        await asyncio.sleep(0.02)


class Services:
    """Starts services for one test; whatever the test leaves open is closed, killing its trials."""

    def __init__(
        self, factory: Callable[[ExperimentContext], TrainingService], context: ExperimentContext
    ) -> None:
        self.factory = factory
        self.context = context
        self.open: list[TrainingService] = []

    async def start(self) -> TrainingService:
        service = self.factory(self.context)
        await service.start()
        self.open.append(service)
        return service

    async def close(self, service: TrainingService, *, kill_trials: bool) -> None:
        self.open.remove(service)
        await service.close(kill_trials=kill_trials)

    async def close_all(self) -> None:
        while self.open:
            await self.open.pop().close(kill_trials=True)


def default_python_command() -> str:
    return shlex.quote(sys.executable)
