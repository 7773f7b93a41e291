"""A job's log as DLTS's Elasticsearch backend serves it (``src/utils/JobLogUtils.py``).

Fluentd ships each line a pod prints as one document with an ``@timestamp`` (milliseconds) and ``time_nsec``.
``GetJobLog`` asks for at most 100 documents sorted by both, after the cursor ``"<ms>.<nsec>"`` of the last page,
and answers ``{pod name: text}`` plus the cursor of the last line it returned. No lines means ``{}`` and a null
cursor, which the dashboard turns into 404. A cursor it cannot parse is ignored (the log starts over); one with
the wrong number of parts makes the search fail, which also ends in ``{}``.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path

PAGE_SIZE = 100


@dataclass(frozen=True)
class LogLine:
    stamp_ms: int
    nsec: int
    pod: str
    text: str  # with its newline, as fluentd keeps it

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.stamp_ms, self.nsec)


def parse_cursor(cursor: str | None) -> list[int] | None:
    """``TryParseCursor``: ``cursor.split('.', 2)`` as integers, or None when that fails."""
    if cursor is None:
        return None
    try:
        return [int(part) for part in cursor.split(".", 2)]
    except ValueError:
        return None


class JobLog:
    """The lines of every pod the job ever had, in the order fluentd stamped them."""

    def __init__(self) -> None:
        self._lines: list[LogLine] = []
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._lock = threading.Lock()

    def ingest(self, path: Path, pod: str, now: float, *, final: bool = False) -> None:
        """Ship the complete lines ``path`` gained since the last call (and a last unterminated one if ``final``)."""
        with self._lock:
            try:
                with open(path, "rb") as stream:
                    stream.seek(self._offsets.get(path, 0))
                    data = stream.read()
            except FileNotFoundError:
                return
            self._offsets[path] = self._offsets.get(path, 0) + len(data)
            data = self._partial.pop(path, b"") + data
            *complete, rest = data.split(b"\n")
            texts = [line + b"\n" for line in complete]
            if final and rest:
                texts.append(rest)
            elif rest:
                self._partial[path] = rest
            for text in texts:
                self._append(pod, text.decode("utf-8", errors="replace"), now)

    def append(self, pod: str, text: str, now: float) -> None:
        with self._lock:
            self._append(pod, text, now)

    def _append(self, pod: str, text: str, now: float) -> None:
        stamp_ms = int(now * 1000)
        nsec = round(now * 1e9) % 1_000_000_000
        if self._lines and self._lines[-1].stamp_ms == stamp_ms:
            nsec = max(
                nsec, self._lines[-1].nsec + 1
            )  # keep one order for lines stamped in the same millisecond
        self._lines.append(LogLine(stamp_ms, nsec, pod, text))

    def text(self) -> str:
        with self._lock:
            return "".join(line.text for line in self._lines)

    def page(self, cursor: str | None, size: int = PAGE_SIZE) -> tuple[dict[str, str], str | None]:
        """One ``GetJobLog`` answer: up to ``size`` lines after ``cursor``, grouped by consecutive pod."""
        after = parse_cursor(cursor)
        if after is not None and len(after) != 2:
            return {}, None  # search_after with a wrong number of sort values: the search raises
        with self._lock:
            lines = [ln for ln in self._lines if after is None or ln.sort_key > (after[0], after[1])][:size]
        pods: dict[str, str] = {}
        for pod, group in itertools.groupby(lines, key=lambda ln: ln.pod):
            pods[pod] = "".join(
                ln.text for ln in group
            )  # a later group of the same pod replaces it, as in DLTS
        if not lines:
            return pods, None
        return pods, f"{lines[-1].stamp_ms}.{lines[-1].nsec}"


__all__ = ["PAGE_SIZE", "JobLog", "LogLine", "parse_cursor"]
