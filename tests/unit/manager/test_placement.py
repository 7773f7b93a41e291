"""Placement of a hybrid experiment's trials as pure functions: weights, each platform's own limits, platforms
that are down or failed, trials pinned to the platform they may have started on."""

from __future__ import annotations

from collections import Counter

import pytest

from trialfleet.manager.placement import PlatformLoad, placement_order, unplaced_reason


def place(weights: dict[str, float], count: int, limits: dict[str, int] | None = None) -> Counter[str]:
    """Where ``count`` trials go when every platform accepts whatever it is offered first."""
    live: Counter[str] = Counter()
    for _ in range(count):
        loads = [PlatformLoad(n, w, live[n], (limits or {}).get(n)) for n, w in weights.items()]
        order = placement_order(loads)
        if not order:
            break
        live[order[0]] += 1
    return live


@pytest.mark.parametrize(
    ("weights", "count", "expected"),
    [
        ({"local": 1, "remote": 1, "slurm": 1}, 9, {"local": 3, "remote": 3, "slurm": 3}),
        ({"local": 3, "remote": 1}, 8, {"local": 6, "remote": 2}),
        ({"local": 3, "remote": 1}, 4, {"local": 3, "remote": 1}),
        ({"local": 1, "slurm": 2.5}, 7, {"local": 2, "slurm": 5}),
        ({"local": 2, "remote": 0}, 5, {"local": 5}),  # weight 0: a fallback only
    ],
)
def test_shares_follow_the_weights_at_every_count(
    weights: dict[str, float], count: int, expected: dict[str, int]
) -> None:
    assert place(weights, count) == Counter(expected)


def test_shares_stay_proportional_while_trials_are_placed_one_by_one() -> None:
    for count in range(1, 41):
        live = place({"local": 3, "remote": 1}, count)
        assert abs(live["local"] - 3 * count / 4) <= 1, (count, live)


def test_ties_go_to_the_earlier_block() -> None:
    loads = [PlatformLoad("remote", 1, 0), PlatformLoad("local", 1, 0)]
    assert placement_order(loads) == ["remote", "local"]


def test_a_platform_at_its_own_trial_concurrency_gets_no_more() -> None:
    assert place({"local": 5, "remote": 1}, 6, limits={"local": 2}) == Counter({"local": 2, "remote": 4})
    assert place({"local": 1, "remote": 1}, 9, limits={"local": 1, "remote": 2}) == Counter(
        {"local": 1, "remote": 2}
    )


def test_a_fallback_takes_trials_once_the_weighted_platforms_are_full() -> None:
    assert place({"local": 1, "slurm": 0}, 5, limits={"local": 2}) == Counter({"local": 2, "slurm": 3})


def test_platforms_that_deferred_this_round_are_skipped() -> None:
    loads = [PlatformLoad("local", 1, 0), PlatformLoad("remote", 1, 0), PlatformLoad("slurm", 1, 5)]
    assert placement_order(loads) == ["local", "remote", "slurm"]
    assert placement_order(loads, skip={"local"}) == ["remote", "slurm"]
    assert placement_order(loads, skip={"local", "remote", "slurm"}) == []


def test_down_and_failed_platforms_get_no_trials() -> None:
    loads = [
        PlatformLoad("local", 1, 4),
        PlatformLoad("remote", 1, 0, down="no machine is reachable"),
        PlatformLoad("slurm", 1, 0, failed=True),
    ]
    assert placement_order(loads) == ["local"]
    assert place({"local": 1}, 3) == Counter({"local": 3})


def test_a_pinned_trial_goes_back_where_it_may_have_started() -> None:
    loads = [PlatformLoad("local", 1, 0), PlatformLoad("remote", 1, 9)]
    assert placement_order(loads, pinned="remote") == ["remote"]
    # while that platform cannot take it, it waits rather than start a second copy elsewhere
    assert placement_order(loads, pinned="remote", skip={"remote"}) == []
    down = [PlatformLoad("local", 1, 0), PlatformLoad("remote", 1, 0, down="unreachable")]
    assert placement_order(down, pinned="remote") == []
    # a platform that failed for good cannot run it: it goes anywhere
    failed = [PlatformLoad("local", 1, 0), PlatformLoad("remote", 1, 0, failed=True)]
    assert placement_order(failed, pinned="remote") == ["local"]


def test_a_waiting_trial_says_what_each_platform_answered() -> None:
    loads = [
        PlatformLoad("local", 1, 2, limit=2),
        PlatformLoad("remote", 1, 0, down="no machine is reachable: h1: timeout"),
        PlatformLoad("slurm", 1, 0, failed=True),
        PlatformLoad("aml", 1, 1),
    ]
    answers = {"aml": "waiting for a compute node"}
    assert unplaced_reason(loads, answers) == (
        "local: its trialConcurrency (2) is reached; remote: no machine is reachable: h1: timeout; "
        "aml: waiting for a compute node"
    )
    assert unplaced_reason(loads[3:], answers) == "waiting for a compute node"  # one platform: as it said
    assert unplaced_reason(loads, answers, pinned="aml") == (
        "waiting for aml, where it may have started already: waiting for a compute node"
    )
    assert unplaced_reason(loads[2:3], {}) == "no platform of the experiment is running"
