"""Files: a trial's logs (``/api/v1/nni/trial-file/<id>/<name>``) and the experiment's logs (``/logs/<name>``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path as FilePath
from typing import Any, BinaryIO

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import FileResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from trialfleet.server.context import ServerContext, context
from trialfleet.server.http_errors import not_found
from trialfleet.training_services.trial_dir import open_trial_file

api_router = APIRouter()
logs_router = APIRouter()

#: what NNI's web UI asks for → the manager's log (the tuner runs inside the manager)
#: NNI's log names and trialfleet's, for an experiment made with the other layout (trialfleet/layout.py)
_LOG_ALIASES = {
    "nnimanager.log": "manager.log",
    "dispatcher.log": "manager.log",
    "manager.log": "nnimanager.log",
}


#: a plain file name: no separators (the schema states it, so a bad name is a 422 like any bad parameter)
PLAIN_NAME = r"^[^/\\\x00]+$"


_CHUNK = 1 << 16


def _check_name(name: str) -> None:
    if name in (".", ".."):
        raise not_found(f"{name!r} is a directory, not a file")


_TEXT = {"schema": {"type": "string"}}
_TRIAL_FILE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the file: text when it is UTF-8, else its bytes; an empty file says so in words",
        "content": {
            "text/plain": _TEXT,
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


@api_router.api_route(
    "/trial-file/{trial_id}/{filename}",
    methods=["GET", "HEAD"],
    summary="a file of the trial (stdout, stderr, trial.log, …)",
    response_class=Response,
    responses=_TRIAL_FILE,
)
async def trial_file(
    trial_id: str, filename: str = Path(pattern=PLAIN_NAME), ctx: ServerContext = Depends(context)
) -> Response:
    _check_name(filename)
    row = ctx.reader.store.find_trial(trial_id)
    if row is None:
        raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
    if row.handle is None:
        raise not_found(f"trial {trial_id} has not started yet; it has no files")
    platforms = ctx.manager.platforms
    # a viewed experiment has no training service: its trial directories are read here
    here = platforms.trial_dir_here(row) if platforms is not None else ctx.reader.trial_dir(row)
    if here is not None:
        return await run_in_threadpool(_streamed, here, filename, trial_id, ctx.manager.stop_requested)
    assert platforms is not None
    content = await platforms.read_trial_file(row, filename)
    if not content:
        return Response(f"{filename} is empty.", media_type="text/plain")
    try:
        return Response(content.decode("utf-8"), media_type="text/plain")
    except UnicodeDecodeError:
        return Response(content, media_type="application/octet-stream")


def _streamed(trial_dir: FilePath, filename: str, trial_id: str, stopping: Callable[[], bool]) -> Response:
    """The file as it is now (its size when opened), in chunks: a 100 MB log costs the server one chunk of
    memory, not the file's size several times over. The stream ends when the experiment stops (``stopping``):
    a slow reader does not keep the manager alive."""
    try:
        f = open_trial_file(trial_dir, filename)
    except ValueError:
        raise not_found(f"{filename!r} is outside the directory of trial {trial_id}") from None
    except (FileNotFoundError, NotADirectoryError):
        raise not_found(f"trial {trial_id} has no file {filename!r} (looked in {trial_dir})") from None
    size = os.fstat(f.fileno()).st_size
    head = f.read(min(size, _CHUNK))
    if not head:
        f.close()
        return Response(f"{filename} is empty.", media_type="text/plain")
    text = _utf8(head, complete=len(head) == size)
    return StreamingResponse(
        _chunks(f, head, size, stopping),
        media_type="text/plain" if text else "application/octet-stream",
        headers={"Content-Length": str(size)},
    )


def _chunks(f: BinaryIO, head: bytes, size: int, stopping: Callable[[], bool]) -> Iterator[bytes]:
    try:
        yield head
        left = size - len(head)
        while left > 0 and not stopping():
            chunk = f.read(min(left, _CHUNK))
            if not chunk:
                return  # truncated meanwhile: the client sees a short body
            left -= len(chunk)
            yield chunk
    finally:
        f.close()


def _utf8(head: bytes, *, complete: bool) -> bool:
    """Whether the file looks like UTF-8 text from its first chunk (a character cut at the chunk's end is fine)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not complete and exc.reason == "unexpected end of data" and exc.start >= len(head) - 3
    return True


@logs_router.get(
    "/logs/{name}",
    summary="a file of the experiment's log directory",
    response_class=Response,
    responses={200: {"description": "the log file", "content": {"text/plain": _TEXT}}},
)
def experiment_log(name: str = Path(pattern=PLAIN_NAME), ctx: ServerContext = Depends(context)) -> Response:
    _check_name(name)
    log_dir = ctx.manager.experiment_dir / "log"
    path = log_dir / name
    if not path.is_file() and name in _LOG_ALIASES:
        path = log_dir / _LOG_ALIASES[name]
    if not path.is_file():
        raise not_found(f"no log file {name!r} in {log_dir}")
    return FileResponse(path, media_type="text/plain")
