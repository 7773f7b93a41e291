"""A host's launches without reuse: those asked in one turn of the event loop share one session (``probe
launch_all``), a launch alone is a ``probe launch``, and each caller gets its own answer or error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from trialfleet.errors import PlatformError
from trialfleet.training_services.remote.machine import Launches
from trialfleet.training_services.ssh import SshLinkError


class StandInProbe:
    """What Launches uses of a Probe: ``call``, answered as the host's probe would (a keeper pid per trial
    directory), a directory named in ``failing`` answered with an error, ``broken`` raising as a lost link."""

    def __init__(self, failing: tuple[str, ...] = (), broken: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failing = failing
        self.broken = broken

    async def call(self, command: str, request: dict[str, Any], *, timeout: float = 0) -> Any:
        self.calls.append((command, request))
        await asyncio.sleep(0.01)  # a session's round trip: launches asked meanwhile are not part of it
        if self.broken:
            raise SshLinkError("u@h:22: the link broke")
        if command == "launch":
            return self.record(request)
        assert command == "launch_all"
        answers: list[dict[str, Any]] = []
        for one in request["launches"]:
            if one["trial_dir"] in self.failing:
                answers.append(
                    {"error": "RuntimeError: another launch of this trial directory did not finish"}
                )
            else:
                answers.append({"answer": self.record(one)})
        return {"launched": answers}

    @staticmethod
    def record(request: dict[str, Any]) -> dict[str, Any]:
        return {"keeper_pid": int(request["trial_dir"].rsplit("t", 1)[1]), "existing": False}


def launch(trial: int) -> dict[str, Any]:
    return {"trial_dir": f"/r/trials/t{trial}", "code_dir": "/r/code", "files": {}}


async def test_launches_asked_in_one_turn_share_one_session_each_answered_with_its_own_keeper() -> None:
    probe = StandInProbe()
    launches = Launches(probe, "u@h:22")  # type: ignore[arg-type]
    answers = await asyncio.gather(*(launches.launch(launch(i)) for i in (1, 2, 3)))
    assert [a["keeper_pid"] for a in answers] == [1, 2, 3]
    assert probe.calls == [("launch_all", {"launches": [launch(1), launch(2), launch(3)]})]


async def test_a_launch_alone_is_a_probe_launch_and_none_waits_for_a_later_one() -> None:
    probe = StandInProbe()
    launches = Launches(probe, "u@h:22")  # type: ignore[arg-type]
    first = asyncio.ensure_future(launches.launch(launch(1)))
    await asyncio.sleep(0.001)  # its session is under way: the next launch gets one of its own
    second = asyncio.ensure_future(launches.launch(launch(2)))
    assert [(await first)["keeper_pid"], (await second)["keeper_pid"]] == [1, 2]
    assert probe.calls == [("launch", launch(1)), ("launch", launch(2))]


async def test_a_launch_that_fails_in_a_shared_session_fails_alone_naming_the_host() -> None:
    probe = StandInProbe(failing=("/r/trials/t2",))
    launches = Launches(probe, "u@h:22")  # type: ignore[arg-type]
    answers = await asyncio.gather(*(launches.launch(launch(i)) for i in (1, 2, 3)), return_exceptions=True)
    assert [a["keeper_pid"] for a in (answers[0], answers[2])] == [1, 3]  # type: ignore[index]
    assert isinstance(answers[1], PlatformError) and not isinstance(answers[1], SshLinkError)
    assert str(answers[1]) == (
        "u@h:22: probe launch failed (RuntimeError: another launch of this trial directory did not finish)"
    )


async def test_a_session_whose_link_broke_is_a_link_error_for_each_of_its_launches() -> None:
    """Each may have started: the service answers each with a sticky deferral to this host."""
    launches = Launches(StandInProbe(broken=True), "u@h:22")  # type: ignore[arg-type]
    answers = await asyncio.gather(*(launches.launch(launch(i)) for i in (1, 2)), return_exceptions=True)
    assert all(isinstance(a, SshLinkError) for a in answers), answers


async def test_a_launch_whose_caller_gave_up_leaves_the_others_of_its_session_answered() -> None:
    probe = StandInProbe()
    launches = Launches(probe, "u@h:22")  # type: ignore[arg-type]
    given_up = asyncio.ensure_future(launches.launch(launch(1)))
    kept = asyncio.ensure_future(launches.launch(launch(2)))
    await asyncio.sleep(0)  # both asked, the session under way
    given_up.cancel()
    assert (await kept)["keeper_pid"] == 2
    with pytest.raises(asyncio.CancelledError):
        await given_up
    assert [command for command, _ in probe.calls] == ["launch_all"]
