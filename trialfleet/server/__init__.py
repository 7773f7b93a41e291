"""The REST server (NNI's routes under ``/api/v1/nni``) and the NNI-shaped read model it shares with the client.

Importing this package is cheap: FastAPI is imported only by :mod:`trialfleet.server.app`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def load_app() -> Callable[..., Any]:
    """Import the web server (FastAPI and uvicorn: ~0.2 s of CPU) and return its app factory,
    :func:`trialfleet.server.app.create_app`. The manager process is handed this by its entry point and calls it
    in a thread, off its event loop."""
    import uvicorn  # noqa: F401 - imported here, off the event loop's thread

    from trialfleet.server.app import create_app

    return create_app
