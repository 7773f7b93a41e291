"""The Blob service's routes over :class:`~.blob.BlobStore`, for both host-style and loopback path-style addresses."""

from __future__ import annotations

import uuid
from email.utils import formatdate

from .blob import (
    BlobStore,
    blob_headers,
    byte_range,
    check_authorization,
    list_xml,
    metadata_from,
    parse_block_list,
    read_range,
    storage_error,
)
from .wire import HttpError, Request, Response


class StorageService:
    def __init__(self, store: BlobStore, suffix: str, containers: set[str], loopback_base: str) -> None:
        self.store = store
        self.suffix = suffix  # e.g. "core.aml-emulator.test": hosts are <account>.blob.<suffix>
        self.containers = containers
        self.loopback_base = loopback_base.rstrip("/")

    @property
    def host(self) -> str:
        return f"{self.store.account}.blob.{self.suffix}"

    def path_style_url(self, container: str, name: str = "") -> str:
        """``https://127.0.0.1:<port>/<account>/<container>/<name>``: reachable without any proxy."""
        return f"{self.loopback_base}/{self.store.account}/{container}" + (f"/{name}" if name else "")

    def host_style_url(self, container: str, name: str = "") -> str:
        return f"https://{self.host}/{container}" + (f"/{name}" if name else "")

    def split(self, request: Request) -> tuple[str, str] | None:
        """``(container, blob name)`` when ``request`` is addressed to the storage account, else None."""
        if request.host == self.host:
            rest = request.path.lstrip("/")
        elif request.path.startswith(f"/{self.store.account}/") or request.path == f"/{self.store.account}":
            rest = request.path[len(self.store.account) + 1 :].lstrip("/")
        else:
            return None
        container, _, name = rest.partition("/")
        return container, name

    def handle(self, request: Request, container: str, name: str) -> Response:
        try:
            response = self._dispatch(request, container, name)
        except HttpError as error:
            response = error.response
        response.headers.setdefault("x-ms-request-id", str(uuid.uuid4()))
        response.headers.setdefault("x-ms-version", request.header("x-ms-version", "2021-08-06"))
        response.headers.setdefault("Date", formatdate(usegmt=True))
        return response

    def _dispatch(self, request: Request, container: str, name: str) -> Response:
        head = request.method == "HEAD"
        if container not in self.containers:
            check_authorization(request, self.store.clock, self.store.account, "r")
            return storage_error(
                404, "ContainerNotFound", "The specified container does not exist.", head=head
            )
        if request.query.get("restype") == "container" or not name:
            return self._container(request, container)
        if request.method in ("GET", "HEAD"):
            check_authorization(request, self.store.clock, self.store.account, "r")
            return self._read(request, container, name)
        if request.method == "PUT":
            check_authorization(request, self.store.clock, self.store.account, "w")
            return self._write(request, container, name)
        return storage_error(
            405, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.", head=head
        )

    def _container(self, request: Request, container: str) -> Response:
        if request.method == "GET" and request.query.get("comp") == "list":
            check_authorization(request, self.store.clock, self.store.account, "l")
            endpoint = f"https://{self.host}/"
            body = list_xml(self.store, endpoint, container, request.query)
            return Response(200, body, {"Content-Type": "application/xml"})
        if request.method == "PUT":
            check_authorization(request, self.store.clock, self.store.account, "c")
            return storage_error(409, "ContainerAlreadyExists", "The specified container already exists.")
        check_authorization(request, self.store.clock, self.store.account, "r")
        return Response(200, b"", {"x-ms-lease-status": "unlocked", "x-ms-lease-state": "available"})

    def _read(self, request: Request, container: str, name: str) -> Response:
        props = self.store.properties(container, name)
        path = self.store.path(container, name)
        if props is None or not path.is_file():
            return storage_error(
                404, "BlobNotFound", "The specified blob does not exist.", head=request.method == "HEAD"
            )
        size = path.stat().st_size
        version = request.header("x-ms-version", "2021-08-06")
        if request.method == "HEAD":
            return Response(200, b"", blob_headers(props, size, version))
        span = byte_range(request, size) if size else None
        if span is None:
            return Response(200, path.read_bytes(), blob_headers(props, size, version))
        start, end = span
        data = read_range(path, start, end)
        headers = blob_headers(props, len(data), version)
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return Response(206, data, headers)

    def _write(self, request: Request, container: str, name: str) -> Response:
        comp = request.query.get("comp")
        if comp == "metadata":
            props = self.store.set_metadata(container, name, metadata_from(request))
            if props is None:
                return storage_error(404, "BlobNotFound", "The specified blob does not exist.")
            return Response(200, b"", _written(props.etag, props.last_modified))
        if comp == "block":
            self.store.stage_block(container, name, request.query.get("blockid", ""), request.body)
            return Response(201, b"", {"x-ms-request-server-encrypted": "true"})
        if request.header("If-None-Match") == "*" and self.store.properties(container, name) is not None:
            return storage_error(409, "BlobAlreadyExists", "The specified blob already exists.")
        if comp == "blocklist":
            data = self.store.commit_blocks(container, name, parse_block_list(request.body))
            content_type = request.header("x-ms-blob-content-type")
        elif comp is None:
            if request.header("x-ms-blob-type") != "BlockBlob":
                return storage_error(
                    400,
                    "MissingRequiredHeader",
                    "An HTTP header that's mandatory for this request is not specified.",
                )
            data, content_type = (
                request.body,
                request.header("x-ms-blob-content-type") or request.header("Content-Type"),
            )
        else:
            return storage_error(
                400,
                "InvalidQueryParameterValue",
                f"Value for one of the query parameters specified in the request URI is invalid: comp={comp}",
            )
        props = self.store.put(container, name, data, content_type, metadata_from(request))
        headers = _written(props.etag, props.last_modified)
        headers["Content-MD5"] = props.content_md5 or ""
        return Response(201, b"", headers)


def _written(etag: str, last_modified: float) -> dict[str, str]:
    return {
        "ETag": etag,
        "Last-Modified": formatdate(last_modified, usegmt=True),
        "x-ms-request-server-encrypted": "true",
    }
