"""The access policy applied to every request before anything else sees it (:mod:`trialfleet.access` says
who may talk to a manager and keeps the experiment's token)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from trialfleet.access import AccessPolicy, is_loopback

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class AccessMiddleware:
    """Applies an :class:`AccessPolicy` before anything else sees the request."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.policy.loopback_only and not _names_this_machine(_host(scope)):
            await _refuse(send, 403, _REBINDING_MESSAGE)
            return
        if self.policy.token is None:
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        from_query = next((value for key, value in query if key == "token"), None)
        if from_query is not None and self.policy.accepts(from_query):
            if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
                await self._set_cookie_and_redirect(scope, query, send)
                return
        elif not self._authorised(scope["method"], headers):
            await _refuse(send, 401, _TOKEN_MESSAGE, {"www-authenticate": 'Bearer realm="trialfleet"'})
            return
        await self.app(scope, receive, send)

    def _authorised(self, method: str, headers: dict[str, str]) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.policy.accepts(credentials.strip()):
            return True
        if self.policy.accepts(_cookie(headers.get("cookie", ""), self.policy.cookie_name)):
            return True
        return self.policy.public_read and method in _SAFE_METHODS

    async def _set_cookie_and_redirect(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        """The browser keeps the token in a cookie; the address bar and history lose it."""
        rest = urlencode([(key, value) for key, value in query if key != "token"])
        location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
        cookie = f"{self.policy.cookie_name}={self.policy.token}; Path=/; HttpOnly; SameSite=Lax"
        headers = [
            (b"location", location.encode()),
            (b"set-cookie", cookie.encode()),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


_TOKEN_MESSAGE = (
    "this experiment's server listens beyond loopback and needs its access token: send "
    "'Authorization: Bearer <token>', or open the web UI once at /?token=<token>. The token was printed by "
    "`trialfleet create` and is in the experiment directory's access-token file"
)
_REBINDING_MESSAGE = (
    "this server listens on loopback only and answers requests addressed to localhost, 127.0.0.1 or [::1]; "
    "to reach it under another name, start it with --host (it then needs its access token)"
)


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", ())}


def _host(scope: Scope) -> str:
    for key, value in scope.get("headers", ()):
        if key == b"host":
            return str(value.decode("latin-1"))
    return ""


def _names_this_machine(host_header: str) -> bool:
    if not host_header:
        return True  # HTTP/1.0 clients send none; a browser always does
    host = host_header[1:].partition("]")[0] if host_header.startswith("[") else host_header.partition(":")[0]
    return is_loopback(host)


def _cookie(header: str, name: str) -> str | None:
    try:
        morsel = SimpleCookie(header).get(name)
    except CookieError:
        return None
    return morsel.value if morsel is not None else None


async def _refuse(send: Send, status: int, message: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(key.encode(), value.encode()) for key, value in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
