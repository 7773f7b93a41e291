"""NNI's GET routes. Plain functions: FastAPI runs them in worker threads, off the manager's event loop."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Path, Query, Response

from trialfleet.server.context import ServerContext, context, nni_json
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
def version() -> Response:
    from trialfleet import __version__

    return nni_json(__version__)


@router.get(
    "/check-status",
    response_model=CheckStatus,
    summary="{status, errors}: errors holds the experiment's error when it is ERROR",
)
def check_status(ctx: ServerContext = Depends(context)) -> Response:
    manager = ctx.manager
    errors = [manager.error] if manager.status is ExperimentStatus.ERROR and manager.error else []
    return nni_json({"status": manager.status.value, "errors": errors})


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
def imported_data(ctx: ServerContext = Depends(context)) -> Response:
    return nni_json(ctx.reader.imported_data())


@router.get(
    "/job-statistics", response_model=list[JobStatistic], summary="[{trialJobStatus, trialJobNumber}]"
)
def job_statistics(ctx: ServerContext = Depends(context)) -> Response:
    return nni_json(ctx.reader.job_statistics())


@router.get(
    "/trial-jobs",
    response_model=list[TrialJobInfo],
    summary="[TrialJobInfo]; offset/limit/sort/order page the list (X-Total-Count gives the total)",
)
def list_trial_jobs(
    status: TrialStatus | None = None,
    offset: int = Query(0, ge=0, le=SQL_INT_MAX),
    limit: int | None = Query(None, ge=1, le=SQL_INT_MAX),
    sort: SortKey = "sequenceId",
    order: Literal["asc", "desc"] = "asc",
    ctx: ServerContext = Depends(context),
) -> Response:
    jobs = ctx.reader.trial_jobs(status, offset=offset, limit=limit, sort=sort, descending=order == "desc")
    return nni_json(jobs, headers={"X-Total-Count": str(ctx.reader.trial_count(status))})


@router.get("/trial-jobs/{trial_id}", response_model=TrialJobInfo, summary="one TrialJobInfo")
def get_trial_job(trial_id: str, ctx: ServerContext = Depends(context)) -> Response:
    job = ctx.reader.trial_job(trial_id)
    if job is None:
        raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
    return nni_json(job)


@router.get(
    "/metric-data",
    response_model=list[MetricDataRecord],
    summary="[MetricDataRecord]; data is JSON-encoded twice, as NNI's",
)
def metric_data(type: MetricType | None = None, ctx: ServerContext = Depends(context)) -> Response:
    return nni_json(ctx.reader.metric_data(type=type))


@router.get(
    "/metric-data/{trial_id}", response_model=list[MetricDataRecord], summary="one trial's MetricDataRecords"
)
def trial_metric_data(
    trial_id: str, type: MetricType | None = None, ctx: ServerContext = Depends(context)
) -> Response:
    if ctx.reader.store.find_trial(trial_id) is None:
        raise not_found(f"no trial {trial_id} in experiment {ctx.manager.experiment_id}")
    return nni_json(ctx.reader.metric_data(trial_id, type=type))


@router.get(
    "/metric-data-range/{min_seq_id}/{max_seq_id}",
    response_model=list[MetricDataRecord],
    summary="metrics of trials in a sequence-id range",
)
def metric_data_range(
    min_seq_id: int = Path(ge=-SQL_INT_MAX, le=SQL_INT_MAX),
    max_seq_id: int = Path(ge=-SQL_INT_MAX, le=SQL_INT_MAX),
    ctx: ServerContext = Depends(context),
) -> Response:
    return nni_json(ctx.reader.metric_data_range(min_seq_id, max_seq_id))


@router.get(
    "/metric-data-latest/",
    response_model=list[MetricDataRecord],
    summary="every non-PERIODICAL metric and the newest PERIODICAL per trial",
)
@router.get("/metric-data-latest", include_in_schema=False)
def metric_data_latest(ctx: ServerContext = Depends(context)) -> Response:
    return nni_json(ctx.reader.metric_data_latest())


@router.get(
    "/export-data",
    response_model=list[ExportRecord],
    summary="[{parameter, value (JSON string), trialJobId}] of succeeded trials",
)
def export_data(ctx: ServerContext = Depends(context)) -> Response:
    return nni_json(ctx.reader.export_data())
