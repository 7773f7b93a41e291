"""The Slurm job watcher: one batched query per due poll, back-off, finished jobs cached, failures logged.

Slurm's client commands are stood in for by small scripts on PATH that answer from a scenario file and record
how they were called (the real ones run in tests/integration/slurm); the clock is injected.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from slurm_fake_commands import FakeSlurm

from trialfleet.training_services.slurm.runner import LocalCommandRunner
from trialfleet.training_services.slurm.status import JobWatcher, SlurmJob


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm(tmp_path, squeue="")


@pytest.fixture
def clock() -> Clock:
    return Clock()


def watcher(fake: FakeSlurm, clock: Clock, *, use_sacct: bool = False) -> JobWatcher:
    return JobWatcher(LocalCommandRunner(fake.env), use_sacct=use_sacct, clock=clock, max_interval=10.0)


async def refresh_at(w: JobWatcher, clock: Clock, *times: float) -> None:
    for moment in times:
        clock.now = 1000.0 + moment
        await w.refresh()


@pytest.mark.slow
async def test_queries_back_off_while_nothing_changes_and_hurry_after_a_change(
    fake: FakeSlurm, clock: Clock
) -> None:
    fake.answer(squeue="7|PENDING|0|Priority|\n")
    w = watcher(fake, clock)
    w.watch("7")
    await refresh_at(w, clock, 0, 1, 1.9)  # the first finds the job (a change): the next is 2 s later
    assert len(fake.calls()) == 1
    await refresh_at(w, clock, 2, 4.9, 5, 9.4, 9.5)  # unchanged: 3 s, then 4.5 s
    assert len(fake.calls()) == 4
    await refresh_at(w, clock, 16.25, 26.25, 36.24, 36.25)  # 6.75 s, then capped at 10 s
    assert len(fake.calls()) == 7
    fake.answer(squeue="7|RUNNING|0|None|\n")
    await refresh_at(w, clock, 46.25, 48.25)  # the change brings the interval back to 2 s
    assert len(fake.calls()) == 9
    assert w.jobs["7"] == SlurmJob("7", "RUNNING", None, 0, None)
    w.hurry()
    await refresh_at(w, clock, 48.26)
    assert len(fake.calls()) == 10


@pytest.mark.slow
async def test_all_live_jobs_in_one_query_and_finished_ones_never_again(
    fake: FakeSlurm, clock: Clock
) -> None:
    fake.answer(squeue="3|COMPLETED|0|None|\n12|RUNNING|0|None|\n4|FAILED|256|NonZeroExitCode|\n")
    w = watcher(fake, clock)
    for job in ("12", "3", "4"):
        w.watch(job)
    await refresh_at(w, clock, 0)
    assert w.ended_for("3") == 0 and w.ended_for("12") is None
    await refresh_at(w, clock, 5)
    assert fake.asked_jobs() == ["3,4,12", "12"]
    assert w.ended_for("4") == 5 and w.jobs["4"].exit_code == 1
    call = fake.calls()[0]
    assert call[:3] == ["squeue", "--noheader", "--states=all"]


@pytest.mark.slow
async def test_a_failed_query_is_logged_and_changes_nothing(
    fake: FakeSlurm, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    fake.answer(squeue="7|RUNNING|0|None|\n")
    w = watcher(fake, clock)
    w.watch("7")
    await refresh_at(w, clock, 0)
    fake.answer(squeue={"code": 1, "err": "slurm_load_jobs error: Unable to contact slurm controller\n"})
    with caplog.at_level(logging.WARNING):
        await refresh_at(w, clock, 2, 5, 9.5)
    assert "Unable to contact slurm controller" in caplog.text
    assert len(fake.calls()) == 4 and w.jobs["7"].state == "RUNNING" and not w.gone("7")


@pytest.mark.slow
async def test_a_job_slurm_no_longer_knows_is_gone_after_two_queries(fake: FakeSlurm, clock: Clock) -> None:
    fake.answer(squeue="7|RUNNING|0|None|\n")
    w = watcher(fake, clock)
    w.watch("7")
    await refresh_at(w, clock, 0)
    # every job asked for was purged: squeue fails instead of printing nothing
    fake.answer(squeue={"code": 1, "err": "slurm_load_jobs error: Invalid job id specified\n"})
    await refresh_at(w, clock, 2)
    assert not w.gone("7")
    await refresh_at(w, clock, 5)
    assert w.gone("7")
    await refresh_at(w, clock, 100)
    assert len(fake.calls()) == 3  # a gone job is not asked about again


@pytest.mark.slow
async def test_sacct_answers_for_jobs_squeue_forgot(fake: FakeSlurm, clock: Clock) -> None:
    fake.answer(squeue="8|RUNNING|0|None|\n", sacct="7|TIMEOUT|0:0|None\n7.batch|CANCELLED|0:15|\n")
    w = watcher(fake, clock, use_sacct=True)
    w.watch("7")
    w.watch("8")
    await refresh_at(w, clock, 0)
    assert w.jobs["7"] == SlurmJob("7", "TIMEOUT", None, 0, None)
    assert fake.calls("sacct") == [
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            "--jobs=7",
            "--format=JobIDRaw,State,ExitCode,Reason",
        ]
    ]


async def test_forget_drops_a_job(fake: FakeSlurm, clock: Clock) -> None:
    fake.answer(squeue="7|RUNNING|0|None|\n")
    w = watcher(fake, clock)
    w.watch("7")
    await refresh_at(w, clock, 0)
    w.forget("7")
    await refresh_at(w, clock, 50)
    assert "7" not in w.jobs and len(fake.calls()) == 1
