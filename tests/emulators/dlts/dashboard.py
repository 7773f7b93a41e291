"""The dashboard's job routes (``src/dashboard/server/api``): authentication, body checks, and the forwarding of
each call to the cluster's RestAPI with the dashboard's quirks kept:

- a submit answers the RestAPI's text with HTTP 200 whether it holds ``jobId`` or ``error``;
- ``GET /api/v2/.../jobs/{id}`` answers ``{}`` for an unknown job, the v1 detail a 502;
- a kill, pause, resume or approval that cannot happen still answers 200 with "Cannot ..." in ``result``;
- the log answers 404 once there is nothing (more) to read;
- a RestAPI error on endpoints or priority becomes 502 Bad Gateway.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.emulators.dlts.backend import Backend
from tests.emulators.dlts.config import EmulatorConfig, generate_token, node_hex_decode
from tests.emulators.dlts.endpoints import check_request, list_endpoints, update_endpoints
from tests.emulators.dlts.jobs import can_expose
from tests.emulators.dlts.schemas import validate, validate_job_body
from tests.emulators.dlts.submit import BackendFailure
from tests.emulators.dlts.web import Request, Response, error, flask_text, flask_value, json_body, text

_JSON_TYPES = (
    "application/json",
    "application/json-patch+json",
    "application/vnd.api+json",
    "application/csp-report",
)
# (operation of job_op.py, success text, failure text) for each status the PUT accepts
_STATUS_OPS = {
    "approved": ("approve", "Success, the job has been approved.", "Cannot approve the job. Job ID:"),
    "killing": ("kill", "Success, the job is scheduled to be terminated.", "Cannot Kill the job. Job ID:"),
    "pausing": ("pause", "Success, the job is scheduled to be paused.", "Cannot pause the job. Job ID:"),
    "queued": ("resume", "Success, the job is scheduled to be resumed.", "Cannot resume the job. Job ID:"),
}


def authenticate(request: Request, config: EmulatorConfig) -> str | Response:
    """``middlewares/user.js``: ``email`` plus ``password`` (or legacy ``token``) = hex md5(email:masterToken)."""
    given = request.arg("email")
    if given is None:
        return error(403)  # the cookie JWT of the web UI is the only other way in, and it is not emulated
    email = (
        ",".join(given) if isinstance(given, list) else given
    )  # a repeated parameter, as a template string
    password = request.arg("password")
    if password is None:
        password = request.arg("token")
    if not password:
        return error(403)
    actual = node_hex_decode(password) if isinstance(password, str) else b""
    if actual != generate_token(email, config.master_token):
        return error(403, "Invalid token")
    return email


def parse_body(request: Request) -> Any:
    """koa-bodyparser with ``enableTypes: ['json']`` in strict mode; a Response when the body is refused."""
    mime = (request.header("content-type") or "").split(";")[0].strip().lower()
    if mime not in _JSON_TYPES:
        return {}
    raw = request.body.decode("utf-8", errors="replace")
    if not raw:
        return {}
    if not raw.lstrip(" \t\n\r").startswith(("{", "[")):
        return error(400, "invalid JSON, only supports object and array")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as bad:
        if bad.pos >= len(raw):
            return error(400, "Unexpected end of JSON input")
        return error(400, f"Unexpected token {raw[bad.pos]} in JSON at position {bad.pos}")


def checked_body(request: Request, schema: str) -> Any:
    body = parse_body(request)
    if isinstance(body, Response):
        return body
    message = validate_job_body(body) if schema == "job" else validate(schema, body)
    return error(400, message) if message is not None else body


def submit(backend: Backend, email: str, body: dict[str, Any]) -> Response:
    job = dict(body)
    job.update(userName=email, familyToken=str(uuid.uuid4()), isParent=1)
    try:
        return text(flask_text(backend.post_job(job)))
    except BackendFailure:
        return error(500)


def job_v2(backend: Backend, email: str, job_id: str) -> Response:
    return json_body(flask_value(backend.job_detail_v2(email, job_id)))


def job_v1(backend: Backend, email: str, job_id: str) -> Response:
    detail = backend.job_detail_v1(email, job_id)
    return error(502) if detail is None else json_body(flask_value(detail))


def job_status(backend: Backend, job_id: str) -> Response:
    data = backend.job_status(job_id)
    if data is None:
        return error(404)
    status: dict[str, Any] = {"status": data["jobStatus"]}
    if data["errorMsg"]:
        status["message"] = data["errorMsg"]
    return json_body(status)


def set_status(backend: Backend, email: str, job_id: str, body: dict[str, Any]) -> Response:
    op, success, failure = _STATUS_OPS[body["status"]]
    done = backend.op_job(email, job_id, op)
    return text(flask_text({"result": success if done else failure + job_id}))


def set_statuses(backend: Backend, email: str, body: dict[str, Any]) -> Response:
    """``jobs/status.post.js``: one RestAPI call per status, each answer kept as the text it was."""
    grouped: dict[str, list[str]] = {}
    for job_id, status in body["status"].items():
        grouped.setdefault(status, []).append(job_id)
    answers = {}
    for status in ("approved", "killing", "pausing", "queued"):
        if grouped.get(status):
            result = backend.op_jobs(email, grouped[status], _STATUS_OPS[status][0])
            answers[status] = flask_text({"result": result})
    return json_body(answers)


def set_priority(backend: Backend, email: str, job_id: str, body: dict[str, Any]) -> Response:
    answer, status = backend.update_priorities(email, {job_id: body["priority"]})
    return text(flask_text(answer)) if status == 200 else error(502)


def job_log(backend: Backend, email: str, job_id: str, request: Request) -> Response:
    cursor = request.arg("cursor")
    cursor = ",".join(cursor) if isinstance(cursor, list) else cursor
    answer = backend.job_log(email, job_id, cursor)
    if len(answer["log"]) == 0:
        return error(404)
    return json_body({"log": flask_value(answer["log"]), "cursor": answer["cursor"]})


def get_endpoints(backend: Backend, email: str, job_id: str) -> Response:
    with backend.table.lock:
        items = list_endpoints(backend.table.get(job_id), email, backend.config, backend.spec.domain)
    return json_body(flask_value(items))


def post_endpoints(backend: Backend, email: str, job_id: str, body: dict[str, Any]) -> Response:
    """``Endpoint.post`` then ``UpdateEndpoints``; every RestAPI refusal reaches the client as 502."""
    requested = body["endpoints"]
    if check_request(requested) is not None:
        return error(502)
    with backend.table.lock:
        job = backend.table.get(job_id)
        if job is None or not can_expose(backend.config, email, job):
            return error(502)
        try:
            endpoints = update_endpoints(job, requested)
        except (KeyError, TypeError, ValueError):
            return error(502)
    backend.wake.set()
    return text(flask_text(endpoints))


def not_emulated(**_: Any) -> Response:
    return text("emulator: job commands (kubectl exec in the pod) are not emulated", 501)


__all__ = [
    "authenticate",
    "checked_body",
    "get_endpoints",
    "job_log",
    "job_status",
    "job_v1",
    "job_v2",
    "not_emulated",
    "parse_body",
    "post_endpoints",
    "set_priority",
    "set_status",
    "set_statuses",
    "submit",
]
