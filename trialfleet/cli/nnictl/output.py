"""nnictl's ways of printing (``nni/tools/nnictl/common_utils.py``, ``constants.py``): everything on stdout,
``INFO:  `` / ``ERROR: `` / ``WARNING: `` prefixes, JSON with indent 4, sorted keys and no space after ``:``,
``[date] message`` lines while an experiment starts, and dates as NNI writes them. No colours: nnictl's are
stripped when its output is not a terminal, and that is what scripts read."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

RULE = "-" * 88


def info(message: str) -> None:
    print("INFO: ", message)  # two spaces, as nnictl's print(NORMAL_INFO, message)


def error(message: str) -> None:
    print("ERROR: " + message)


def warning(message: str) -> None:
    print("WARNING: " + message)


def logged(message: str) -> None:
    """A line of NNI's experiment logger on the console: ``[2026-12-04 13:05:01] message``."""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", flush=True)


def dump(payload: Any) -> None:
    print(json.dumps(payload, indent=4, sort_keys=True, separators=(",", ":"), default=str))


def with_dates(record: dict[str, Any]) -> dict[str, Any]:
    """nnictl's ``convert_time_stamp_to_date``: startTime/endTime in local time, when set."""
    out = dict(record)
    for key in ("startTime", "endTime"):
        if out.get(key):
            moment = datetime.fromtimestamp(out[key] // 1000, timezone.utc).astimezone()
            out[key] = moment.strftime("%Y/%m/%d %H:%M:%S")
    return out


def manifest_time(value: Any) -> str:
    """A manifest entry's time as ``experiment list`` shows it (NNI keeps 'N/A' while there is none)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value / 1000))
    return "N/A" if value is None else str(value)


def experiment_lines(entries: list[tuple[str, dict[str, Any], str]]) -> str:
    """``experiment list``'s block: one ``Id: ..    Name: ..`` line per (id, manifest entry, status)."""
    lines = "".join(
        f"Id: {key}    Name: {entry.get('experimentName') or None}    Status: {status}    "
        f"Port: {entry.get('port') or 'N/A'}    Platform: {entry.get('platform')}    "
        f"StartTime: {manifest_time(entry.get('startTime'))}    EndTime: {manifest_time(entry.get('endTime'))}\n"
        for key, entry, status in entries
    )
    return f"{RULE}\n                Experiment information\n{lines}\n{RULE}\n"
