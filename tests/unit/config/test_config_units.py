"""NNI's units: durations → seconds, memory sizes → MB, GPU index lists (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.config import parse_size, parse_time
from trialfleet.config.units import parse_gpu_indices


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("0.5h", 1800),
        ("1d", 86400),
        ("2H", 7200),
        (" 5 m ", 300),
        ("1.5s", 2),  # ceil, as NNI
        ("0.001m", 1),
        ("1e2s", 100),
        (".5h", 1800),
        ("45", 45),  # a bare number is seconds
        (90, 90),
        (1.2, 2),
        (0, 0),
    ],
)
def test_parse_time(value: Any, seconds: int) -> None:
    assert parse_time(value) == seconds


@pytest.mark.parametrize(
    "value",
    ["", "s", "1w", "1h30m", "-1h", "ten minutes", "1.2.3s", True, None, [1], float("nan"), "1e400h", -5],
)
def test_parse_time_rejects(value: Any) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_time(value)


@pytest.mark.parametrize(
    ("value", "megabytes"),
    [
        ("512mb", 512),
        ("1gb", 1024),
        ("1GB", 1024),
        ("16G", 16384),
        ("8Gi", 8192),
        ("0.5gb", 512),
        ("1tb", 1024 * 1024),
        ("512kb", 1),  # ceil, as NNI
        ("1b", 1),
        ("1048576b", 1),
        ("1048577b", 2),
        (8192, 8192),
        ("2048", 2048),
        (1.5, 2),
    ],
)
def test_parse_size(value: Any, megabytes: int) -> None:
    assert parse_size(value) == megabytes


@pytest.mark.parametrize("value", ["", "gb", "1pb", "big", "-1gb", False, None, {}, float("inf")])
def test_parse_size_rejects(value: Any) -> None:
    with pytest.raises(ValueError, match="expected a memory size"):
        parse_size(value)


def test_huge_integers_stay_exact() -> None:
    assert parse_time(10**30) == 10**30
    assert parse_size(f"{10**30}tb") == 10**30 * 1024**2


@pytest.mark.parametrize(
    ("value", "indices"),
    [
        (0, [0]),
        (3, [3]),
        ([0, 1], [0, 1]),
        ((2, 0), [2, 0]),
        ("0,1,2", [0, 1, 2]),
        (" 1 , 3 ", [1, 3]),
        ("7", [7]),
        ([], []),
        (None, None),
    ],
)
def test_parse_gpu_indices(value: Any, indices: list[int] | None) -> None:
    assert parse_gpu_indices(value) == indices


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0,0", "must not repeat"),
        ([1, 1], "must not repeat"),
        (-1, "cannot be negative"),
        ([0, -2], "cannot be negative"),
        ("a,b", "expected GPU indices"),
        ("", "expected GPU indices"),
        ("0,,1", "expected GPU indices"),
        ("-1", "expected GPU indices"),
        ([0, "1"], "expected GPU indices"),
        (True, "expected GPU indices"),
        (1.0, "expected GPU indices"),
    ],
)
def test_parse_gpu_indices_rejects(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_indices(value)
