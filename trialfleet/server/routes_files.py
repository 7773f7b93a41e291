"""Files: a trial's logs (``/api/v1/nni/trial-file/<id>/<name>``) and the experiment's logs (``/logs/<name>``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Response
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from trialfleet.server.context import ServerContext, context
from trialfleet.server.http_errors import not_found
from trialfleet.server.payloads import TRIAL_FILE_ALIASES

api_router = APIRouter()
logs_router = APIRouter()

#: what NNI's web UI asks for → the manager's log (the tuner runs inside the manager)
_LOG_ALIASES = {"nnimanager.log": "manager.log", "dispatcher.log": "manager.log"}


def _check_name(name: str) -> None:
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise HTTPException(400, f"bad file name {name!r}: a plain file name is expected")


@api_router.get(
    "/trial-file/{trial_id}/{filename}", summary="a file of the trial (stdout, stderr, trial.log, …)"
)
async def trial_file(trial_id: str, filename: str, ctx: ServerContext = Depends(context)) -> Response:
    _check_name(filename)
    row = ctx.reader.store.find_trial(trial_id)
    if row is None:
        raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
    if row.handle is None:
        raise not_found(f"trial {trial_id} has not started yet; it has no files")
    service = ctx.manager.service
    if service is not None:
        content = await service.read_trial_file(
            trial_id, row.handle, TRIAL_FILE_ALIASES.get(filename, filename)
        )
    else:  # a viewed experiment: no training service, the trial directory is read directly
        content = await run_in_threadpool(ctx.reader.read_trial_file, row, filename)
    if not content:
        return Response(f"{filename} is empty.", media_type="text/plain")
    try:
        return Response(content.decode("utf-8"), media_type="text/plain")
    except UnicodeDecodeError:
        return Response(content, media_type="application/octet-stream")


@logs_router.get("/logs/{name}", summary="a file of the experiment's log directory")
def experiment_log(name: str, ctx: ServerContext = Depends(context)) -> Response:
    _check_name(name)
    log_dir = ctx.manager.experiment_dir / "log"
    path = log_dir / name
    if not path.is_file() and name in _LOG_ALIASES:
        path = log_dir / _LOG_ALIASES[name]
    if not path.is_file():
        raise not_found(f"no log file {name!r} in {log_dir}")
    return FileResponse(path, media_type="text/plain")
