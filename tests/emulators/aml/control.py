"""``/_emu/...``: the emulator's own control API, for tests that run it in another process.

GET    /_emu/info                      workspace, principal, URLs, CA bundle, environment for clients
GET    /_emu/requests                  the request log;   DELETE clears it
GET    /_emu/faults                    armed faults;      POST {status, times?, method?, path?, retryAfter?};  DELETE clears
POST   /_emu/tokens/revoke             every token issued so far is refused from now on
POST   /_emu/clock/advance             {"seconds": s} (only with a manual clock)
POST   /_emu/settings                  {stateDelay?, requireSeen?, notFoundAfterCreate?, retryAfter?, failImages?, holdStates?}
GET    /_emu/jobs[/<name>]             status, history, exit code, error, container pid
POST   /_emu/jobs/<name>/hold          {"state": s} or {"state": null} to release
POST   /_emu/jobs/<name>/force         {"status": "NotResponding" | "Paused" | ..., "code"?, "message"?}
GET    /_emu/jobs/<name>/metrics       every metric the job logged, in arrival order
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .wire import HttpError, Request, Response, Router

if TYPE_CHECKING:
    from . import AmlEmulator


def _error(status: int, message: str) -> HttpError:
    return HttpError(Response.json(status, {"error": message}))


class ControlRoutes:
    def __init__(self, emulator: AmlEmulator) -> None:
        self.emulator = emulator
        self.router = Router()
        add = self.router.add
        add("GET", "/_emu/info", lambda r, m: Response.json(200, self.emulator.info()))
        add(
            "GET",
            "/_emu/requests",
            lambda r, m: Response.json(200, [e.to_dict() for e in self.emulator.requests()]),
        )
        add("DELETE", "/_emu/requests", self.clear_requests)
        add("GET", "/_emu/faults", lambda r, m: Response.json(200, self.emulator.faults.describe()))
        add("POST", "/_emu/faults", self.add_fault)
        add("DELETE", "/_emu/faults", self.clear_faults)
        add("POST", "/_emu/tokens/revoke", self.revoke)
        add("POST", "/_emu/clock/advance", self.advance)
        add("POST", "/_emu/settings", self.settings)
        add("GET", "/_emu/jobs", lambda r, m: Response.json(200, self.emulator.job_states()))
        add("GET", r"/_emu/jobs/(?P<name>[^/]+)", self.job)
        add("POST", r"/_emu/jobs/(?P<name>[^/]+)/hold", self.hold)
        add("POST", r"/_emu/jobs/(?P<name>[^/]+)/force", self.force)
        add("GET", r"/_emu/jobs/(?P<name>[^/]+)/metrics", self.metrics)

    def handle(self, request: Request) -> Response:
        found = self.router.find(request.method, request.path)
        if not isinstance(found, tuple):
            return Response.json(
                404 if found is None else 405, {"error": f"no control route {request.method} {request.path}"}
            )
        handler, match = found
        try:
            return handler(request, match)
        except HttpError as error:
            return error.response
        except (KeyError, ValueError, TypeError) as error:
            return Response.json(400, {"error": str(error)})

    def _body(self, request: Request) -> dict[str, Any]:
        body = request.json() or {}
        if not isinstance(body, dict):
            raise _error(400, "the body must be a JSON object")
        return body

    def clear_requests(self, request: Request, match: re.Match[str]) -> Response:
        self.emulator.request_log.clear()
        return Response(204)

    def add_fault(self, request: Request, match: re.Match[str]) -> Response:
        body = self._body(request)
        fault = self.emulator.faults.add(
            int(body["status"]),
            times=int(body.get("times", 1)),
            method=body.get("method"),
            path=body.get("path"),
            retry_after=body.get("retryAfter"),
            code=body.get("code"),
            message=body.get("message"),
        )
        return Response.json(201, fault.to_dict())

    def clear_faults(self, request: Request, match: re.Match[str]) -> Response:
        self.emulator.faults.clear()
        return Response(204)

    def revoke(self, request: Request, match: re.Match[str]) -> Response:
        self.emulator.revoke_tokens()
        return Response(204)

    def advance(self, request: Request, match: re.Match[str]) -> Response:
        try:
            now = self.emulator.advance_clock(float(self._body(request)["seconds"]))
        except TypeError as error:
            raise _error(409, str(error)) from error
        return Response.json(200, {"now": now})

    def settings(self, request: Request, match: re.Match[str]) -> Response:
        self.emulator.configure(**self._body(request))
        return Response.json(200, self.emulator.info()["settings"])

    def job(self, request: Request, match: re.Match[str]) -> Response:
        states = {state["name"]: state for state in self.emulator.job_states()}
        if match["name"] not in states:
            raise _error(404, f"no job {match['name']}")
        return Response.json(200, states[match["name"]])

    def hold(self, request: Request, match: re.Match[str]) -> Response:
        self.emulator.hold(match["name"], self._body(request).get("state"))
        return Response(204)

    def force(self, request: Request, match: re.Match[str]) -> Response:
        body = self._body(request)
        self.emulator.force_status(
            match["name"], str(body["status"]), code=body.get("code"), message=body.get("message")
        )
        return Response(204)

    def metrics(self, request: Request, match: re.Match[str]) -> Response:
        return Response.json(200, self.emulator.metrics(match["name"]))
