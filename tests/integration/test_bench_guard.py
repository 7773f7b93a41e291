"""The bench guard: each figure of the suite, as a ratio to a floor of this machine taken in the same run, stays
within twice the ratio recorded in bench/guard_reference.json (`python -m bench.guard --record`)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.guard import ALLOWED, check

ROOT = Path(__file__).resolve().parents[2]


def test_a_figure_over_twice_its_reference_or_missing_fails() -> None:
    reference = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 1.0}
    ratios = {"a": ALLOWED * 1.0, "b": ALLOWED * 2.0 + 0.01, "c": math.nan}
    assert check(ratios, reference) == ["b", "c", "d"]


@pytest.mark.slow
@pytest.mark.alone  # its ratios are timings of the whole machine: nothing of the suite runs beside it
def test_no_figure_regressed_past_twice_its_reference() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.guard"], cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    print(done.stdout)
