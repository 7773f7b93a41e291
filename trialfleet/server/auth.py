"""Who may talk to a manager: nobody needs a token on loopback; beyond it, the experiment's access token.

A manager listening on 127.0.0.1/::1 is reached only from this machine, as NNI's is, and asks for no token
(nnictl scripts keep working). It does check the ``Host`` header, so a web page whose domain is made to
resolve to 127.0.0.1 (DNS rebinding) cannot read it from the user's browser.

A manager listening on any other address needs the experiment's token — ``secrets.token_urlsafe(32)`` in
``<experiment dir>/access-token`` (mode 0600) — for every request, or for every request but reads with
``--public-read``. It is presented as ``Authorization: Bearer <token>``, as ``?token=`` (a browser's first
page load: the answer sets an HttpOnly cookie and redirects to the same address without the token), or as
that cookie. Comparisons are constant-time. See docs/security.md for what this protects and what not.

Stdlib only: the CLI and the Python API read the token file without loading the web framework.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

TOKEN_FILE = "access-token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the server on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def token_path(experiment_dir: Path) -> Path:
    return experiment_dir / TOKEN_FILE


def read_token(experiment_dir: Path) -> str | None:
    """The experiment's token, or None when it has none (it never listened beyond loopback) or it is not ours
    to read."""
    try:
        return token_path(experiment_dir).read_text().strip() or None
    except OSError:
        return None


def ensure_token(experiment_dir: Path) -> tuple[str, bool]:
    """The experiment's token, created readable by its owner only if it has none; True when just created."""
    existing = read_token(experiment_dir)
    if existing:
        return existing, False
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(token_path(experiment_dir), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: theirs is the token
        return ensure_token(experiment_dir)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token, True


@dataclass(frozen=True)
class AccessPolicy:
    """What the server asks of a request. The default asks nothing (in-process use, tests)."""

    token: str | None = None
    public_read: bool = False
    loopback_only: bool = False  # refuse Host headers that do not name this machine
    cookie_name: str = "trialfleet_token"

    @classmethod
    def for_listening(
        cls, host: str, experiment_dir: Path, experiment_id: str, *, public_read: bool = False
    ) -> AccessPolicy:
        if is_loopback(host):
            return cls(loopback_only=True)
        token, _ = ensure_token(experiment_dir)
        # a cookie is per host, not per port: one name per experiment keeps two managers' cookies apart
        return cls(token=token, public_read=public_read, cookie_name=f"trialfleet_token_{experiment_id}")

    def accepts(self, presented: str | None) -> bool:
        if self.token is None:
            return True
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())


class AccessMiddleware:
    """Applies an :class:`AccessPolicy` before anything else sees the request."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if self.policy.loopback_only and not _names_this_machine(headers.get("host", "")):
            await _refuse(send, 403, _REBINDING_MESSAGE)
            return
        if self.policy.token is None:
            await self.app(scope, receive, send)
            return
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
