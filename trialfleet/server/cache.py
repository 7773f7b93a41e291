"""Encoded bodies of the read routes, kept for as long as the database has not changed.

Fifty clients polling ``/trial-jobs`` and ``/metric-data`` twice a second mostly ask for what the previous
client just got: the manager commits a few times a second at most. So each GET route that is a pure function
of the database (and of its URL) is answered from here while SQLite's ``PRAGMA data_version`` — asked on a
connection of its own, a few microseconds — says no other connection committed since the body was built.
Bodies carry an ``ETag`` (a client sending it back gets ``304 Not Modified``) and are gzipped once per version
for clients that accept it.

The version is read *before* the body is built, so a body is never older than the version it is filed under: a
commit in between only makes the next request build it again.

A URL whose route was called once is answered from then on by :class:`CachedReadsMiddleware`, before FastAPI
routes it and solves its dependencies (the cache keeps how the route built the body, and builds it again the
same way): under eight clients polling without pause, that routing was two thirds of the server's CPU per
request (py-spy), for a body that was already built.

Builds are single-flight: when a commit makes fifty polling clients miss at once, one of them builds the body
(in a task of its own, which no client's disconnect cancels) and the others wait for it, instead of fifty
threads building the same body against each other and the manager's loop. While the trials of a run commit
every few milliseconds, each request of such a burst sees a newer version than the build running: it waits
for the *next* build of its URL, which starts when the running one ends and reads the database after every
request waiting for it arrived. So a URL has one build at a time, however often the database commits, and
every answer is as new as the database was when its request came. Gzip is done once per body the same way.
"""

from __future__ import annotations

import asyncio
import gzip
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from trialfleet.server.encoding import EncodedJson, encode_json

#: bodies smaller than this are sent as they are: gzip would save less than its own header costs
GZIP_MIN_BYTES = 1400
#: bodies larger than this are gzipped at level 1: 10,000 trials' /trial-jobs (5.6 MB) took 44 ms at level 5 and
#: 18 ms at level 1, for 12% more bytes (563 KB instead of 504), and while trials run each commit asks again
GZIP_FAST_BYTES = 1 << 20
MAX_ENTRIES = 256  # distinct URLs (a page of the trial list is one): the least recently used go first


def cache_key(scope: Scope) -> str:
    """The key a request's body is kept under: its path and its query as sent."""
    return f"{scope['path']}?{scope.get('query_string', b'').decode('latin-1')}"


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
    media: str
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
        level = 1 if len(self.data) > GZIP_FAST_BYTES else 5
        self.gzipped = gzip.compress(self.data, compresslevel=level, mtime=0)
        return self.gzipped


@dataclass(frozen=True)
class _Recipe:
    """How a URL's body is built: kept so that a request for it needs no routing once it was built."""

    build: Callable[[], tuple[Any, Mapping[str, str]]]
    media: str
    encode: Callable[[Any], str]


def _built(recipe: _Recipe) -> tuple[bytes, Mapping[str, str]]:
    """The body and its headers, encoded where they are built (a worker thread): a JSON list of 10,000 trials
    encoded on the event loop held it for tens of milliseconds."""
    payload, headers = recipe.build()
    return (payload.data if isinstance(payload, EncodedJson) else recipe.encode(payload).encode()), headers


