"""OpenPAI's exit spec: what each completion code means (``appExitSpec``) and which user failures the runtime
recognises (its ``runtime-exit-spec``, the positive codes' ``runtimeContainerPatterns``).

``generateExitSpec`` of the rest server: the table's entry for a known code; for an unknown one the entry of 256
(positive) or -8000 (negative) with the code put back; ``null`` for no code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .jscompat import load_yaml

POSITIVE_FALLBACK = 256
NEGATIVE_FALLBACK = -8000


@cache
def table() -> dict[int, dict[str, Any]]:
    entries = load_yaml((Path(__file__).parent / "exit_spec.yaml").read_text())
    return {entry["code"]: entry for entry in entries}


def generate(code: int | None) -> dict[str, Any] | None:
    if code is None:
        return None
    spec = table()
    if code in spec:
        return dict(spec[code])
    fallback = spec[POSITIVE_FALLBACK if code > 0 else NEGATIVE_FALLBACK]
    return {**fallback, "code": code}


@dataclass(frozen=True)
class RuntimePattern:
    container_exit_code: int
    exit_code: int | None
    user_log_regex: re.Pattern[bytes] | None
    needs_platform_log: bool  # matched against the runtime's own log, which has no error lines here


@cache
def runtime_patterns() -> list[RuntimePattern]:
    """The runtime's error patterns in table order; a GPU-ECC pattern (``null`` once rendered) never matches."""
    patterns = []
    for code, entry in table().items():
        if code <= 0:
            continue
        for item in (entry.get("pattern") or {}).get("runtimeContainerPatterns") or []:
            if not item:
                continue
            regex = item.get("userLogRegex")
            patterns.append(
                RuntimePattern(
                    container_exit_code=code,
                    exit_code=item.get("exitCode"),
                    user_log_regex=re.compile(regex.encode())
                    if regex
                    else None,  # Go RE2 syntax, Python-compatible
                    needs_platform_log="platformLogRegex" in item,
                )
            )
    return patterns


__all__ = [
    "NEGATIVE_FALLBACK",
    "POSITIVE_FALLBACK",
    "RuntimePattern",
    "generate",
    "runtime_patterns",
    "table",
]
