"""NNI's commands: update the profile, add/cancel trials, import data, stop. They run on the manager's loop.

A viewed (read-only) experiment refuses every change with 403; malformed bodies are 400/422 (see http_errors).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Response
from pydantic import BaseModel, ConfigDict

from trialfleet.export import parse_import_records
from trialfleet.server.context import ServerContext, context, empty, nni_json, writable
from trialfleet.server.http_errors import not_found, require_json
from trialfleet.server.models import EMPTY_RESPONSE, ERROR_SCHEMA, IMPORT_BODY_SCHEMA, SequenceId

router = APIRouter()


class UpdateType(str, Enum):
    TRIAL_CONCURRENCY = "TRIAL_CONCURRENCY"
    MAX_EXEC_DURATION = "MAX_EXEC_DURATION"
    SEARCH_SPACE = "SEARCH_SPACE"
    MAX_TRIAL_NUM = "MAX_TRIAL_NUM"


class ProfileBody(BaseModel):
    """The whole ExperimentProfile as ``GET /experiment`` gave it, with ``params`` edited (NNI's protocol)."""

    model_config = ConfigDict(extra="allow")
    params: dict[str, Any]


#: update type → (config field, profile keys: NNI 3 first, then the legacy v1 name)
_UPDATES: dict[UpdateType, tuple[str, tuple[str, ...]]] = {
    UpdateType.TRIAL_CONCURRENCY: ("trial_concurrency", ("trialConcurrency",)),
    UpdateType.MAX_TRIAL_NUM: ("max_trial_number", ("maxTrialNumber", "maxTrialNum")),
    UpdateType.MAX_EXEC_DURATION: ("max_experiment_duration", ("maxExperimentDuration", "maxExecDuration")),
    UpdateType.SEARCH_SPACE: ("search_space", ("searchSpace",)),
}


def profile_update(update_type: UpdateType, params: dict[str, Any]) -> tuple[str, Any]:
    """The config field a profile update changes and the value given; 422 naming the key when it is absent.
    The value itself is checked by the config model, in the manager (as for the CLI and the Python API)."""
    field, keys = _UPDATES[update_type]
    key = next((k for k in keys if k in params), None)
    if key is None:
        raise HTTPException(
            422, f"body.params.{keys[0]}: missing (required by update_type={update_type.value})"
        )
    return field, params[key]


@router.put(
    "/experiment",
    summary="change trialConcurrency, maxExperimentDuration, searchSpace or maxTrialNumber",
    description="The body is the profile from `GET /experiment` with `params` edited; `params` must hold the key "
    "`update_type` names (trialConcurrency, maxExperimentDuration or maxExecDuration, searchSpace, "
    "maxTrialNumber or maxTrialNum), else 422.",
    response_class=Response,
    responses=EMPTY_RESPONSE,
    dependencies=[Depends(require_json)],
)
async def update_experiment(
    body: ProfileBody,
    update_type: UpdateType = Query(...),
    ctx: ServerContext = Depends(writable),
) -> Response:
    field, value = profile_update(update_type, body.params)
    await ctx.manager.update_config(**{field: value})
    return empty()


@router.post(
    "/experiment",
    summary="NNI's launcher step, always refused: a trialfleet manager is configured when it starts",
    status_code=409,
    responses={409: {"description": "refused", "content": {"application/json": {"schema": ERROR_SCHEMA}}}},
)
def start_experiment(ctx: ServerContext = Depends(context)) -> Response:
    raise HTTPException(
        409, f"this manager already runs experiment {ctx.manager.experiment_id}; its config is set at launch"
    )


@router.delete(
    "/experiment",
    summary="stop the experiment (its trials are stopped, then the manager exits)",
    response_class=Response,
    responses=EMPTY_RESPONSE,
)
def stop_experiment(ctx: ServerContext = Depends(context)) -> Response:
    ctx.manager.request_stop()
    return empty()


@router.post(
    "/experiment/import-data",
    summary="[{parameter, value}] for the tuner",
    response_class=Response,
    responses=EMPTY_RESPONSE,
    dependencies=[Depends(require_json)],
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": IMPORT_BODY_SCHEMA}}}},
)
async def import_data(body: Any = Body(...), ctx: ServerContext = Depends(writable)) -> Response:
    records = parse_import_records(body, source="request body")
    await ctx.manager.import_data(records)
    return empty()


# legacy NNI launcher step, refused (400): cluster metadata is part of the config
@router.put("/experiment/cluster-metadata", include_in_schema=False)
def cluster_metadata() -> Response:
    raise HTTPException(
        400, "cluster metadata is part of the experiment config in trialfleet; nothing to set"
    )


@router.post(
    "/trial-jobs",
    summary="queue a customized trial with these parameters → {sequenceId}",
    description="Refused (422) when the parameters are not a set the search space can produce, and (409) once "
    "maxTrialNumber trials were submitted, unless `raiseMaxTrialNumber=true` (trialfleet's): then maxTrialNumber "
    "grows by this trial.",
    response_model=SequenceId,
    dependencies=[Depends(require_json)],
)
async def add_trial_job(
    parameters: dict[str, Any] = Body(...),
    raise_max: bool = Query(False, alias="raiseMaxTrialNumber"),
    ctx: ServerContext = Depends(writable),
) -> Response:
    sequence_id = await ctx.manager.add_customized_trial(parameters, raise_max_trial_number=raise_max)
    return nni_json({"sequenceId": sequence_id})


@router.delete(
    "/trial-jobs/{trial_id}",
    summary="cancel a trial (USER_CANCELED)",
    response_class=Response,
    responses=EMPTY_RESPONSE,
)
async def cancel_trial_job(trial_id: str, ctx: ServerContext = Depends(writable)) -> Response:
    if ctx.reader.store.find_trial(trial_id) is None:
        raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
    await ctx.manager.cancel_trial(trial_id)
    return empty()
