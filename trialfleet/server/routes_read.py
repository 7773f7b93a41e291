"""NNI's GET routes.

Those that only read the database answer through the response cache (trialfleet/server/cache.py), which builds a
body in a worker thread, off the manager's event loop, only when the database changed since it was last built.
The others are plain functions, which FastAPI runs in worker threads.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from trialfleet.server.context import ServerContext, context, nni_json
from trialfleet.server.encoding import EncodedJson
from trialfleet.server.http_errors import not_found
from trialfleet.server.models import (
    CheckStatus,
    ExperimentProfile,
    ExportRecord,
    JobStatistic,
    ManifestEntry,
    MetricDataRecord,
    TrialJobInfo,
)
from trialfleet.status import ExperimentStatus, TrialStatus
from trialfleet.storage import manifest

router = APIRouter()

MetricType = Literal["PERIODICAL", "FINAL"]
#: SQLite's integers are 64-bit: a larger number in a query cannot match anything and would not even bind
SQL_INT_MAX = 2**63 - 1
SortKey = Literal["sequenceId", "startTime", "endTime", "finalMetric"]  # reader.SORT_KEYS


@router.get("/version", response_model=str, summary="trialfleet's version (a JSON string)")
async def version() -> Response:
    from trialfleet import __version__

    return nni_json(__version__)


@router.get(
    "/check-status",
    response_model=CheckStatus,
    summary="{status, errors}: errors holds the experiment's error when it is ERROR; warnings, while the "
    "database is locked by another process",
)
async def check_status(ctx: ServerContext = Depends(context)) -> Response:
    manager = ctx.manager
    errors = [manager.error] if manager.status is ExperimentStatus.ERROR and manager.error else []
    status: dict[str, Any] = {"status": manager.status.value, "errors": errors}
    if manager.platforms is not None and manager.platforms.hybrid:
        status["platforms"] = manager.platforms.status()
    busy = manager.write.warning()
    if busy is not None:
        status["warnings"] = [busy]
    return nni_json(status)


@router.get(
    "/experiment",
    response_model=ExperimentProfile,
    summary="NNI's ExperimentProfile (params = the config, secrets masked)",
)
def experiment_profile(ctx: ServerContext = Depends(context)) -> Response:
    params = ctx.manager.config.to_json()
    return nni_json(ctx.reader.profile(params, ctx.manager.exec_duration))


@router.get(
    "/experiment-metadata",
    response_model=ManifestEntry,
    summary="this experiment's entry of the experiments manifest",
)
def experiment_metadata(ctx: ServerContext = Depends(context)) -> Response:
    entry = manifest.entries().get(ctx.manager.experiment_id)
    if entry is None:
        raise not_found(f"experiment {ctx.manager.experiment_id} is not in the experiments manifest")
    return nni_json(entry)


@router.get(
    "/experiments-info",
    response_model=list[ManifestEntry],
    summary="every experiment of this machine (dead managers shown STOPPED)",
)
def experiments_info() -> Response:
    return nni_json(list(manifest.entries().values()))


@router.get(
    "/experiment/imported-data", response_model=list[str], summary="each import as a compact JSON string"
)
async def imported_data(request: Request, ctx: ServerContext = Depends(context)) -> Response:
    return await ctx.cache.respond(request, lambda: (ctx.reader.imported_data(), {}))


@router.get(
    "/job-statistics", response_model=list[JobStatistic], summary="[{trialJobStatus, trialJobNumber}]"
)
async def job_statistics(request: Request, ctx: ServerContext = Depends(context)) -> Response:
    return await ctx.cache.respond(request, lambda: (ctx.reader.job_statistics(), {}))


@router.get(
    "/trial-jobs",
    response_model=list[TrialJobInfo],
    summary="[TrialJobInfo]; offset/limit/sort/order page the list (X-Total-Count gives the total)",
)
async def list_trial_jobs(
    request: Request,
    status: TrialStatus | None = None,
    offset: int = Query(0, ge=0, le=SQL_INT_MAX),
    limit: int | None = Query(None, ge=1, le=SQL_INT_MAX),
    sort: SortKey = "sequenceId",
    order: Literal["asc", "desc"] = "asc",
    ctx: ServerContext = Depends(context),
) -> Response:
    def build() -> tuple[Any, dict[str, str]]:
        total = {"X-Total-Count": str(ctx.reader.trial_count(status))}
        if status is None and offset == 0 and limit is None and sort == "sequenceId" and order == "asc":
            return EncodedJson(ctx.lists.trial_jobs()), total  # the whole list, as NNI's UI polls it
        jobs = ctx.reader.trial_jobs(
            status, offset=offset, limit=limit, sort=sort, descending=order == "desc"
        )
        return jobs, total

    return await ctx.cache.respond(request, build)


@router.get("/trial-jobs/{trial_id}", response_model=TrialJobInfo, summary="one TrialJobInfo")
async def get_trial_job(trial_id: str, request: Request, ctx: ServerContext = Depends(context)) -> Response:
    def build() -> tuple[Any, dict[str, str]]:
        job = ctx.reader.trial_job(trial_id)
        if job is None:
            raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
        return job, {}

    return await ctx.cache.respond(request, build)


@router.get(
    "/metric-data",
    response_model=list[MetricDataRecord],
    summary="[MetricDataRecord]; data is JSON-encoded twice, as NNI's",
)
async def metric_data(
    request: Request, type: MetricType | None = None, ctx: ServerContext = Depends(context)
) -> Response:
    return await ctx.cache.respond(request, lambda: (EncodedJson(ctx.lists.metric_data(type)), {}))


@router.get(
    "/metric-data/{trial_id}", response_model=list[MetricDataRecord], summary="one trial's MetricDataRecords"
)
async def trial_metric_data(
    trial_id: str, request: Request, type: MetricType | None = None, ctx: ServerContext = Depends(context)
) -> Response:
    def build() -> tuple[Any, dict[str, str]]:
        if ctx.reader.store.find_trial(trial_id) is None:
            raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
        return ctx.reader.metric_data(trial_id, type=type), {}

    return await ctx.cache.respond(request, build)


@router.get(
    "/metric-data-range/{min_seq_id}/{max_seq_id}",
    response_model=list[MetricDataRecord],
    summary="metrics of trials in a sequence-id range",
)
async def metric_data_range(
    request: Request,
    min_seq_id: int = Path(ge=-SQL_INT_MAX, le=SQL_INT_MAX),
    max_seq_id: int = Path(ge=-SQL_INT_MAX, le=SQL_INT_MAX),
    ctx: ServerContext = Depends(context),
) -> Response:
    return await ctx.cache.respond(
        request, lambda: (ctx.reader.metric_data_range(min_seq_id, max_seq_id), {})
    )


@router.get(
    "/metric-data-latest/",
    response_model=list[MetricDataRecord],
    summary="every non-PERIODICAL metric and the newest PERIODICAL per trial",
)
@router.get("/metric-data-latest", include_in_schema=False)
async def metric_data_latest(request: Request, ctx: ServerContext = Depends(context)) -> Response:
    return await ctx.cache.respond(request, lambda: (ctx.reader.metric_data_latest(), {}))


@router.get(
    "/export-data",
    response_model=list[ExportRecord],
    summary="[{parameter, value (JSON string), trialJobId}] of succeeded trials",
)
async def export_data(request: Request, ctx: ServerContext = Depends(context)) -> Response:
    return await ctx.cache.respond(request, lambda: (ctx.reader.export_data(), {}))
