"""Parsing of NNI's human units: durations, memory sizes and GPU index lists.

Each parser accepts what NNI accepts (and a little more where it cannot surprise anyone) and raises
``ValueError`` with a plain-words message; the config models turn that into a ``ConfigProblem``.
"""

from __future__ import annotations

import math
import re
from typing import Any

_NUMBER_WITH_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)

_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

# NNI counts in powers of 1024 (``parse_memory_size``); the single-letter and ``*i`` spellings that
# Slurm and Kubernetes users type are accepted with the same meaning.
_SIZE_UNITS = {
    "": 1024**2,
    "b": 1,
    **dict.fromkeys(("k", "kb", "ki", "kib"), 1024),
    **dict.fromkeys(("m", "mb", "mi", "mib"), 1024**2),
    **dict.fromkeys(("g", "gb", "gi", "gib"), 1024**3),
    **dict.fromkeys(("t", "tb", "ti", "tib"), 1024**4),
}


def show_value(value: Any) -> str:
    """A config value as the user wrote it in YAML, short enough for an error message."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, dict):
        text = "a mapping"
    elif isinstance(value, list):
        text = "a list"
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _scaled(value: Any, units: dict[str, int], divisor: int, expected: str) -> int:
    """``value`` (a number, or a string of number + unit) times the unit's factor, ceil'ed in ``divisor``s."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected {expected}, got {show_value(value)}")
    if isinstance(value, str):
        match = _NUMBER_WITH_UNIT.match(value)
        if match is None or match.group(2).lower() not in units:
            raise ValueError(f"expected {expected}, got {show_value(value)}")
        digits = match.group(1)
        number, factor = (int(digits) if digits.isdigit() else float(digits)), units[match.group(2).lower()]
    else:
        number, factor = value, units[""]
    if isinstance(number, int):  # exact integer arithmetic: huge ints must not overflow a float
        result = -(-(number * factor) // divisor)
    else:
        scaled = number * factor / divisor
        if not math.isfinite(scaled):
            raise ValueError(f"expected {expected}, got {show_value(value)}")
        result = math.ceil(scaled)
    if result < 0:
        raise ValueError(f"expected {expected}, got {show_value(value)}")
    return result


def parse_time(value: Any) -> int:
    """NNI time string → whole seconds, rounded up: ``'0.5h'`` → 1800, ``'10m'`` → 600, ``90`` → 90."""
    return _scaled(
        value, _TIME_UNITS, 1, "a duration such as '30s', '10m', '0.5h', '1d' or a number of seconds"
    )


def parse_size(value: Any) -> int:
    """NNI memory size → whole megabytes (MiB), rounded up: ``'1gb'`` → 1024, ``'512kb'`` → 1, ``2048`` → 2048."""
    return _scaled(
        value, _SIZE_UNITS, 1024**2, "a memory size such as '512mb', '16gb' or a number of megabytes"
    )


def parse_gpu_indices(value: Any) -> list[int] | None:
    """``0`` / ``[0, 1]`` / ``"0,1"`` → ``[0, 1]``; rejects negatives and duplicates. ``None`` stays ``None``."""
    if value is None:
        return None
    expected = "GPU indices as an integer, a list of integers or a string like '0,1,2'"
    if isinstance(value, str):
        parts: list[Any] = [p.strip() for p in value.split(",")]
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"expected {expected}, got {show_value(value)}")
        indices = [int(p) for p in parts]
    elif isinstance(value, (list, tuple)):
        indices = list(value)
    else:
        indices = [value]
    if any(isinstance(i, bool) or not isinstance(i, int) for i in indices):
        raise ValueError(f"expected {expected}, got {show_value(value)}")
    if any(i < 0 for i in indices):
        raise ValueError(f"GPU indices cannot be negative, got {show_value(value)}")
    if len(set(indices)) != len(indices):
        raise ValueError(f"GPU indices must not repeat, got {show_value(value)}")
    return indices
