"""The emulated cluster's front door: pylon's ``/rest-server`` and ``/log-manager`` prefixes and the control API.

Every request outside ``/_emu`` is recorded. Injected faults answer before anything else; then the rest server's
app-level rate limit (per client address); then the route, or 404 ``NoApiError``. Errors without a code (a YAML
error, a JavaScript TypeError) answer ``{"message"}`` alone, as express's error handler does.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .auth import Principal, Tokens
from .clock import Clock
from .cluster import Cluster
from .config import ClusterConfig
from .errors import RATE_LIMIT_TEXT, PaiError, unknown
from .limits import Faults, Hit, Limiter
from .web import Request, Response, Router, parse_body

NGINX_ERRORS = {502: "Bad Gateway", 503: "Service Temporarily Unavailable", 504: "Gateway Time-out"}


class RateLimited(Exception):
    def __init__(self, hit: Hit) -> None:
        super().__init__("rate limited")
        self.hit = hit


def rate_limited(hit: Hit) -> Response:
    return Response.text(RATE_LIMIT_TEXT, 429, "text/html; charset=utf-8").with_headers(hit.headers())


@dataclass
class Context:
    """What route handlers share."""

    config: ClusterConfig
    clock: Clock
    cluster: Cluster
    tokens: Tokens
    faults: Faults
    api_limiter: Limiter
    list_limiter: Limiter
    submit_limiter: Limiter
    log_tokens: dict[str, float] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    requests_lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, request: Request) -> Principal:
        request.user = self.tokens.check(request.headers.get("Authorization"))
        return request.user

    def limit(self, limiter: Limiter, key: str) -> dict[str, str]:
        hit = limiter.hit(key)
        if hit.blocked:
            raise RateLimited(hit)
        return hit.headers()

    def issue_log_token(self, lifetime: float = 3600.0) -> str:
        """A token for the log manager, as the rest server gets one by logging in to it."""
        token = secrets.token_urlsafe(24)
        with self.requests_lock:
            self.log_tokens[token] = self.clock.now() + lifetime
        return token

    def log_token_valid(self, token: str | None) -> bool:
        with self.requests_lock:
            expires = self.log_tokens.get(token or "")
        return expires is not None and self.clock.now() < expires

    def record(self, request: Request, response: Response) -> None:
        entry = {
            "time": time.time(),
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "headers": {key: value for key, value in request.headers.items()},
            "body": request.raw.decode("utf-8", errors="replace"),
            "status": response.status,
        }
        with self.requests_lock:
            self.requests.append(entry)


class App:
    def __init__(self, ctx: Context, api: Router, pylon: Router, control: Router) -> None:
        self.ctx = ctx
        self.api = api
        self.pylon = pylon
        self.control = control

    def __call__(self, request: Request) -> Response:
        if request.path.startswith("/_emu/") or request.path == "/_emu":
            return self._control(request)
        response = self._serve(request)
        self.ctx.record(request, response)
        return response

    def _control(self, request: Request) -> Response:
        try:
            request.body = parse_body(request, 10 * 1024 * 1024)
            found = self.control.match(request.method, request.path)
            if found is None:
                return Response.json({"message": f"no control route {request.method} {request.path}"}, 404)
            route, request.params = found
            return route.handler(request)
        except PaiError as error:
            return Response.error(error)
        except (KeyError, TypeError, ValueError) as error:
            return Response.json({"message": f"bad control request: {error}"}, 400)
        except Exception as error:  # keep the server answering whatever a control request does
            return Response.json({"message": f"{type(error).__name__}: {error}"}, 500)

    def _serve(self, request: Request) -> Response:
        status = self.ctx.faults.take(request.method, request.path)
        if status is not None:
            return self._fault(status)
        try:
            if request.path.startswith("/rest-server/") or request.path == "/rest-server":
                return self._rest(request)
            found = self.pylon.match(request.method, request.path)
            if found is None:
                return _nginx(404, "Not Found")
            route, request.params = found
            return route.handler(request)
        except RateLimited as limited:
            return rate_limited(limited.hit)
        except PaiError as error:
            return Response.error(error)
        except Exception as error:  # a bug of the emulator or an unforeseen input: the server's catch-all
            return Response.error(unknown(f"{type(error).__name__}: {error}"))

    def _rest(self, request: Request) -> Response:
        inner = request.path[len("/rest-server") :] or "/"
        request.body = parse_body(request, self.ctx.config.limits.body_bytes)  # the body parsers come first
        hit = self.ctx.api_limiter.hit(request.client)
        if hit.blocked:
            return rate_limited(hit)
        found = self.api.match(request.method, inner)
        if found is None:
            url = inner + ("?" + request.query_string if request.query_string else "")
            return Response.json(
                {"code": "NoApiError", "message": f"API {url} is not found."}, 404
            ).with_headers(hit.headers())
        route, request.params = found
        response = route.handler(request)
        return _merge(hit.headers(), response)

    def _fault(self, status: int) -> Response:
        if status == 429:
            hit = Hit(
                self.ctx.config.limits.submit_job_per_hour or 60, 10**9, self.ctx.clock.now() + 3600, 3600
            )
            return rate_limited(hit)
        if status in NGINX_ERRORS:
            return _nginx(status, NGINX_ERRORS[status])
        if status == 401:
            return Response.error(PaiError(401, "UnauthorizedUserError", "Your token is invalid."))
        return Response.error(unknown("Injected fault: the rest server failed.", status))


def _merge(headers: dict[str, str], response: Response) -> Response:
    # a route's own limiter headers (list, submit) replace the app-level ones, as res.setHeader does
    response.headers = {**headers, **response.headers}
    return response


def _nginx(status: int, reason: str) -> Response:
    page = (
        f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx/1.17.6</center>\r\n</body>\r\n</html>\r\n"
    )
    return Response.text(page, status, "text/html")


__all__ = ["App", "Context", "RateLimited", "rate_limited"]
