"""The web UI: a single page of our own (vanilla ES modules, no build step) served by the manager's
REST server, plus plotly.js taken from the installed ``plotly`` package at run time.

``mount(app, manager)`` adds:

* ``/``                        the page (hash routes ``#/overview``, ``#/trials``, ``#/charts``, ``#/experiments``)
* ``/oview``, ``/detail``, ``/experiment``  NNI's web UI paths, redirected to the matching page
* ``/webui/...``               our static assets; ``/webui/vendor/plotly-<version>.min.js`` from the plotly
                               package, cached as immutable (the page names it in ``<meta name=plotly-src>``)
* ``/api/v1/trialfleet/...``   the UI's incremental JSON routes (see :mod:`trialfleet.webui.api`)
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from trialfleet.storage import ExperimentStore
from trialfleet.storage.queries import TrialQueries
from trialfleet.webui.api import build_router

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager

STATIC_DIR = Path(__file__).parent / "static"
_NNI_PAGES = {"/oview": "overview", "/detail": "trials", "/experiment": "experiments"}
IMMUTABLE = "public, max-age=31536000, immutable"

__all__ = ["STATIC_DIR", "mount", "plotly_js_path"]


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


def mount(
    app: FastAPI, manager: ExperimentManager, *, prefix: str = "", closers: list[Callable[[], object]]
) -> None:
    """Serve the web UI of ``manager``'s experiment from ``app`` (under ``prefix``, e.g. ``/nni``); what it opens
    is added to ``closers``, which the app calls when it shuts down."""
    reader = ExperimentStore(manager.store.path, readonly=True)
    queries = TrialQueries(ExperimentStore(manager.store.path, readonly=True))
    closers += [reader.close, queries.close]
    before = len(app.router.routes)
    cache = app.state.trialfleet.cache  # the server's, of the routes that only read the database
    app.include_router(build_router(manager, reader, queries, closers, cache), prefix=prefix)

    plotly_url = f"webui/vendor/plotly-{plotly_version()}.min.js"
    index_html = (STATIC_DIR / "index.html").read_text().replace("{{plotly_src}}", plotly_url)

    def plotly_js(cache: str) -> Callable[[], Response]:
        def serve() -> Response:
            path = plotly_js_path()
            if path is None:
                return PlainTextResponse("plotly is not installed: pip install 'plotly>=5'", status_code=503)
            return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": cache})

        return serve

    def index() -> HTMLResponse:
        return HTMLResponse(index_html, headers={"Cache-Control": "no-cache"})

    # the plotly routes must precede the /webui mount that would otherwise answer for them; the versioned
    # URL never changes content, so a browser keeps it for a year without asking again
    app.add_api_route(
        f"{prefix}/{plotly_url}", plotly_js(IMMUTABLE), methods=["GET"], include_in_schema=False
    )
    app.add_api_route(
        f"{prefix}/webui/vendor/plotly.min.js",
        plotly_js("max-age=86400"),
        methods=["GET"],
        include_in_schema=False,
    )
    app.mount(f"{prefix}/webui", StaticFiles(directory=STATIC_DIR), name="webui")
    app.add_api_route(f"{prefix}/", index, methods=["GET"], include_in_schema=False)
    if prefix:
        app.add_api_route(prefix, _redirect_to(f"{prefix}/"), methods=["GET"], include_in_schema=False)
    for path, page in _NNI_PAGES.items():
        app.add_api_route(
            prefix + path, _redirect_to(f"./#/{page}"), methods=["GET"], include_in_schema=False
        )
    # the server may already hold a catch-all route (SPA fallback): ours are matched before it
    ours = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[:0] = ours


def _redirect_to(url: str) -> Callable[[], RedirectResponse]:
    def redirect() -> RedirectResponse:
        return RedirectResponse(url)

    return redirect
