"""The batch platforms' shared job watcher: what its ``query(ids)`` hook answers and what the watcher makes of
it (back-off, ended jobs cached, unknown jobs gone after N looks and a time, unread jobs neither, a rate
limit's pause). The clock is injected; each platform's own watcher tests run its real hook."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from trialfleet.errors import PlatformError
from trialfleet.manager.clock import ManualClock
from trialfleet.training_services.batch.watcher import JobWatcher


@dataclass(frozen=True)
class Job:
    state: str

    @property
    def ended(self) -> bool:
        return self.state == "done"


class Limited(PlatformError):
    pass


class ScriptedWatcher(JobWatcher[Job]):
    """Answers each look from ``answers`` (a mapping, or an exception to raise); records what it was asked."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(min_interval=1.0, max_interval=4.0, clock=clock.monotonic)
        self.answers: list[Mapping[str, Job | PlatformError] | PlatformError] = []
        self.asked: list[list[str]] = []

    async def query(self, job_ids: list[str]) -> dict[str, Job]:
        self.asked.append(list(job_ids))
        answer = self.answers.pop(0)
        if isinstance(answer, PlatformError):
            raise answer
        found = {}
        for job_id, job in answer.items():
            if isinstance(job, PlatformError):
                self.unread(job_id, job)
            else:
                found[job_id] = job
        return found

    def _failure_pause(self, error: PlatformError) -> float | None:
        return 10.0 if isinstance(error, Limited) else None


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def look(watcher: ScriptedWatcher, clock: ManualClock, after: float, answer: object) -> None:
    clock.advance(after)
    watcher.answers[:] = [answer]  # type: ignore[list-item]  # left unused when no look was due
    await watcher.refresh()


async def test_looks_back_off_while_nothing_changes_and_ended_jobs_are_not_asked_again(
    clock: ManualClock,
) -> None:
    watcher = ScriptedWatcher(clock)
    watcher.watch("a")
    watcher.watch("b")
    await look(watcher, clock, 0, {"a": Job("run"), "b": Job("run")})
    await look(watcher, clock, 0.5, {})  # not due: nothing asked
    await look(watcher, clock, 0.5, {"a": Job("run"), "b": Job("run")})  # unchanged: next in 1.5 s
    await look(watcher, clock, 1.4, {})
    await look(watcher, clock, 0.1, {"a": Job("done"), "b": Job("run")})
    assert watcher.asked == [["a", "b"], ["a", "b"], ["a", "b"]]
    assert watcher.ended_for("a") == 0 and watcher.ended_for("b") is None
    await look(watcher, clock, 1.0, {"b": Job("run")})
    assert watcher.asked[-1] == ["b"]


async def test_a_job_unknown_for_enough_looks_and_time_is_gone_and_an_unread_one_is_not(
    clock: ManualClock,
) -> None:
    watcher = ScriptedWatcher(clock)
    watcher.missing_looks, watcher.gone_after = 2, 5.0
    watcher.watch("a")
    watcher.watch("b")
    for _ in range(3):
        await look(watcher, clock, 1.0, {"b": PlatformError("busy")})
    assert not watcher.gone("a") and not watcher.gone("b")  # three looks, but only 3 s
    await look(watcher, clock, 3.0, {"b": PlatformError("busy")})
    assert watcher.gone("a") and not watcher.gone("b")
    assert watcher.unreachable == "busy"
    await look(watcher, clock, 4.0, {"b": Job("run")})
    assert watcher.asked[-1] == ["b"] and watcher.unreachable is None


async def test_a_failed_look_backs_off_or_waits_the_pause_the_platform_asked_for(clock: ManualClock) -> None:
    watcher = ScriptedWatcher(clock)
    watcher.watch("a")
    await look(watcher, clock, 0, PlatformError("down"))
    await look(watcher, clock, 1.5, Limited("429"))
    await look(watcher, clock, 9.9, {})  # within the pause
    assert len(watcher.asked) == 2
    await look(watcher, clock, 0.1, {"a": Job("run")})
    assert len(watcher.asked) == 3 and watcher.jobs["a"] == Job("run")


async def test_hurry_asks_at_the_next_refresh_and_reread_asks_about_an_ended_job(clock: ManualClock) -> None:
    watcher = ScriptedWatcher(clock)
    watcher.watch("a")
    await look(watcher, clock, 0, {"a": Job("done")})
    watcher.watch("b")  # a new job hurries the watcher
    await look(watcher, clock, 0.1, {"b": Job("run")})
    assert watcher.asked[-1] == ["b"]
    watcher.reread("a")
    await look(watcher, clock, 0.1, {"a": Job("done"), "b": Job("run")})
    assert watcher.asked[-1] == ["a", "b"] and watcher.read_at["a"] == pytest.approx(0.2)
    watcher.forget("a")
    assert "a" not in watcher.jobs and watcher.live() == ["b"]
