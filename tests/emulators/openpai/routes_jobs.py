"""``/api/v2/jobs``: ``routes/v2/job.js`` with its middlewares in their order (token, limiter, Joi, controller)."""

from __future__ import annotations

import math
from typing import Any

from . import joi, views
from .app import Context
from .errors import PaiError, bad_request, forbidden, no_job, not_found, unknown
from .jscompat import dumps, load_yaml, parse_int, string, to_number
from .model import Framework
from .protocol import submit as submit_protocol
from .web import Request, Response, Router

ORDER_FIELDS = {
    "jobName": lambda fw: fw.job_name,
    "submissionTime": lambda fw: fw.submission_time,
    "username": lambda fw: fw.user,
    "vc": lambda fw: fw.virtual_cluster,
    "retries": lambda fw: fw.total_retried,
    "totalTaskNumber": lambda fw: fw.total_tasks(),
    "totalGpuNumber": lambda fw: fw.total_gpu(),
    "state": lambda fw: views.summary(fw)["state"],
    "completionTime": lambda fw: fw.completion_time,
    "jobPriority": lambda fw: None,
}


def register(router: Router, ctx: Context) -> None:
    jobs = JobRoutes(ctx)
    base = "/api/v2/jobs"
    router.add("GET", base, jobs.list_jobs)
    router.add("POST", base, jobs.submit)
    router.add("GET", f"{base}/:fw", jobs.detail)
    router.add("GET", f"{base}/:fw/attempts/:attempt", jobs.detail)
    router.add("GET", f"{base}/:fw/attempts/:attempt/taskRoles/:role/taskIndex/:index/attempts", jobs.task)
    router.add(
        "GET", f"{base}/:fw/attempts/:attempt/taskRoles/:role/taskIndex/:index/attempts/:task/logs", jobs.logs
    )
    router.add("PUT", f"{base}/:fw/executionType", jobs.execute)
    router.add("GET", f"{base}/:fw/config", jobs.config)
    router.add("GET", f"{base}/:fw/ssh", jobs.ssh)
    router.add("PUT", f"{base}/:fw/tag", jobs.add_tag)
    router.add("DELETE", f"{base}/:fw/tag", jobs.delete_tag)
    router.add("GET", f"{base}/:fw/events", jobs.events)


class JobRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def _find(self, name: str, get: bool = True) -> Framework:
        """A job by ``user~job``; a job hidden by the 404-after-create fault is not found yet."""
        cluster = self.ctx.cluster
        with cluster.lock:
            fw = cluster.find(name)
            if get and fw.hidden_gets > 0:
                fw.hidden_gets -= 1
                raise no_job(name)
            return fw

    def list_jobs(self, request: Request) -> Response:
        user = self.ctx.authenticate(request)
        headers = self.ctx.limit(self.ctx.list_limiter, user.username)
        query = request.query
        limits = self.ctx.config.limits
        limit = parse_int(query["limit"]) if "limit" in query else limits.list_default
        if limit > limits.list_max:
            raise bad_request("InvalidParametersError", f"Limit exceeds max number {limits.list_max}.")
        offset = parse_int(query.get("offset")) if "offset" in query else 0
        with self.ctx.cluster.lock:
            rows = [
                fw
                for fw in self.ctx.cluster.frameworks.values()
                if fw.hidden_gets == 0 and _matches(fw, query)
            ]
            rows = _ordered(rows, query.get("order"))
            total = len(rows)
            start = 0 if math.isnan(offset) else max(int(offset), 0)
            rows = rows[start:] if math.isnan(limit) else rows[start : start + max(int(limit), 0)]
            data = [views.summary(fw) for fw in rows]
            for fw in rows:
                self.ctx.cluster.mark_seen(fw)
        body: Any = {"totalCount": total, "data": data} if query.get("withTotalCount") == "true" else data
        return Response.json(body).with_headers(headers)

    def submit(self, request: Request) -> Response:
        principal = self.ctx.authenticate(request)
        headers = self.ctx.limit(self.ctx.submit_limiter, principal.username)
        text = request.body if isinstance(request.body, str) else string(request.body)
        protocol = submit_protocol(text)
        user = self.ctx.config.user(principal.username)
        assert user is not None
        fw = self.ctx.cluster.submit(user, protocol)
        fw.hidden_gets = self.ctx.faults.hidden_gets_for_new_job()
        message = f"Update job {protocol.name} for user {user.name} successfully."
        return Response.json({"status": 202, "message": message}, 202).with_headers(headers)

    def detail(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        attempt = to_number(request.params["attempt"]) if "attempt" in request.params else None
        with self.ctx.cluster.lock:
            fw = self._find(request.params["fw"])
            body = views.detail(fw, self.ctx.config, attempt)
            self.ctx.cluster.mark_seen(fw)
        return Response.json(body)

    def task(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        params = request.params
        with self.ctx.cluster.lock:
            fw = self._find(params["fw"], get=False)
            attempt, task = views.find_task(
                fw, params["fw"], to_number(params["attempt"]), params["role"], to_number(params["index"])
            )
            body = views.task_detail(fw, attempt, task, self.ctx.config)
        return Response.json(body)

    def logs(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        try:
            locations = self._log_locations(request)
        except PaiError as error:  # the controller hides every other error behind a 500
            if error.code == "NoTaskLogError":
                raise
            raise unknown("Failed to get log list") from error
        return Response.json({"locations": locations})

    def _log_locations(self, request: Request) -> list[dict[str, str]]:
        params = request.params
        no_log = not_found("NoTaskLogError", "Log of task is not found.")
        with self.ctx.cluster.lock:
            fw = self._find(params["fw"], get=False)
            _, task = views.find_task(
                fw, params["fw"], to_number(params["attempt"]), params["role"], to_number(params["index"])
            )
            wanted = to_number(params["task"])
            pods = [task.attempt, *(pod for _, pod in task.history)]
            pod = next((p for p in pods if p.id == wanted), None)
        if pod is None or not pod.pod_host_ip or not pod.pod_uid:
            raise no_log
        directory = self.ctx.cluster.kubelet.pod_dir(fw.user, fw.debug_id, task.role, pod.pod_uid)
        if not directory.is_dir():
            raise no_log
        token = self.ctx.issue_log_token()
        node = f"/log-manager/{pod.pod_host_ip}:{self.ctx.config.log_manager_port}"
        query = f"?username={fw.user}&framework-name={fw.debug_id}&pod-uid={pod.pod_uid}&taskrole={task.role}&token={token}"
        suffix = "&tail-mode=true" if request.query.get("tail-mode") == "true" else ""
        names = {
            "runtime.log": "runtime.log",
            "user-all": "all",
            "user-stderr": "stderr",
            "user-stdout": "stdout",
        }
        return [
            {"name": key, "uri": f"{node}/api/v1/logs/{entry}{query}{suffix}"}
            for entry, key in names.items()
            if (directory / entry).exists()
        ]

    def execute(self, request: Request) -> Response:
        user = self.ctx.authenticate(request)
        body = joi.validate(request.body, joi.EXECUTION_TYPE)
        name = request.params["fw"]
        fw = self._find(name, get=False)
        if fw.user != user.username and not user.admin:
            raise forbidden(f"User {user.username} is not allowed to execute job {name}.")
        self.ctx.cluster.execute(fw, body["value"])
        return Response.json({"status": 202, "message": f"Execute job {name} successfully."}, 202)

    def config(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        fw = self._find(request.params["fw"])
        try:
            config = load_yaml(fw.config_text)
        except Exception as error:
            raise unknown(str(error)) from error
        return Response(200, dumps(config).encode(), "text/yaml; charset=utf-8")

    def ssh(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        name = request.params["fw"]
        raise not_found("NoJobSshInfoError", f"SSH info of job {name} is not found.")

    def _tag_target(self, request: Request, verb: str) -> tuple[Framework, str]:
        user = self.ctx.authenticate(request)
        body = joi.validate(request.body, joi.TAG)
        name = request.params["fw"]
        if name.split("~")[0] != user.username and not user.admin:
            preposition = "to" if verb == "add" else "from"
            raise forbidden(f"User {user.username} is not allowed to {verb} tag {preposition} job {name}.")
        return self._find(name, get=False), body["value"]

    def add_tag(self, request: Request) -> Response:
        fw, tag = self._tag_target(request, "add")
        name = request.params["fw"]
        with self.ctx.cluster.lock:
            if tag not in fw.tags:
                fw.tags.append(tag)
        return Response.json({"status": 200, "message": f"Add tag {tag} for job {name} successfully."})

    def delete_tag(self, request: Request) -> Response:
        fw, tag = self._tag_target(request, "delete")
        name = request.params["fw"]
        with self.ctx.cluster.lock:
            if tag not in fw.tags:
                raise not_found("NoTagError", f"Tag {tag} is not found for job {name}.")
            fw.tags.remove(tag)
        return Response.json({"status": 200, "message": f"Delete tag {tag} from job {name} successfully."})

    def events(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        self._find(request.params["fw"], get=False)
        return Response.json({"totalCount": 0, "data": []})


def _split(query: dict[str, str], key: str) -> list[str] | None:
    return query[key].split(",") if key in query else None


def _matches(fw: Framework, query: dict[str, str]) -> bool:
    checks = (
        ("username", fw.user),
        ("vc", fw.virtual_cluster),
        ("state", views.summary(fw)["state"]),
    )
    for key, value in checks:
        allowed = _split(query, key)
        if allowed is not None and value not in allowed:
            return False
    keyword = query.get("keyword")
    if keyword is not None and not any(keyword in v for v in (fw.user, fw.job_name, fw.virtual_cluster)):
        return False
    contain, exclude = _split(query, "tagsContain"), _split(query, "tagsNotContain")
    if contain is not None and not set(contain) & set(fw.tags):
        return False
    return not (exclude is not None and set(exclude) & set(fw.tags))


def _ordered(rows: list[Framework], order: str | None) -> list[Framework]:
    field, _, direction = (order or "").partition(",")
    if field not in ORDER_FIELDS or direction not in ("ASC", "DESC"):
        field, direction = "submissionTime", "DESC"
    key = ORDER_FIELDS[field]
    indexed = list(enumerate(rows))
    present = [(i, fw) for i, fw in indexed if key(fw) is not None]
    missing = [(i, fw) for i, fw in indexed if key(fw) is None]  # NULLS LAST for ASC, FIRST for DESC
    present.sort(key=lambda pair: (key(pair[1]), pair[0]), reverse=direction == "DESC")
    ordered = present + missing if direction == "ASC" else missing + present
    return [fw for _, fw in ordered]


__all__ = ["JobRoutes", "register"]
