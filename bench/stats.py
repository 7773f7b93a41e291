"""Medians, spreads and percentiles of repeated measurements."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between the closest ranks (``p`` in 0..100); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * p / 100
    low, high = math.floor(k), min(math.floor(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@dataclass(frozen=True)
class Figure:
    """One measured quantity over repetitions: its median and its spread (min..max)."""

    median: float
    low: float
    high: float
    reps: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Figure:
        found = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
        if not found:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(found), min(found), max(found), len(found))

    @property
    def spread(self) -> float:
        return self.high - self.low

    def __bool__(self) -> bool:
        return self.reps > 0


def figures(runs: Sequence[dict[str, float]]) -> dict[str, Figure]:
    """Per key, the figure over every run that measured it."""
    keys = {k for run in runs for k in run}
    return {k: Figure.of(run[k] for run in runs if k in run) for k in sorted(keys)}
