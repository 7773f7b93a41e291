"""The web UI: a single page of our own (vanilla ES modules, no build step of their own) served by the
manager's REST server, with plotly.js's cartesian bundle from its npm package (built into the package by
``scripts/build_webui.py``; the whole plotly.js of the installed ``plotly`` package where it was not built).

``mount(app, manager)`` adds:

* ``/``                        the page (hash routes ``#/overview``, ``#/trials``, ``#/charts``, ``#/experiments``)
* ``/oview``, ``/detail``, ``/experiment``  NNI's web UI paths, redirected to the matching page
* ``/webui/<version>/...``     the static assets, gzipped, cached as immutable (``/webui/...``: revalidated);
                               see :mod:`trialfleet.webui.assets` (the page names plotly.js in
                               ``<meta name=plotly-src>``)
* ``/api/v1/trialfleet/...``   the UI's incremental JSON routes (see :mod:`trialfleet.webui.api`)
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from trialfleet.storage import ExperimentStore
from trialfleet.storage.queries import TrialQueries
from trialfleet.webui.api import build_router
from trialfleet.webui.assets import Assets, plotly_js_path

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager

STATIC_DIR = Path(__file__).parent / "static"
_NNI_PAGES = {"/oview": "overview", "/detail": "trials", "/experiment": "experiments"}

__all__ = ["STATIC_DIR", "mount", "plotly_js_path"]


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

    assets = Assets(STATIC_DIR)
    base = f"webui/{assets.version}"
    index_html = (
        (STATIC_DIR / "index.html")
        .read_text()
        .replace("{{assets}}", base)
        .replace("{{plotly_src}}", f"{base}/{assets.plotly}")
    )

    index_gzipped = gzip.compress(index_html.encode(), mtime=0)

    def index(request: Request) -> Response:
        headers = {"Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
            return HTMLResponse(index_gzipped, headers=headers)
        return HTMLResponse(index_html, headers=headers)

    def asset(path: str, request: Request) -> Response:
        return assets.serve(path, request)

    app.add_api_route(
        f"{prefix}/webui/{{path:path}}", asset, methods=["GET", "HEAD"], include_in_schema=False
    )
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
