"""Azure Blob Storage, the subset the SDK uses: Put Blob, Put Block / Put Block List, Set Blob Metadata, Get Blob
Properties (HEAD), Get Blob (with ranges) and List Blobs, authorised by SAS or Shared Key.

Blobs live as files under ``<root>/<account>/<container>/<blob name>``, so a test can look at what was uploaded and
a job can run the uploaded snapshot. Both addressing styles of the real service are accepted: the account in the host
(``https://<account>.blob.<suffix>/<container>/<blob>``, reached through the emulator's CONNECT proxy) and the
account as the first path segment on a loopback address, which is how Azurite is addressed and what the SDK's
storage client recognises for ``127.0.0.1``.

Shared Key and SAS signatures are checked for shape, expiry (on the emulator's clock) and permissions, not
recomputed: the string-to-sign changes with every storage service version and is the SDK's business, not the
emulator's; the emulator is not a storage security test.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from urllib.parse import quote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from .clock import Clock
from .wire import HttpError, Request, Response

SAS_VERSION = "2021-08-06"


@dataclass
class BlobProperties:
    etag: str
    last_modified: float
    created: float
    content_type: str
    content_md5: str | None
    metadata: dict[str, str] = field(default_factory=dict)


def storage_error(status: int, code: str, message: str, *, head: bool = False) -> Response:
    """Storage's XML error (HEAD answers carry only the ``x-ms-error-code`` header, as the service's do)."""
    text = f"{message}\nRequestId:{uuid.uuid4()}\nTime:{time.strftime('%Y-%m-%dT%H:%M:%S.0000000Z', time.gmtime())}"
    body = (
        b""
        if head
        else (
            f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{escape(text)}</Message></Error>'
        ).encode()
    )
    return Response(status, body, {"Content-Type": "application/xml", "x-ms-error-code": code})


def _http_date(seconds: float) -> str:
    return formatdate(seconds, usegmt=True)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _parse_iso(text: str) -> float:
    for pattern in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(text, pattern)))
        except ValueError:
            continue
    raise ValueError(text)


class BlobStore:
    """The files and properties of one storage account's blobs."""

    def __init__(self, root: Path, account: str, clock: Clock) -> None:
        self.root = root
        self.account = account
        self.key = base64.b64encode(secrets.token_bytes(64)).decode()  # what listSecrets hands out
        self.clock = clock
        self._properties: dict[tuple[str, str], BlobProperties] = {}
        self._blocks: dict[tuple[str, str], dict[str, bytes]] = {}
        self._lock = threading.RLock()

    def path(self, container: str, name: str) -> Path:
        target = (self.root / self.account / container / name).resolve()
        if not target.is_relative_to((self.root / self.account / container).resolve()):
            raise HttpError(
                storage_error(
                    400, "InvalidResourceName", "The specifed resource name contains invalid characters."
                )
            )
        return target

    def properties(self, container: str, name: str) -> BlobProperties | None:
        with self._lock:
            return self._properties.get((container, name))

    def put(
        self, container: str, name: str, data: bytes, content_type: str, metadata: dict[str, str]
    ) -> BlobProperties:
        target = self.path(container, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
        temporary.write_bytes(data)
        temporary.replace(target)  # readers never see half a blob
        now = self.clock.now()
        with self._lock:
            previous = self._properties.get((container, name))
            props = BlobProperties(
                etag=f'"0x{secrets.token_hex(8).upper()}"',
                last_modified=now,
                created=previous.created if previous else now,
                content_type=content_type or "application/octet-stream",
                content_md5=base64.b64encode(hashlib.md5(data).digest()).decode(),
                metadata=metadata,
            )
            self._properties[(container, name)] = props
            self._blocks.pop((container, name), None)
            return props

    def append_text(self, container: str, name: str, data: bytes) -> None:
        """Append to a blob the emulator itself writes (a job's log); readers see it grow, as with append blobs."""
        target = self.path(container, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "ab") as handle:
            handle.write(data)
        self.touch(container, name, "text/plain; charset=utf-8")

    def touch(self, container: str, name: str, content_type: str) -> None:
        now = self.clock.now()
        with self._lock:
            props = self._properties.get((container, name))
            if props is None:
                self._properties[(container, name)] = BlobProperties(
                    f'"0x{secrets.token_hex(8).upper()}"', now, now, content_type, None
                )
            else:
                props.etag, props.last_modified, props.content_md5 = (
                    f'"0x{secrets.token_hex(8).upper()}"',
                    now,
                    None,
                )

    def set_metadata(self, container: str, name: str, metadata: dict[str, str]) -> BlobProperties | None:
        with self._lock:
            props = self._properties.get((container, name))
            if props is not None:
                props.metadata = metadata
                props.etag = f'"0x{secrets.token_hex(8).upper()}"'
                props.last_modified = self.clock.now()
            return props

    def stage_block(self, container: str, name: str, block_id: str, data: bytes) -> None:
        with self._lock:
            self._blocks.setdefault((container, name), {})[block_id] = data

    def commit_blocks(self, container: str, name: str, block_ids: list[str]) -> bytes:
        with self._lock:
            staged = self._blocks.get((container, name), {})
            missing = [block for block in block_ids if block not in staged]
            if missing:
                raise HttpError(
                    storage_error(400, "InvalidBlockList", "The specified block list is invalid.")
                )
            return b"".join(staged[block] for block in block_ids)

    def names(self, container: str, prefix: str) -> list[str]:
        with self._lock:
            return sorted(
                name for (c, name) in self._properties if c == container and name.startswith(prefix)
            )


def parse_block_list(body: bytes) -> list[str]:
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as error:
        raise HttpError(
            storage_error(400, "InvalidXmlDocument", "XML specified is not syntactically valid.")
        ) from error
    return [element.text or "" for element in root if element.tag in ("Latest", "Committed", "Uncommitted")]


def metadata_from(request: Request) -> dict[str, str]:
    return {
        key[len("x-ms-meta-") :]: str(value)
        for key, value in request.headers.items()
        if key.lower().startswith("x-ms-meta-")
    }


def blob_headers(props: BlobProperties, size: int, version: str) -> dict[str, str]:
    headers = {
        "Content-Type": props.content_type,
        "ETag": props.etag,
        "Last-Modified": _http_date(props.last_modified),
        "x-ms-creation-time": _http_date(props.created),
        "x-ms-blob-type": "BlockBlob",
        "x-ms-lease-status": "unlocked",
        "x-ms-lease-state": "available",
        "x-ms-server-encrypted": "true",
        "x-ms-access-tier": "Hot",
        "x-ms-access-tier-inferred": "true",
        "Accept-Ranges": "bytes",
        "x-ms-version": version,
        "Content-Length": str(size),
    }
    if props.content_md5:
        headers["Content-MD5"] = props.content_md5
    headers.update({f"x-ms-meta-{key}": value for key, value in props.metadata.items()})
    return headers


def list_xml(store: BlobStore, service_endpoint: str, container: str, query: dict[str, str]) -> bytes:
    prefix = query.get("prefix", "")
    delimiter = query.get("delimiter", "")
    include_metadata = "metadata" in query.get("include", "").split(",")
    items: list[str] = []
    seen_prefixes: set[str] = set()
    for name in store.names(container, prefix):
        rest = name[len(prefix) :]
        if delimiter and delimiter in rest:
            folder = prefix + rest.split(delimiter, 1)[0] + delimiter
            if folder not in seen_prefixes:
                seen_prefixes.add(folder)
                items.append(f"<BlobPrefix><Name>{escape(folder)}</Name></BlobPrefix>")
            continue
        props = store.properties(container, name)
        if props is None:
            continue
        size = store.path(container, name).stat().st_size
        metadata = (
            "".join(f"<{k}>{escape(v)}</{k}>" for k, v in props.metadata.items()) if include_metadata else ""
        )
        items.append(
            f"<Blob><Name>{escape(name)}</Name><Properties>"
            f"<Creation-Time>{_http_date(props.created)}</Creation-Time>"
            f"<Last-Modified>{_http_date(props.last_modified)}</Last-Modified><Etag>{escape(props.etag)}</Etag>"
            f"<Content-Length>{size}</Content-Length><Content-Type>{escape(props.content_type)}</Content-Type>"
            f"<Content-MD5>{props.content_md5 or ''}</Content-MD5><BlobType>BlockBlob</BlobType>"
            f"<AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred>"
            f"<LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState>"
            f"<ServerEncrypted>true</ServerEncrypted></Properties>"
            + (f"<Metadata>{metadata}</Metadata>" if include_metadata else "")
            + "</Blob>"
        )
    return (
        f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="{escape(service_endpoint)}" '
        f'ContainerName="{escape(container)}"><Prefix>{escape(prefix)}</Prefix>'
        + (f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "")
        + f"<Blobs>{''.join(items)}</Blobs><NextMarker /></EnumerationResults>"
    ).encode()


def container_sas(clock: Clock, *, permissions: str, lifetime: float) -> str:
    """A container SAS query string. Its ``sig`` is random: the emulator checks shape, expiry and permissions only."""
    expiry = _iso(clock.now() + lifetime)
    signature = quote(base64.b64encode(secrets.token_bytes(32)).decode(), safe="")
    return f"skoid={uuid.uuid4()}&sv={SAS_VERSION}&st={_iso(clock.now() - 300)}&se={expiry}&sr=c&sp={permissions}&sig={signature}"


def check_authorization(request: Request, clock: Clock, account: str, needed: str) -> None:
    """Shared Key (``SharedKey <account>:<signature>``) or a SAS granting ``needed``; anonymous access is refused."""
    header = request.header("Authorization")
    if header:
        scheme, _, credential = header.partition(" ")
        name, _, signature = credential.partition(":")
        if scheme != "SharedKey" or name != account or not signature:
            raise HttpError(
                _auth_failed(
                    request,
                    "The MAC signature found in the HTTP request is not the same as any computed signature.",
                )
            )
        return
    if "sig" not in request.query:
        raise HttpError(
            storage_error(
                404,
                "ResourceNotFound",
                "The specified resource does not exist.",
                head=request.method == "HEAD",
            )
        )
    _check_sas(request, clock, needed)


def _check_sas(request: Request, clock: Clock, needed: str) -> None:
    query = request.query
    try:
        expiry = _parse_iso(query.get("se", ""))
    except ValueError:
        raise HttpError(_auth_failed(request, "Signature fields not well formed.")) from None
    if expiry <= clock.now():
        raise HttpError(
            _auth_failed(
                request, "Signed expiry time must be after signed start time", code="AuthenticationFailed"
            )
        )
    granted = query.get("sp", "")
    if not all(letter in granted for letter in needed):
        raise HttpError(
            storage_error(
                403,
                "AuthorizationPermissionMismatch",
                "This request is not authorized to perform this operation using this permission.",
                head=request.method == "HEAD",
            )
        )


def _auth_failed(request: Request, detail: str, code: str = "AuthenticationFailed") -> Response:
    message = f"Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.\n{detail}"
    return storage_error(403, code, message, head=request.method == "HEAD")


def byte_range(request: Request, size: int) -> tuple[int, int] | None:
    """The requested ``[start, end]`` (inclusive) from ``x-ms-range`` or ``Range``, or None for the whole blob."""
    text = request.header("x-ms-range") or request.header("Range")
    if not text.startswith("bytes="):
        return None
    start_text, _, end_text = text[len("bytes=") :].partition("-")
    start = int(start_text)
    end = int(end_text) if end_text else size - 1
    if start >= size:
        raise HttpError(
            storage_error(
                416, "InvalidRange", "The range specified is invalid for the current size of the resource."
            )
        )
    return start, min(end, size - 1)


def read_range(path: Path, start: int, end: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(start)
        return handle.read(end - start + 1)