class ResponseCache:
    def __init__(self, counter: ChangeCounter) -> None:
        self.counter = counter
        # the version numbers restart with each manager process: the token keeps an old ETag from matching
        self._token = secrets.token_hex(4)
        self._bodies: OrderedDict[str, _Body] = OrderedDict()
        self._recipes: OrderedDict[str, _Recipe] = OrderedDict()
        self._lock = threading.Lock()
        self._running: dict[str, tuple[int, asyncio.Future[_Body]]] = {}  # key -> (its version, the build)
        self._next: dict[str, asyncio.Future[_Body]] = {}  # key -> the build that starts when it ends
        self._newest = 0  # the newest version a kept body was built from
        self._turn_version: int | None = None  # the version read in this turn of the event loop
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
        raise (an HTTP error is not cached). It is kept, and builds this URL's body again for
        :class:`CachedReadsMiddleware` once the database changed."""
        key = cache_key(request.scope)
        recipe = _Recipe(build, media, encode)
        with self._lock:
            self._recipes[key] = recipe
            self._recipes.move_to_end(key)
            while len(self._recipes) > MAX_ENTRIES:
                self._recipes.popitem(last=False)
        return await self._serve(key, recipe, request.headers)

    async def kept_response(self, scope: Scope) -> Response | None:
        """The response to a GET of a URL whose route was called before: kept, or built again the way that
        route built it; None sends the request on to its route."""
        if scope["method"] != "GET":
            return None
        key = cache_key(scope)
        recipe = self._recipes.get(key)
        if recipe is None:
            return None
        try:
            return await self._serve(key, recipe, Headers(scope=scope))
        except Exception:  # the route raises it again, and answers it the way its errors are answered
            with self._lock:
                self._recipes.pop(key, None)  # (an unknown trial's URL: not built twice per request)
            return None

    def _version(self) -> int:
        """The database's version for a request being answered: read once per turn of the event loop. Every
        request answered in a turn arrived before that turn's look at the sockets, and the version is read after
        it, so it is as new as the database was when each of them came; a burst of fifty requests asks SQLite
        once instead of fifty times (the query was a tenth of the server's CPU per request answered from here)."""
        if self._turn_version is None:
            self._turn_version = self.counter.value()
            asyncio.get_running_loop().call_soon(self._end_turn)
        return self._turn_version

    def _end_turn(self) -> None:
        self._turn_version = None

    async def _serve(self, key: str, recipe: _Recipe, request_headers: Mapping[str, str]) -> Response:
        version = self._version()
        body = self._get(key, version)
        if body is None:
            body = await asyncio.shield(self._flight(key, version, recipe))
        if self._wants_gzip(body, request_headers) and not self._unchanged(body, request_headers):
            await body.compressed()
        return self._response(body, request_headers)

    def _flight(self, key: str, version: int, recipe: _Recipe) -> asyncio.Future[_Body]:
        """The build that answers a request which saw ``version``: the one running, if it started from that
        version or a newer one; else the next one, which starts when the running one ends (one build per URL
        at a time, however many commits land meanwhile) and reads the database after this request came."""
        running = self._running.get(key)
        if running is None:
            return self._next.get(key) or self._start(key, recipe)  # (the next one is about to start)
        if running[0] >= version:
            return running[1]
        if key not in self._next:
            self._next[key] = asyncio.ensure_future(self._after(key, running[1], recipe))
        return self._next[key]

    def _start(self, key: str, recipe: _Recipe) -> asyncio.Future[_Body]:
        version = self.counter.value()  # read before the build: a body is never older than its version
        flight = asyncio.ensure_future(self._build(key, version, recipe))
        self._running[key] = (version, flight)
        return flight

    async def _after(self, key: str, previous: asyncio.Future[_Body], recipe: _Recipe) -> _Body:
        await asyncio.wait([previous])  # its outcome is its own requests'
        del self._next[key]  # from here on a request waits for the build after this one
        return await self._start(key, recipe)

    @staticmethod
    def _wants_gzip(body: _Body, request_headers: Mapping[str, str]) -> bool:
        return len(body.data) >= GZIP_MIN_BYTES and "gzip" in request_headers.get("accept-encoding", "")

    def _etag(self, body: _Body) -> str:
        return f'"{self._token}-{body.version}"'

    def _unchanged(self, body: _Body, request_headers: Mapping[str, str]) -> bool:
        return self._etag(body) in request_headers.get("if-none-match", "")

    def _response(self, body: _Body, request_headers: Mapping[str, str]) -> Response:
        headers = {
            **body.headers,
            "ETag": self._etag(body),
            "Cache-Control": "no-cache",
            "Vary": "Accept-Encoding",
        }
        if self._unchanged(body, request_headers):
            return Response(status_code=304, headers=headers)
        if self._wants_gzip(body, request_headers):
            assert body.gzipped is not None  # compressed by the caller
            return Response(
                body.gzipped, media_type=body.media, headers={**headers, "Content-Encoding": "gzip"}
            )
        return Response(body.data, media_type=body.media, headers=headers)

    async def _build(self, key: str, version: int, recipe: _Recipe) -> _Body:
        try:
            self.builds += 1
            data, headers = await run_in_threadpool(_built, recipe)
            body = _Body(version, data, dict(headers), recipe.media)
            self._put(key, body)
            return body
        finally:
            running = self._running.get(key)
            if running is not None and running[1] is asyncio.current_task():
                del self._running[key]

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


class CachedReadsMiddleware:
    """Answers a GET of a URL the cache knows (its route was called before) from :class:`ResponseCache`,
    without routing it; anything else goes on to FastAPI. It sits inside the access policy: a kept body is only
    sent to a client the policy lets in."""

    def __init__(self, app: ASGIApp, cache: ResponseCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.cache.kept_response(scope) if scope["type"] == "http" else None
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)
