"""The targets table of bench/RESULTS.md: a missed target says what the machine allows, where that was measured."""

from __future__ import annotations

from bench.report import Section, target, target_rows
from bench.stats import Figure


def _section(floor: str, met: bool) -> Section:
    section = Section("4. Remote: 100 trials on 3 SSH hosts, concurrency 8")
    section.add("gap (s)", Figure(0.31, 0.3, 0.4, 3), floor=floor, target=target(met, "< 0.1 s"))
    section.add("wall (s)", Figure(5.0, 4.0, 6.0, 3))
    return section


def test_a_missed_target_names_its_bare_floor() -> None:
    assert target_rows([_section("bare SSH sessions: 0.2", met=False)]) == [
        "| 4. Remote | gap (s) | 0.310 (0.300..0.400) | < 0.1 s: **MISSED** (bare floor, bare SSH sessions: 0.2) |"
    ]


def test_a_met_target_or_one_without_a_floor_is_left_as_it_is() -> None:
    assert target_rows([_section("bare SSH sessions: 0.2", met=True)]) == [
        "| 4. Remote | gap (s) | 0.310 (0.300..0.400) | < 0.1 s: **met** |"
    ]
    assert target_rows([_section("", met=False)]) == [
        "| 4. Remote | gap (s) | 0.310 (0.300..0.400) | < 0.1 s: **MISSED** |"
    ]
