"""The rest of the v2 API a client meets (info, login, tokens, storages, virtual clusters) and the log manager.

Virtual clusters are reported the way the rest server does with hived: ``capacity``/``usedCapacity`` as the
VC's share of the cluster's GPUs (only when the cluster has GPUs), and ``resourcesUsed/Guaranteed/Total`` with
``vCores``/``GPUs`` copies; ``default`` always appears.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import joi
from .app import Context
from .capacity import Resources
from .errors import bad_request, forbidden, not_found
from .jscompat import UNDEFINED
from .web import Request, Response, Router

TAIL_BYTES = 16 * 1024


def register(router: Router, pylon: Router, ctx: Context) -> None:
    routes = ClusterRoutes(ctx)
    for method in ("GET", "POST", "PUT", "DELETE"):
        router.add(method, "/api/v2", routes.index)
        router.add(method, "/api/v2/info", routes.info)
    router.add("GET", "/api/v2/authn/info", routes.authn_info)
    router.add("POST", "/api/v2/authn/basic/login", routes.login)
    router.add("DELETE", "/api/v2/authn/basic/logout", routes.logout)
    router.add("GET", "/api/v2/tokens", routes.list_tokens)
    router.add("POST", "/api/v2/tokens", routes.login)
    router.add("POST", "/api/v2/tokens/application", routes.application_token)
    router.add("DELETE", "/api/v2/tokens/:token", routes.revoke)
    router.add("GET", "/api/v2/storages", routes.storages)
    router.add("GET", "/api/v2/storages/:name", routes.storage)
    router.add("GET", "/api/v2/virtual-clusters", routes.virtual_clusters)
    router.add("GET", "/api/v2/virtual-clusters/:name", routes.virtual_cluster)
    pylon.add("GET", "/log-manager/:node/api/v1/logs/:name", routes.log_content)


class ClusterRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def index(self, request: Request) -> Response:
        return Response.text("PAI RESTful API v2 (beta version)", content_type="text/plain; charset=utf-8")

    def info(self, request: Request) -> Response:
        config = self.ctx.config
        return Response.json(
            {
                "name": "PAI RESTful API",
                "version": config.version,
                "launcherType": "k8s",
                "authnMethod": "basic",
            }
        )

    def authn_info(self, request: Request) -> Response:
        body = {"authn_type": "basic", "loginURI": "/api/v1/authn/basic/login", "loginURIMethod": "post"}
        return Response.json(body)

    def login(self, request: Request) -> Response:
        body = joi.validate(request.body, joi.TOKEN_POST)
        user, token = self.ctx.tokens.login(body["username"], body["password"])
        return Response.json(
            {"user": user.name, "token": token, "admin": user.admin, "hasGitHubPAT": UNDEFINED}
        )

    def _not_application(self, request: Request) -> str:
        user = self.ctx.authenticate(request)
        if user.application:
            raise forbidden("Applications are not allowed to do this operation.")
        return user.username

    def logout(self, request: Request) -> Response:
        self._not_application(request)
        token = (request.headers.get("Authorization") or "").split(" ")[-1]
        self.ctx.tokens.expire(token=token)
        return Response.json({"message": "Logout successfully"})

    def list_tokens(self, request: Request) -> Response:
        return Response.json({"tokens": self.ctx.tokens.listed(self._not_application(request))})

    def application_token(self, request: Request) -> Response:
        token = self.ctx.tokens.issue(self._not_application(request), application=True)
        return Response.json({"token": token, "application": True})

    def revoke(self, request: Request) -> Response:
        username = self._not_application(request)
        token = request.params["token"]
        record = self.ctx.tokens.records.get(token)
        if record is None or record.user != username:
            raise forbidden(f"User {username} is not allowed to do this operation.")
        self.ctx.tokens.expire(token=token)
        return Response.json({"message": "revoke successfully"})

    def storages(self, request: Request) -> Response:
        username = self.ctx.authenticate(request).username
        config = self.ctx.config
        user = config.user(username)
        assert user is not None
        defaults_only = request.query.get("default") == "true"
        defaults = {s.name for s in config.user_storages(user, True)}
        listed = config.user_storages(user, defaults_only)
        rows = [
            {"name": s.name, "share": s.share, "volumeName": f"{s.name}-pv", "default": s.name in defaults}
            for s in listed
        ]
        return Response.json({"storages": rows})

    def storage(self, request: Request) -> Response:
        username = self.ctx.authenticate(request).username
        name = request.params["name"]
        config = self.ctx.config
        storage = config.storage(name)
        if storage is None:
            raise not_found("NoStorageError", f"Storage {name} is not found.")
        user = config.user(username)
        assert user is not None
        if storage not in config.user_storages(user):
            raise forbidden(f"User {username} is not allowed to access {name}.")
        return Response.json(
            {"name": name, "share": storage.share, "volumeName": f"{name}-pv", **storage.detail()}
        )

    def _vc_infos(self) -> dict[str, dict[str, Any]]:
        quota = self.ctx.cluster.quota
        names = ["default", *(vc.name for vc in self.ctx.config.virtual_clusters if vc.name != "default")]
        infos: dict[str, dict[str, Any]] = {}
        for name in names:
            total = quota.total.get(name, Resources())
            infos[name] = {
                "capacity": 0,
                "usedCapacity": 0,
                "dedicated": False,
                "resourcesUsed": _resources(quota.used_by(name)),
                "resourcesGuaranteed": _resources(total),
                "resourcesTotal": _resources(total),
            }
        gpus = sum(info["resourcesTotal"]["gpu"] for info in infos.values())
        if gpus > 0:
            for info in infos.values():
                info["capacity"] = info["resourcesTotal"]["gpu"] / gpus * 100
                info["maxCapacity"] = info["capacity"]
                info["usedCapacity"] = info["resourcesUsed"]["gpu"] / gpus * 100
        return infos

    def virtual_clusters(self, request: Request) -> Response:
        self.ctx.authenticate(request)
        return Response.json(self._vc_infos())

    def virtual_cluster(self, request: Request) -> Response:
        name = request.params["name"]
        if not re.fullmatch(r"[A-Za-z0-9_]+", name):  # router.param runs before the route's token check
            raise bad_request(
                "InvalidParametersError",
                "VC name should only contain alpha-numeric and underscore characters",
            )
        self.ctx.authenticate(request)
        infos = self._vc_infos()
        if name not in infos:
            raise not_found("NoVirtualClusterError", f"Vc {name} not found")
        return Response.json(infos[name])

    def log_content(self, request: Request) -> Response:
        """The log manager's ``/api/v1/logs/<name>``: 403 without its token, full text or (tail mode) 16 KiB."""
        query = request.query
        if not self.ctx.log_token_valid(query.get("token")):
            return Response(403, b"", "text/html")
        keys = ("username", "framework-name", "taskrole", "pod-uid")
        if any(not re.fullmatch(r"[\w.~-]+", query.get(key, "")) for key in keys):
            return Response(400, b"", "text/html")
        name = request.params["name"]
        directory = self.ctx.cluster.kubelet.pod_dir(*(query[key] for key in keys))
        path = directory / name / "current" if name.startswith("user-") else directory / name
        if ".." in Path(name).parts or not path.is_file():
            return Response(404, b"", "text/html")
        content = path.read_bytes()
        disposition = f'attachment; filename="{name}.log"' if name.startswith("user-") else "attachment"
        headers = {
            "Content-Disposition": disposition,
            "Accept-Ranges": "bytes",
            "Access-Control-Allow-Origin": "*",
        }
        if query.get("tail-mode") == "true" and content:
            start = max(0, len(content) - TAIL_BYTES)
            headers["Content-Range"] = f"bytes {start}-{len(content) - 1}/{len(content)}"
            return Response(206, content[start:], "text/plain", headers)
        return Response(200, content, "text/plain", headers)


def _resources(amount: Resources) -> dict[str, int]:
    return {
        "cpu": amount.cpu,
        "memory": amount.memory,
        "gpu": amount.gpu,
        "vCores": amount.cpu,
        "GPUs": amount.gpu,
    }


__all__ = ["ClusterRoutes", "register"]
