"""How the dashboard finds a handler: ``koa-mount('/api')``, the v2 router mounted at ``/v2``, then the v1 router.

koa-router 7 (path-to-regexp 1): v1 routes ignore case and take an optional trailing slash; the v2 router is
``sensitive`` and ``strict``. The ``clusterId`` param middleware runs before the route's own middlewares (so an
unknown cluster is a 404 before credentials are checked), then the user middleware (403), then the body
middleware (400), then the controller. A path with routes for other methods only answers 405 with ``Allow``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from tests.emulators.dlts.web import Response, error

Handler = Callable[..., Response]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    user: bool = True  # behind middlewares/user (403 without valid credentials)
    schema: str | None = None  # behind middlewares/body with this schema


def compile_path(template: str, *, v2: bool) -> re.Pattern[str]:
    """``/clusters/:clusterId/jobs`` to a regex with named groups; v1 adds ``/?`` and ignores case."""
    body = re.sub(r":(\w+)", lambda m: f"(?P<{m.group(1)}>[^/]+?)", template)
    if v2:
        return re.compile(f"^{body}$")
    return re.compile(f"^{body.rstrip('/')}/?$", re.IGNORECASE)


def _strip_mount(path: str, prefix: str) -> str | None:
    """koa-mount: a case-sensitive prefix followed by ``/`` or the end of the path."""
    if path == prefix:
        return "/"
    if path.startswith(prefix + "/"):
        return path[len(prefix) :]
    return None


@dataclass
class Match:
    route: Route
    params: dict[str, str]


def find(path: str, method: str, v1: list[Route], v2: list[Route]) -> Match | Response:
    """The route for ``method`` and ``path`` (the full request path), or the Koa response when there is none."""
    inner = _strip_mount(path, "/api")
    if inner is None:
        return error(404)
    v2_path = _strip_mount(inner, "/v2")
    for routes, candidate in ((v2, v2_path), (v1, inner)):
        if candidate is None:
            continue
        matched = [(r, m) for r in routes if (m := r.pattern.match(candidate))]
        wanted = "GET" if method == "HEAD" else method
        for route, found in matched:
            if route.method == wanted:
                return Match(route, found.groupdict())
        if matched:
            methods = {r.method for r, _ in matched}
            allowed = sorted(methods | ({"HEAD"} if "GET" in methods else set()))
            if method == "OPTIONS":
                return Response(200, b"", None, {"Allow": ", ".join(allowed)})
            return Response(
                405, b"Method Not Allowed", "text/plain; charset=utf-8", {"Allow": ", ".join(allowed)}
            )
    return error(404)


def param(params: dict[str, Any], name: str) -> str:
    """A path parameter, percent-decoded as koa-router does."""
    return unquote(params[name])


__all__ = ["Handler", "Match", "Route", "compile_path", "find", "param"]
