"""``/_emu/...``: the emulator's own API, for tests driving an emulator in another process.

| route | what |
|---|---|
| ``GET /_emu/requests?since=N`` / ``DELETE /_emu/requests`` | the request log (from entry N) / empty it |
| ``GET /_emu/jobs`` | every job's FC state, attempt and tasks (pod uid, host dir of the logs) |
| ``POST /_emu/jobs/{user~job}/lose`` | the framework vanishes: pods killed, 404 NoJobError afterwards |
| ``POST /_emu/faults`` ``{status, count, method?, path?}`` | the next requests answer ``status`` |
| ``POST /_emu/faults/hide-next-jobs`` ``{gets, jobs}`` | new jobs answer 404 to their first GETs |
| ``DELETE /_emu/faults`` | no more faults |
| ``POST /_emu/tokens`` ``{user, lifetime?, application?}`` | a new token |
| ``POST /_emu/tokens/expire`` ``{token}`` or ``{user}`` | tokens answer 401 from now on |
| ``GET``/``POST /_emu/delays`` ``{state: seconds}`` | how long each FC state lasts at least |
| ``POST /_emu/hold`` ``{enabled}`` | states also wait until a GET returned them |
| ``POST /_emu/limits`` ``{apiPerMin?, listJobPerMin?, submitJobPerHour?}`` | rate limits (0: off) |
| ``POST /_emu/virtual-clusters/{vc}`` ``{cpu, memory, gpu}`` | a VC's capacity |
| ``GET /_emu/clock``, ``POST /_emu/clock/advance`` ``{seconds}`` | the emulator's time (manual clock only) |
| ``POST /_emu/tick`` | run the controller once now |
"""

from __future__ import annotations

from typing import Any

from .app import Context
from .capacity import Resources
from .clock import ManualClock
from .model import Framework
from .web import Request, Response, Router


def job_state(ctx: Context, fw: Framework) -> dict[str, Any]:
    tasks = []
    for task in fw.attempt.all_tasks() if fw.attempt else []:
        pod = task.attempt
        directory = (
            ctx.cluster.kubelet.pod_dir(fw.user, fw.debug_id, task.role, pod.pod_uid) if pod.pod_uid else None
        )
        tasks.append(
            {
                "role": task.role,
                "index": task.index,
                "state": task.state,
                "attemptId": pod.id,
                "podUid": pod.pod_uid,
                "exitCode": pod.completion.code if pod.completion else None,
                "logDir": str(directory) if directory else None,
            }
        )
    return {
        "name": fw.name,
        "subState": fw.state,
        "executionType": fw.execution_type,
        "attemptId": fw.attempt.id if fw.attempt else None,
        "retries": fw.total_retried,
        "tasks": tasks,
    }


def register(router: Router, ctx: Context) -> None:
    def requests(request: Request) -> Response:
        since = int(request.query.get("since", "0"))
        with ctx.requests_lock:
            entries = ctx.requests[since:]
            total = len(ctx.requests)
        return Response.json({"requests": entries, "next": total})

    def clear_requests(request: Request) -> Response:
        with ctx.requests_lock:
            ctx.requests.clear()
        return Response.json({})

    def jobs(request: Request) -> Response:
        with ctx.cluster.lock:
            return Response.json([job_state(ctx, fw) for fw in ctx.cluster.frameworks.values()])

    def lose(request: Request) -> Response:
        ctx.cluster.lose(request.params["name"])
        return Response.json({})

    def faults(request: Request) -> Response:
        body = request.body
        ctx.faults.fail_next(
            int(body.get("count", 1)), int(body["status"]), body.get("method"), body.get("path")
        )
        return Response.json({})

    def hide(request: Request) -> Response:
        ctx.faults.hide_next_jobs(int(request.body.get("gets", 1)), int(request.body.get("jobs", 1)))
        return Response.json({})

    def clear_faults(request: Request) -> Response:
        ctx.faults.clear()
        return Response.json({})

    def token(request: Request) -> Response:
        body = request.body
        lifetime = body.get("lifetime")
        value = ctx.tokens.issue(
            body["user"], bool(body.get("application")), None if lifetime is None else float(lifetime)
        )
        return Response.json({"token": value})

    def expire(request: Request) -> Response:
        return Response.json(
            {"expired": ctx.tokens.expire(request.body.get("token"), request.body.get("user"))}
        )

    def delays(request: Request) -> Response:
        if request.method == "POST":
            ctx.config.timing.delays.update({k: float(v) for k, v in request.body.items()})
        return Response.json(ctx.config.timing.delays)

    def hold(request: Request) -> Response:
        ctx.config.timing.hold_until_seen = bool(request.body["enabled"])
        return Response.json({})

    def limits(request: Request) -> Response:
        for key, limiter in (
            ("apiPerMin", ctx.api_limiter),
            ("listJobPerMin", ctx.list_limiter),
            ("submitJobPerHour", ctx.submit_limiter),
        ):
            if key in request.body:
                limiter.limit = int(request.body[key])
        return Response.json({})

    def capacity(request: Request) -> Response:
        body = request.body
        ctx.cluster.quota.set_total(
            request.params["vc"], Resources(int(body["cpu"]), int(body["memory"]), int(body["gpu"]))
        )
        return Response.json({})

    def clock(request: Request) -> Response:
        return Response.json({"now": ctx.clock.now(), "manual": isinstance(ctx.clock, ManualClock)})

    def advance(request: Request) -> Response:
        if not isinstance(ctx.clock, ManualClock):
            return Response.json({"message": "the emulator runs on the system clock"}, 409)
        return Response.json({"now": ctx.clock.advance(float(request.body["seconds"]))})

    def tick(request: Request) -> Response:
        ctx.cluster.tick()
        return Response.json({})

    for method, path, handler in (
        ("GET", "/_emu/requests", requests),
        ("DELETE", "/_emu/requests", clear_requests),
        ("GET", "/_emu/jobs", jobs),
        ("POST", "/_emu/jobs/:name/lose", lose),
        ("POST", "/_emu/faults", faults),
        ("POST", "/_emu/faults/hide-next-jobs", hide),
        ("DELETE", "/_emu/faults", clear_faults),
        ("POST", "/_emu/tokens", token),
        ("POST", "/_emu/tokens/expire", expire),
        ("GET", "/_emu/delays", delays),
        ("POST", "/_emu/delays", delays),
        ("POST", "/_emu/hold", hold),
        ("POST", "/_emu/limits", limits),
        ("POST", "/_emu/virtual-clusters/:vc", capacity),
        ("GET", "/_emu/clock", clock),
        ("POST", "/_emu/clock/advance", advance),
        ("POST", "/_emu/tick", tick),
    ):
        router.add(method, path, handler)


__all__ = ["job_state", "register"]
