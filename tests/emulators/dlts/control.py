"""The control API under ``/_emu/``, for driving the emulator from another process (JSON in, JSON out).

=======  =================================  ==================================================================
GET      /_emu/config                       dashboard URL, cluster, team, email, password, master token, dirs
GET      /_emu/requests                     the request log (DELETE clears it)
GET      /_emu/jobs, /_emu/jobs/{id}        jobs as the emulator sees them: status history, pid, exit code
POST     /_emu/jobs/{id}/{action}           ``pause``, ``preempt`` or ``lose`` (forget the job: reads ``{}``)
GET      /_emu/faults                       the armed faults (DELETE disarms all, and releases held states)
POST     /_emu/faults/http                  ``{"status": 503, "count": 1, "method": null, "path": null}``
POST     /_emu/faults/submit-error          ``{"message": "...", "count": 1}``
POST     /_emu/faults/launch-error          ``{"message": "...", "count": 1, "job_id": null}``
POST     /_emu/hold, /_emu/release          ``{"state": "queued"}``: jobs stay in the state until released
POST     /_emu/delays                       ``{"queued": 0.5, ...}``: minimum time in each state
POST     /_emu/clock/advance                ``{"seconds": 10}`` (only with a manual clock)
POST     /_emu/step                         one job manager pass now
=======  =================================  ==================================================================
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tests.emulators.dlts.clock import ManualClock
from tests.emulators.dlts.faults import DEFAULT_LAUNCH_ERROR, DEFAULT_SUBMIT_ERROR
from tests.emulators.dlts.web import Request, Response, json_body

if TYPE_CHECKING:
    from tests.emulators.dlts import DltsEmulator

_JOB_ACTION = re.compile(r"^/_emu/jobs/(?P<job>[^/]+)/(?P<action>pause|preempt|lose)$")
_JOB = re.compile(r"^/_emu/jobs/(?P<job>[^/]+)$")


def _body(request: Request) -> dict[str, Any]:
    if not request.body:
        return {}
    value = json.loads(request.body)
    if not isinstance(value, dict):
        raise ValueError("the body must be a JSON object")
    return value


def _fault(emulator: DltsEmulator, kind: str, body: dict[str, Any]) -> None:
    faults = emulator.faults
    if kind == "http":
        faults.http_error(
            int(body.get("status", 503)), int(body.get("count", 1)), body.get("method"), body.get("path")
        )
    elif kind == "submit-error":
        message = str(body.get("message", DEFAULT_SUBMIT_ERROR))
        faults.submit_error(message, count=int(body.get("count", 1)))
    elif kind == "launch-error":
        message = str(body.get("message", DEFAULT_LAUNCH_ERROR))
        faults.launch_error(message, count=int(body.get("count", 1)), job_id=body.get("job_id"))
    else:
        raise LookupError(kind)


def _post(emulator: DltsEmulator, path: str, body: dict[str, Any]) -> Any:
    if (found := _JOB_ACTION.match(path)) is not None:
        getattr(emulator, found["action"])(found["job"])
        return emulator.job(found["job"]) if found["action"] != "lose" else {"lost": found["job"]}
    if path.startswith("/_emu/faults/"):
        _fault(emulator, path.removeprefix("/_emu/faults/"), body)
        return emulator.faults.describe()
    if path in ("/_emu/hold", "/_emu/release"):
        getattr(emulator.faults, path.removeprefix("/_emu/"))(str(body["state"]))
        return emulator.faults.describe()
    if path == "/_emu/delays":
        emulator.set_delays(**{k: float(v) for k, v in body.items()})
        return emulator.config.delays
    if path == "/_emu/clock/advance":
        if not isinstance(emulator.clock, ManualClock):
            raise ValueError(
                "the emulator runs on the system clock; start it with a ManualClock to advance time"
            )
        return {"time": emulator.clock.advance(float(body["seconds"]))}
    if path == "/_emu/step":
        emulator.step()
        return {"stepped": True}
    raise LookupError(path)


def _get(emulator: DltsEmulator, path: str) -> Any:
    if path == "/_emu/config":
        return emulator.describe()
    if path == "/_emu/requests":
        return emulator.requests
    if path == "/_emu/jobs":
        return emulator.jobs()
    if path == "/_emu/faults":
        return emulator.faults.describe()
    if (found := _JOB.match(path)) is not None:
        return emulator.job(found["job"])
    raise LookupError(path)


def handle(emulator: DltsEmulator, request: Request) -> Response:
    path = request.path.rstrip("/")
    try:
        if request.method == "GET":
            return json_body(_get(emulator, path))
        if request.method == "POST":
            return json_body(_post(emulator, path, _body(request)))
        if request.method == "DELETE" and path == "/_emu/requests":
            emulator.clear_requests()
            return json_body({"cleared": True})
        if request.method == "DELETE" and path == "/_emu/faults":
            emulator.faults.clear()
            return json_body(emulator.faults.describe())
    except LookupError as missing:
        return json_body({"error": f"unknown: {missing}"}, 404)
    except (ValueError, TypeError) as bad:
        return json_body({"error": str(bad)}, 400)
    return json_body({"error": f"no such control route: {request.method} {path}"}, 404)


__all__ = ["handle"]
