"""Every request the emulated API server received, for tests to assert on (golden conversations).

Headers are kept with lower-case names and without ``authorization`` (the token never lands in a log);
JSON bodies are parsed, other bodies kept as text.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any
    status: int | None = None
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["query"] = [list(pair) for pair in self.query]
        return data


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RecordedRequest] = []

    def record(
        self, method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str], raw_body: bytes
    ) -> RecordedRequest:
        kept = {name.lower(): value for name, value in headers.items() if name.lower() != "authorization"}
        entry = RecordedRequest(method, path, query, kept, _parse(raw_body, kept.get("content-type", "")))
        with self._lock:
            self._records.append(entry)
        return entry

    def all(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    def since(self, index: int) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records[index:])

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()


def _parse(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text
