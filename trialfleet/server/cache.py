"""Encoded bodies of the read routes, kept for as long as the database has not changed.

Fifty clients polling ``/trial-jobs`` and ``/metric-data`` twice a second mostly ask for what the previous
client just got: the manager commits a few times a second at most. So each GET route that is a pure function
of the database (and of its URL) is answered from here while SQLite's ``PRAGMA data_version`` — asked on a
connection of its own, a few microseconds — says no other connection committed since the body was built.
Bodies carry an ``ETag`` (a client sending it back gets ``304 Not Modified``) and are gzipped once per version
for clients that accept it.

The version is read *before* the body is built, so a body is never older than the version it is filed under: a
commit in between only makes the next request build it again.

Builds are single-flight: when a commit makes fifty polling clients miss at once, one of them builds the body
(in a task of its own, which no client's disconnect cancels) and the others wait for it, instead of fifty
threads building the same body against each other and the manager's loop. Gzip is done once per body the same
way.
"""

from __future__ import annotations

import asyncio
import gzip
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from trialfleet.server.context import encode_json


@dataclass(frozen=True)
class EncodedJson:
    """A payload ``build`` has encoded itself (from kept pieces)."""

    data: bytes


def encoded_list(chunks: Iterable[list[Any]], encode: Callable[[Any], str] = encode_json) -> EncodedJson:
    """A JSON list encoded chunk by chunk: the records of a whole list are never all alive at once. Encoding
    10,000 trials' ``/metric-data`` (40,000 records, a 6.8 MB body) in one piece held 38 MB of rows and dicts at
    its peak, which the process kept as RSS after."""
    parts = [encode(chunk)[1:-1].encode() for chunk in chunks if chunk]
    return EncodedJson(b"[" + b",".join(parts) + b"]")


#: bodies smaller than this are sent as they are: gzip would save less than its own header costs
GZIP_MIN_BYTES = 1400
MAX_ENTRIES = 256  # distinct URLs (a page of the trial list is one): the least recently used go first


class ChangeCounter:
    """Has any other connection committed to the database since the last look? Read-only, never blocks writers."""

    def __init__(self, database: Path) -> None:
        self._conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def value(self) -> int:
        with self._lock:
            version: int = self._conn.execute("PRAGMA data_version").fetchone()[0]
            return version

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class _Body:
    version: int
    data: bytes
    headers: Mapping[str, str]
    gzipped: bytes | None = field(default=None, repr=False)
    _compressing: asyncio.Future[bytes] | None = field(default=None, repr=False)

    async def compressed(self) -> bytes:
        """Gzipped once per version, by whichever request asks first; the others wait for it."""
        if self.gzipped is not None:
            return self.gzipped
        if self._compressing is None:
            self._compressing = asyncio.ensure_future(run_in_threadpool(self._compress))
        return await asyncio.shield(self._compressing)

    def _compress(self) -> bytes:
        self.gzipped = gzip.compress(self.data, compresslevel=5, mtime=0)
        return self.gzipped


class ResponseCache:
    def __init__(self, counter: ChangeCounter) -> None:
        self.counter = counter
        # the version numbers restart with each manager process: the token keeps an old ETag from matching
        self._token = secrets.token_hex(4)
        self._bodies: OrderedDict[str, _Body] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[str, tuple[int, asyncio.Future[_Body]]] = {}  # key -> the build in flight
        self._newest = 0  # the newest version a kept body was built from
        self.hits = self.misses = self.builds = 0

    @property
    def kept_bytes(self) -> int:
        """The size of the bodies kept (gzipped copies included)."""
        with self._lock:
            return sum(len(b.data) + len(b.gzipped or b"") for b in self._bodies.values())

    async def respond(
        self,
        request: Request,
        build: Callable[[], tuple[Any, Mapping[str, str]]],
        *,
        media: str = "application/json",
        encode: Callable[[Any], str] = encode_json,
    ) -> Response:
        """The route's response from the cache, or built (off the event loop) and kept.

        ``build`` returns the JSON payload (or an :class:`EncodedJson`) and the headers that go with it; it may
        raise (an HTTP error is not cached)."""
        key = request.url.path + "?" + request.url.query
        version = self.counter.value()
        body = self._get(key, version)
        if body is None:
            flight = self._building.get(key)
            if flight is None or flight[0] < version:  # none, or one that may have read an older database
                flight = (version, asyncio.ensure_future(self._build(key, version, build, encode)))
                self._building[key] = flight
            body = await asyncio.shield(flight[1])
        etag = f'"{self._token}-{body.version}"'
        headers = {**body.headers, "ETag": etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
        if etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        if len(body.data) >= GZIP_MIN_BYTES and "gzip" in request.headers.get("accept-encoding", ""):
            data = await body.compressed()
            return Response(data, media_type=media, headers={**headers, "Content-Encoding": "gzip"})
        return Response(body.data, media_type=media, headers=headers)

    async def _build(
        self,
        key: str,
        version: int,
        build: Callable[[], tuple[Any, Mapping[str, str]]],
        encode: Callable[[Any], str],
    ) -> _Body:
        try:
            self.builds += 1
            payload, headers = await run_in_threadpool(build)
            data = payload.data if isinstance(payload, EncodedJson) else encode(payload).encode()
            body = _Body(version, data, dict(headers))
            self._put(key, body)
            return body
        finally:
            flight = self._building.get(key)
            if flight is not None and flight[1] is asyncio.current_task():
                del self._building[key]

    def _get(self, key: str, version: int) -> _Body | None:
        with self._lock:
            body = self._bodies.get(key)
            if body is None or body.version != version:
                self.misses += 1
                return None
            self._bodies.move_to_end(key)
            self.hits += 1
            return body

    def _put(self, key: str, body: _Body) -> None:
        with self._lock:
            if body.version < self._newest:
                return  # a slower build of an older database finished last: it can never be served
            if body.version > self._newest:
                # versions only grow, so the bodies of older ones can never be served again: they go now, not
                # when their URL is next asked for (10,000 trials' whole lists are megabytes each)
                self._newest = body.version
                for stale in [k for k, kept in self._bodies.items() if kept.version < body.version]:
                    del self._bodies[stale]
            self._bodies[key] = body
            self._bodies.move_to_end(key)
            while len(self._bodies) > MAX_ENTRIES:
                self._bodies.popitem(last=False)
