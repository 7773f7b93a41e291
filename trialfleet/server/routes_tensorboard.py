"""NNI's TensorBoard routes: ``POST /tensorboard`` ``{trials: "id1,id2"}`` starts a task (or returns the running one
serving the same trials), ``GET|PUT|DELETE /tensorboard/<id>`` reads, refreshes or stops it, ``GET|DELETE
/tensorboard-tasks`` lists or stops them all. Viewing an experiment allows them too: they change nothing stored.
Problems are 400s with NNI's ``{error: message}`` (see :mod:`trialfleet.tensorboard`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, Field

from trialfleet.server.context import ServerContext, context, nni_json
from trialfleet.tensorboard import TensorboardTask, TensorboardTasks, TrialOutput

router = APIRouter(tags=["tensorboard"])


class TensorboardBody(BaseModel):
    trials: str = Field(description="trial ids, comma-separated")
    port: int | None = Field(
        None, ge=1, le=65535, description="trialfleet: a port of your choice (default: from 6006)"
    )


def tasks(request: Request) -> TensorboardTasks:
    found: TensorboardTasks = request.app.state.tensorboard
    return found


def trial_outputs(ctx: ServerContext, trial_ids: list[str]) -> list[TrialOutput]:
    """Each trial's output directory as this machine sees it; 400 naming the first trial that has none."""
    outputs = []
    platforms = ctx.manager.platforms
    for trial_id in trial_ids:
        row = ctx.reader.store.find_trial(trial_id)
        if row is None:
            raise HTTPException(400, f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
        if row.handle is None:
            raise HTTPException(
                400, f"trial {trial_id} has not started yet: it has no output for TensorBoard"
            )
        # a viewed experiment has no training service: its trial directories are read here
        here = platforms.trial_dir_here(row) if platforms is not None else ctx.reader.trial_dir(row)
        if here is None:
            platform = row.platform or "this platform"
            raise HTTPException(
                400,
                f"trial {trial_id} runs on {platform}, whose trial directories cannot be read from the "
                "manager's machine: TensorBoard needs them here (a shared file system)",
            )
        outputs.append(TrialOutput(trial_id, row.sequence_id, here))
    return outputs


def _task(found: TensorboardTask | None, task_id: str) -> Response:
    if found is None:
        raise HTTPException(404, f"no TensorBoard task {task_id}")
    return nni_json(found.payload())


@router.post("/tensorboard", summary="start TensorBoard on the given trials' output directories")
def start(
    body: TensorboardBody, ctx: ServerContext = Depends(context), all_tasks: TensorboardTasks = Depends(tasks)
) -> Response:
    ids = [t for t in (part.strip() for part in body.trials.split(",")) if t]
    task = all_tasks.start(trial_outputs(ctx, ids), body.port)
    return nni_json(task.payload())


@router.get("/tensorboard/{task_id}", summary="one TensorBoard task")
def get(task_id: str, all_tasks: TensorboardTasks = Depends(tasks)) -> Response:
    return _task(all_tasks.get(task_id), task_id)


@router.put(
    "/tensorboard/{task_id}", summary="refresh a task's data (TensorBoard re-reads its directories itself)"
)
def refresh(task_id: str, all_tasks: TensorboardTasks = Depends(tasks)) -> Response:
    return _task(all_tasks.get(task_id), task_id)


@router.delete("/tensorboard/{task_id}", summary="stop one TensorBoard task")
def stop(task_id: str, all_tasks: TensorboardTasks = Depends(tasks)) -> Response:
    return _task(all_tasks.stop(task_id), task_id)


@router.get("/tensorboard-tasks", summary="every TensorBoard task of this manager")
def list_tasks(all_tasks: TensorboardTasks = Depends(tasks)) -> Response:
    return nni_json([t.payload() for t in all_tasks.all()])


@router.delete("/tensorboard-tasks", summary="stop every TensorBoard task")
def stop_all(all_tasks: TensorboardTasks = Depends(tasks)) -> Response:
    payload: list[dict[str, Any]] = [t.payload() for t in all_tasks.stop_all()]
    return nni_json(payload)
