"""What every route reaches through ``request.app.state``: the manager and a reader over its database."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, Request, Response

from trialfleet.json_values import finite_copy
from trialfleet.server.reader import ExperimentReader
from trialfleet.status import ExperimentStatus

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager
    from trialfleet.server.cache import ResponseCache
    from trialfleet.server.lists import WholeLists


_STOPPED = frozenset({ExperimentStatus.STOPPING, ExperimentStatus.STOPPED})


@dataclass(frozen=True)
class ServerContext:
    manager: ExperimentManager
    reader: ExperimentReader  # its own read-only connection: a long read never holds up the manager's writes
    cache: ResponseCache  # bodies of the routes that only read the database, while it is unchanged
    lists: WholeLists  # NNI's whole lists, kept encoded between builds


async def context(request: Request) -> ServerContext:
    """(async: FastAPI would run a plain function in a worker thread, a hop per request for an attribute)"""
    ctx: ServerContext = request.app.state.trialfleet
    return ctx


async def writable(request: Request) -> ServerContext:
    """The context; 403 when the experiment is only viewed, 409 once it is stopping."""
    ctx: ServerContext = request.app.state.trialfleet
    if ctx.manager.readonly:
        raise HTTPException(
            403,
            f"experiment {ctx.manager.experiment_id} is opened read-only (view); "
            "stop the viewer and resume the experiment to change it",
        )
    if ctx.manager.status in _STOPPED:
        raise HTTPException(
            409,
            f"experiment {ctx.manager.experiment_id} is {ctx.manager.status.value}; "
            f"resume it to change it: trialfleet resume {ctx.manager.experiment_id}",
        )
    return ctx


def nni_json(payload: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    """JSON serialised directly (FastAPI's encoder is too slow for 100,000 metric records)."""
    return Response(
        encode_json(payload), status_code=status_code, media_type="application/json", headers=headers
    )


def encode_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def encode_strict_json(payload: Any) -> str:
    """JSON that a browser's ``JSON.parse`` reads: a NaN or infinite number (a trial may report one) is null.
    NNI's routes keep Python's ``NaN`` (:func:`encode_json`), which NNI's own clients expect."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(finite_copy(payload), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def empty() -> Response:
    """NNI answers commands with an empty 200 without a content type (Express's ``res.send()``)."""
    return Response(status_code=200)
