"""The dashboard as one request handler: the route tables of ``api/router.js`` and ``api/v2/router.js``, the
middleware order of each route, the fault knobs in front, and the request log around it all.

Requests under ``/_emu/`` go to the control API instead, and are neither logged nor subject to faults.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from tests.emulators.dlts import dashboard as jobs
from tests.emulators.dlts import teams
from tests.emulators.dlts.backend import Backend
from tests.emulators.dlts.config import EmulatorConfig
from tests.emulators.dlts.faults import Faults
from tests.emulators.dlts.routing import Match, Route, compile_path, find, param
from tests.emulators.dlts.web import Request, RequestLog, Response, error

JOB = "/clusters/:clusterId/jobs/:jobId"


class DashboardApp:
    def __init__(
        self,
        config: EmulatorConfig,
        backends: dict[str, Backend],
        faults: Faults,
        log: RequestLog,
        control: Callable[[Request], Response],
    ) -> None:
        self.config = config
        self.backends = backends
        self.faults = faults
        self.log = log
        self.control = control
        self.v1, self.v2 = self._routes()

    def _routes(self) -> tuple[list[Route], list[Route]]:
        def v1(method: str, path: str, handler: Any, user: bool = True, schema: str | None = None) -> Route:
            return Route(method, compile_path(path, v2=False), handler, user, schema)

        def v2(method: str, path: str, handler: Any, user: bool = True) -> Route:
            return Route(method, compile_path(path, v2=True), handler, user)

        every = lambda: list(self.backends.values())  # noqa: E731
        routes_v1 = [
            v1("GET", "/", lambda **_: teams.version(), user=False),
            v1("GET", "/teams", lambda email, **_: teams.teams(every(), email)),
            v1(
                "GET",
                "/teams/:teamId/clusters/:clusterId",
                lambda b, email, p, **_: teams.team_cluster(b, email, param(p, "teamId")),
            ),
            v1("GET", "/clusters/:clusterId", lambda b, **_: teams.cluster_config(b)),
            v1(
                "GET",
                "/teams/:teamId/jobs",
                lambda email, p, request, **_: teams.team_jobs(every(), email, param(p, "teamId"), request),
            ),
            v1(
                "POST",
                "/clusters/:clusterId/jobs",
                lambda b, email, body, **_: jobs.submit(b, email, body),
                schema="job",
            ),
            v1(
                "POST",
                "/clusters/:clusterId/jobs/status",
                lambda b, email, body, **_: jobs.set_statuses(b, email, body),
                schema="batch-status",
            ),
            v1("GET", JOB, lambda b, email, job, **_: jobs.job_v1(b, email, job)),
            v1("GET", JOB + "/status", lambda b, job, **_: jobs.job_status(b, job)),
            v1(
                "PUT",
                JOB + "/status",
                lambda b, email, job, body, **_: jobs.set_status(b, email, job, body),
                schema="status",
            ),
            v1(
                "PUT",
                JOB + "/priority",
                lambda b, email, job, body, **_: jobs.set_priority(b, email, job, body),
                schema="priority",
            ),
            v1("GET", JOB + "/log", lambda b, email, job, request, **_: jobs.job_log(b, email, job, request)),
            v1("GET", JOB + "/commands", jobs.not_emulated),
            v1("POST", JOB + "/commands", jobs.not_emulated, schema="command"),
            v1("GET", JOB + "/endpoints", lambda b, email, job, **_: jobs.get_endpoints(b, email, job)),
            v1(
                "POST",
                JOB + "/endpoints",
                lambda b, email, job, body, **_: jobs.post_endpoints(b, email, job, body),
                schema="endpoints",
            ),
            v1("GET", "/user", lambda email, **_: teams.user(self.config, email)),
        ]
        routes_v2 = [
            v2("GET", "/", lambda **_: teams.version(), user=False),
            v2(
                "GET",
                "/teams/:teamId/clusters/:clusterId",
                lambda b, email, p, **_: teams.team_cluster_v2(b, email, param(p, "teamId")),
            ),
            v2(
                "GET",
                "/clusters/:clusterId/teams/:teamId/jobs",
                lambda b, email, p, request, **_: teams.team_jobs_v2(b, email, param(p, "teamId"), request),
            ),
            v2("GET", JOB, lambda b, email, job, **_: jobs.job_v2(b, email, job)),
        ]
        return routes_v1, routes_v2

    def dispatch(self, request: Request) -> Response:
        if request.path == "/_emu" or request.path.startswith("/_emu/"):
            return self.control(request)
        response = self._serve(request)
        self.log.record(request, response)
        return response

    def _serve(self, request: Request) -> Response:
        fault = self.faults.take_http(request.method, request.path)
        if fault is not None:
            return error(fault.status)
        found = find(request.path, request.method, self.v1, self.v2)
        if isinstance(found, Response):
            return found
        try:
            return self._run(found, request)
        except Exception:  # a bug of the emulator: Koa's answer to an uncaught error, not a hung client
            traceback.print_exc()
            return error(500)

    def _run(self, match: Match, request: Request) -> Response:
        """Koa's middleware order: the cluster param, the user, the body, then the controller."""
        kwargs: dict[str, Any] = {"p": match.params, "request": request}
        if "clusterId" in match.params:
            spec = self.config.cluster(param(match.params, "clusterId"))
            if spec is None:
                return error(404, "Cluster is not found")
            kwargs["b"] = self.backends[spec.name]
        if "jobId" in match.params:
            kwargs["job"] = param(match.params, "jobId")
        if match.route.user:
            email = jobs.authenticate(request, self.config)
            if isinstance(email, Response):
                return email
            kwargs["email"] = email
        if match.route.schema is not None:
            body = jobs.checked_body(request, match.route.schema)
            if isinstance(body, Response):
                return body
            kwargs["body"] = body
        return match.route.handler(**kwargs)


__all__ = ["DashboardApp"]
