"""The web UI's static files: sent gzipped to browsers that accept it (compressed once, never per request), under
a versioned URL a browser keeps for a year.

``/webui/<version>/<path>`` names the file ``static/<path>`` of this version (``version`` is a digest of every
file, so any change gives every file a new URL): ``Cache-Control: immutable``. ``/webui/<path>`` (no version:
links from elsewhere, older pages) is the same file revalidated on each use (``no-cache`` and an ``ETag``).

The plotly.js the pages load is the cartesian bundle that ``scripts/build_webui.py`` puts in ``static/vendor/``
from its npm package, with its gzipped copy; where it was not built (no npm when the package was installed),
``vendor/plotly.min.js`` is the whole plotly.js of the installed ``plotly`` package, gzipped once on first use.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import threading
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
PARTIAL_PLOTLY = "vendor/plotly-cartesian.min.js"
WHOLE_PLOTLY = "vendor/plotly.min.js"
_TEXT = ("text/", "application/json", "image/svg+xml")
_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".html": "text/html"}


def plotly_version() -> str:
    try:
        return version("plotly")
    except PackageNotFoundError:
        return "missing"


def plotly_js_path() -> Path | None:
    """``plotly.min.js`` inside the installed ``plotly`` wheel, or None when plotly is not installed."""
    try:
        path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


class Assets:
    """The files under ``directory``, with the digest that versions their URLs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self._etags = {
            path.relative_to(self.directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            for path in sorted(self.directory.rglob("*"))
            if path.is_file() and path.suffix != ".gz"
        }
        self._etags[WHOLE_PLOTLY] = f"plotly-{plotly_version()}"
        whole = hashlib.sha256(repr(sorted(self._etags.items())).encode()).hexdigest()
        self.version = f"v-{whole[:12]}"
        self._gzipped: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @property
    def plotly(self) -> str:
        """The plotly.js bundle the pages load (a path under ``static/``)."""
        return PARTIAL_PLOTLY if PARTIAL_PLOTLY in self._etags else WHOLE_PLOTLY

    def serve(self, path: str, request: Request) -> Response:
        first, _, rest = path.partition("/")
        versioned = first.startswith("v-") and bool(rest)
        if versioned:
            path = rest
        source = self._source(path)
        if source is None:
            return PlainTextResponse("not found", status_code=404)
        etag = f'"{self._etags[path]}"'
        cache = IMMUTABLE if versioned and first == self.version else REVALIDATE
        headers = {"Cache-Control": cache, "ETag": etag, "Vary": "Accept-Encoding"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        media = (
            _TYPES.get(source.suffix) or mimetypes.guess_type(source.name)[0] or "application/octet-stream"
        )
        if "gzip" in request.headers.get("accept-encoding", "") and media.startswith(_TEXT):
            headers["Content-Encoding"] = "gzip"
            return Response(self._gzip(path, source), media_type=media, headers=headers)
        return Response(source.read_bytes(), media_type=media, headers=headers)

    def _source(self, path: str) -> Path | None:
        if path == WHOLE_PLOTLY:
            return plotly_js_path()
        if path not in self._etags:  # only the files seen at start: never a path outside the directory
            return None
        return self.directory / path

    def _gzip(self, path: str, source: Path) -> bytes:
        """The file gzipped: the copy built beside it, else compressed once and kept."""
        with self._lock:
            if path not in self._gzipped:
                built = source.with_name(source.name + ".gz")
                self._gzipped[path] = (
                    built.read_bytes()
                    if built.is_file()
                    else gzip.compress(source.read_bytes(), compresslevel=9, mtime=0)
                )
            return self._gzipped[path]
