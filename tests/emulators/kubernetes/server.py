"""The HTTP front of the emulated API server: authentication, faults, routing, JSON and streamed answers.

HTTP/1.1 with keep-alive (the official client pools connections). Watches and followed logs are sent with
chunked transfer encoding, one event (or log chunk) per chunk; a dropped watch is cut without the final
chunk, which clients see as a broken connection. Everything except ``/_emu/...`` needs the bearer token.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from . import discovery, routes
from . import errors as err
from .apiserver import DeleteOptions
from .watch import WatchDropped, WatchHandle, WatchRequest, stream

if TYPE_CHECKING:
    from .cluster import KubernetesEmulator as Cluster

log = logging.getLogger(__name__)
TRUE = ("true", "True", "1")


class Query:
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs
        self.values = dict(pairs)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values.get(name, default)

    def flag(self, name: str) -> bool:
        return self.values.get(name) in TRUE

    def number(self, name: str) -> int | None:
        value = self.values.get(name)
        if value in (None, ""):
            return None
        try:
            return int(value)
        except ValueError:
            raise err.bad_request(f'invalid value for {name}: "{value}"') from None


class EmulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cluster: Cluster) -> None:
        self.cluster = cluster
        self.watches: set[WatchHandle] = set()
        self.watch_lock = threading.Lock()
        super().__init__(address, Handler)

    def drop_watches(self) -> int:
        with self.watch_lock:
            for handle in self.watches:
                handle.dropped = True
            count = len(self.watches)
        self.cluster.store.notify()
        return count

    def stop_watches(self) -> None:
        with self.watch_lock:
            for handle in self.watches:
                handle.stopped = True
        self.cluster.store.notify()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EmulatorHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # ---- plumbing ------------------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = Query(parse_qsl(url.query, keep_blank_values=True))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        cluster = self.server.cluster
        self.record = cluster.requests.record(method, url.path, query.pairs, dict(self.headers.items()), raw)
        try:
            if url.path.startswith("/_emu/"):
                code, body = cluster.control(method, url.path, query.values, _json(raw))
                self._send_json(code, body)
                return
            self._authenticate()
            failure = cluster.faults.take_failure(method, url.path)
            if failure is not None:
                self._send_json(failure[0].code, failure[0].status, failure[1])
                return
            self._route(method, url.path, query, raw)
        except err.ApiError as error:
            self._send_json(error.code, error.status)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as error:  # a bug in the emulator: answered as the apiserver answers a panic
            log.exception("emulator error on %s %s", method, self.path)
            cluster.server_errors.append(f"{method} {self.path}: {error!r}")
            self._send_json(500, err.internal(repr(error)).status)

    def _authenticate(self) -> None:
        header = self.headers.get("Authorization") or ""
        token = self.server.cluster.token
        if token is not None and header != f"Bearer {token}":
            raise err.unauthorized()

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        self.record.status = code
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, code: int, data: bytes) -> None:
        self.record.status = code
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_chunks(self, content_type: str, chunks: Iterator[bytes]) -> None:
        self.record.status = 200
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for chunk in chunks:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
        except WatchDropped:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # ---- routing -------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: Query, raw: bytes) -> None:
        cluster = self.server.cluster
        path = path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            self._send_text(200, b"ok")
            return
        if path == "/version":
            self._send_json(200, discovery.VERSION)
            return
        target = routes.parse(path)
        if target is None:
            raise err.no_such_resource()
        if isinstance(target, routes.DiscoveryPath):
            self._send_json(200, self._discovery(target))
            return
        rt = cluster.registry.find(target.group, target.version, target.plural)
        if rt is None or (target.namespace is not None and not rt.namespaced):
            raise err.no_such_resource()
        if target.name is None and target.subresource is None and not rt.namespaced and target.namespace:
            raise err.no_such_resource()
        self._check_rbac(method, rt, target, query)
        if target.subresource == "log" and rt.key == ("", "pods"):
            self._pod_log(target, query)
            return
        if target.subresource not in (None, "status") or (
            target.subresource == "status" and not rt.status_subresource
        ):
            raise err.no_such_resource()
        if target.name is None:
            self._collection(method, rt, target, query, raw)
        else:
            self._item(method, rt, target, query, raw)

    def _discovery(self, target: routes.DiscoveryPath) -> dict[str, Any]:
        cluster = self.server.cluster
        if target.core and target.version is None:
            return discovery.core_versions(f"127.0.0.1:{self.server.server_address[1]}")
        if target.group is None:
            return discovery.group_list(cluster.registry)
        if target.version is None:
            document = discovery.group(cluster.registry, target.group)
        else:
            document = discovery.resource_list(cluster.registry, target.group, target.version)
        if document is None:
            raise err.no_such_resource()
        return document

    def _check_rbac(self, method: str, rt: Any, target: routes.ResourcePath, query: Query) -> None:
        if target.name is None:
            verb = {
                "GET": "watch" if query.flag("watch") else "list",
                "POST": "create",
                "DELETE": "deletecollection",
            }.get(method, method.lower())
        else:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
                method, method.lower()
            )
        plural = f"{rt.plural}/{target.subresource}" if target.subresource else rt.plural
        if self.server.cluster.faults.denied(verb, plural, rt.group, target.namespace):
            raise err.rbac_denied(
                self.server.cluster.user, verb, plural, rt.group, target.namespace or "", target.name or ""
            )

    def _collection(
        self, method: str, rt: Any, target: routes.ResourcePath, query: Query, raw: bytes
    ) -> None:
        api = self.server.cluster.api
        if method == "GET" and query.flag("watch"):
            self._watch(rt, target, query)
        elif method == "GET":
            body = api.list(
                rt,
                target.namespace,
                query.get("labelSelector", "") or "",
                query.get("fieldSelector", "") or "",
                query.number("limit"),
                query.get("continue"),
            )
            self._send_json(200, body)
        elif method == "POST":
            created = api.create(
                rt, target.namespace or "", _decode(raw, self.headers), dry_run=bool(query.get("dryRun"))
            )
            meta = created["metadata"]
            self.server.cluster.faults.created(_item_path(rt, meta.get("namespace"), meta["name"]))
            self._send_json(201, created)
        elif method == "DELETE":
            options = _delete_options(query, raw, self.headers)
            body = api.delete_collection(
                rt,
                target.namespace,
                query.get("labelSelector", "") or "",
                query.get("fieldSelector", "") or "",
                options,
            )
            self._send_json(200, body)
        else:
            raise err.method_not_allowed()

    def _item(self, method: str, rt: Any, target: routes.ResourcePath, query: Query, raw: bytes) -> None:
        api = self.server.cluster.api
        namespace, name = target.namespace or "", target.name or ""
        dry_run = bool(query.get("dryRun"))
        if method == "GET":
            if self.server.cluster.faults.hidden(_item_path(rt, target.namespace, name)):
                raise err.not_found(rt.plural, rt.group, name)
            self._send_json(200, api.get(rt, namespace, name))
        elif method == "PUT":
            body = api.update(
                rt,
                namespace,
                name,
                _decode(raw, self.headers),
                subresource=target.subresource,
                dry_run=dry_run,
            )
            self._send_json(200, body)
        elif method == "PATCH":
            content_type = self.headers.get("Content-Type") or "application/json"
            body = api.patch(
                rt,
                namespace,
                name,
                content_type,
                _decode(raw, self.headers, patch=True),
                subresource=target.subresource,
                dry_run=dry_run,
            )
            self._send_json(200, body)
        elif method == "DELETE" and target.subresource is None:
            code, body = api.delete(rt, namespace, name, _delete_options(query, raw, self.headers))
            self._send_json(code, body)
        else:
            raise err.method_not_allowed()

    def _watch(self, rt: Any, target: routes.ResourcePath, query: Query) -> None:
        from .query_selectors import parse_fields, parse_labels

        cluster = self.server.cluster
        version = query.get("resourceVersion")
        request = WatchRequest(
            rt,
            target.namespace,
            parse_labels(query.get("labelSelector")),
            parse_fields(query.get("fieldSelector"), rt.fields),
            version,
            timeout=float(query.number("timeoutSeconds") or cluster.watch_timeout),
            bookmarks=query.flag("allowWatchBookmarks"),
            send_initial=query.flag("sendInitialEvents"),
            bookmark_interval=cluster.bookmark_interval,
            expire=version not in (None, "", "0") and cluster.faults.take_expire(rt.plural),
        )
        handle = WatchHandle(drop_after=cluster.faults.take_drop())
        events = stream(request, cluster.store, handle)
        with self.server.watch_lock:
            self.server.watches.add(handle)
        try:
            self._send_chunks("application/json", _lines(events))
        finally:
            with self.server.watch_lock:
                self.server.watches.discard(handle)

    def _pod_log(self, target: routes.ResourcePath, query: Query) -> None:
        kubelet = self.server.cluster.kubelet
        options = {
            "container": query.get("container"),
            "previous": query.flag("previous"),
            "tail_lines": query.number("tailLines"),
            "since_seconds": query.number("sinceSeconds"),
            "limit_bytes": query.number("limitBytes"),
            "timestamps": query.flag("timestamps"),
        }
        if query.flag("follow"):
            chunks = kubelet.follow_log(target.namespace or "", target.name or "", **options)
            self._send_chunks("text/plain", chunks)
        else:
            self._send_text(200, kubelet.read_log(target.namespace or "", target.name or "", **options))


def _lines(events: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for event in events:
        yield json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _item_path(rt: Any, namespace: str | None, name: str) -> str:
    prefix = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    middle = f"/namespaces/{namespace}" if namespace else ""
    return f"{prefix}{middle}/{rt.plural}/{name}"


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise err.bad_request("the body is not JSON") from None


def _decode(raw: bytes, headers: Any, *, patch: bool = False) -> Any:
    content_type = (headers.get("Content-Type") or "application/json").split(";")[0].strip()
    if "protobuf" in content_type:
        raise err.unsupported_media_type(content_type, ["application/json", "application/yaml"])
    try:
        if content_type.endswith("yaml"):
            return yaml.safe_load(raw.decode())
        return json.loads(raw or b"null")
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as error:
        message = f"couldn't get version/kind; json parse error: {error}"
        raise err.bad_request(message if not patch else f"error decoding patch: {error}") from None


def _delete_options(query: Query, raw: bytes, headers: Any) -> DeleteOptions:
    body = _decode(raw, headers) if raw else None
    body = body if isinstance(body, dict) else {}
    policy = query.get("propagationPolicy") or body.get("propagationPolicy")
    orphan = query.get("orphanDependents") or body.get("orphanDependents")
    if policy is None and orphan is not None:
        policy = "Orphan" if str(orphan) in TRUE else "Background"
    if policy not in (None, "Foreground", "Background", "Orphan"):
        raise err.bad_request(
            f'propagationPolicy: Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"'
        )
    grace = query.number("gracePeriodSeconds")
    if grace is None and body.get("gracePeriodSeconds") is not None:
        grace = int(body["gracePeriodSeconds"])
    preconditions = body.get("preconditions") or {}
    return DeleteOptions(
        policy,
        grace,
        preconditions.get("uid"),
        preconditions.get("resourceVersion"),
        bool(query.get("dryRun") or body.get("dryRun")),
    )
