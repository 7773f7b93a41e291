"""JSON routes of the web UI under ``/api/v1/trialfleet``: incremental and paged views that NNI's
routes are too coarse for (NNI's UI re-downloads every trial and metric on each refresh).

Commands (kill, customised trial, config edits) go through NNI's own routes; these are reads only.

* ``GET /changes?cursor=E.M``  the experiment summary plus the trials changed since the cursor
  (``trials: null, reset: true`` when the client must reload what it shows)
* ``GET /trials?offset&limit&sort&order&status&q``  one page of the trials table, filtered server-side
* ``GET /trials/all``  compact records of every trial (charts)
* ``GET /trials/{id}`` and ``/trials/{id}/metrics?after=N``  one trial and its metrics after id N
* ``GET /intermediate?key&step&min&max&trials&points``  downsampled intermediate series
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException, Query

from trialfleet.storage import ExperimentStore
from trialfleet.storage.queries import Cursor, SeriesSelection, TrialQueries
from trialfleet.tuning.catalog import configured_optimize_mode

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager

PREFIX = "/api/v1/trialfleet"
MAX_CHANGED_TRIALS = 2000
MAX_PAGE = 500
SQL_INT_MAX = 2**63 - 1  # SQLite integers are 64-bit: a larger one cannot be bound into a query


def experiment_summary(manager: ExperimentManager, reader: ExperimentStore) -> dict[str, Any]:
    """What the header, the overview and the charts need about the experiment, in one small payload.
    Live values (status, duration, config) come from the manager, stored ones from ``reader``."""
    row = reader.experiment()
    config: dict[str, Any] = manager.config.to_json()
    counts = {status.value: n for status, n in reader.trial_counts().items()}
    return {
        "id": manager.experiment_id,
        "name": config.get("experimentName") or "",
        "status": manager.status.value,
        "error": manager.error,
        "readonly": bool(getattr(manager, "readonly", False)),
        "platform": _platform(config),
        "startTime": _ms(row.start_time),
        "endTime": _ms(row.end_time),
        "execDuration": manager.exec_duration,
        "revision": row.revision,
        "trialConcurrency": manager.config.trial_concurrency,
        "maxTrialNumber": manager.config.max_trial_number,
        "maxExperimentDuration": manager.config.max_experiment_duration,
        "optimizeMode": configured_optimize_mode(config),
        "counts": counts,
        "total": sum(counts.values()),
        "logDir": str(manager.experiment_dir),
        "searchSpace": config.get("searchSpace"),
        "config": config,
        # while no trial succeeded, what the first failure said (a wrong python, a missing module)
        "firstFailure": None if counts.get("SUCCEEDED") else getattr(manager, "first_failure", None),
    }


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _platform(config: dict[str, Any]) -> str:
    service = config.get("trainingService")
    if isinstance(service, list):
        return "hybrid (" + ", ".join(str(s.get("platform")) for s in service) + ")"
    return str((service or {}).get("platform", "local"))


def build_router(manager: ExperimentManager, reader: ExperimentStore, queries: TrialQueries) -> APIRouter:
    """The routes; ``reader`` and ``queries`` are read-only connections, so polls never take the
    manager's write lock."""
    router = APIRouter(prefix=PREFIX)

    @router.get("/changes")
    def changes(cursor: str | None = None) -> dict[str, Any]:
        # take the new cursor first: a change landing during this request is sent again next time
        now = queries.cursor()
        since = Cursor.decode(cursor)
        ids = queries.changed_trial_ids(since, MAX_CHANGED_TRIALS) if since else None
        return {
            "cursor": now.encode(),
            "experiment": experiment_summary(manager, reader),
            "trials": queries.trial_summaries(ids) if ids is not None else None,
            "reset": ids is None,
        }

    @router.get("/experiment")
    def experiment() -> dict[str, Any]:
        return experiment_summary(manager, reader)

    @router.get("/trials")
    def trials(
        offset: int = Query(0, ge=0, le=SQL_INT_MAX),
        limit: int = Query(50, ge=1, le=MAX_PAGE),
        sort: str = "sequenceId",
        order: str = Query("asc", pattern="^(asc|desc)$"),
        status: str = "",
        q: str = "",
    ) -> dict[str, Any]:
        statuses = [s for s in status.split(",") if s]
        try:
            page = queries.trial_page(
                offset=offset, limit=limit, sort=sort, descending=order == "desc", statuses=statuses, search=q
            )
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        return {
            "total": page.total,
            "offset": offset,
            "trials": page.rows,
            "metricKeys": queries.metric_keys(),
        }

    @router.get("/trials/all")
    def all_trials() -> dict[str, Any]:
        return {"cursor": queries.cursor().encode(), "trials": queries.trial_summaries()}

    @router.get("/trials/{trial_id}")
    def trial(trial_id: str) -> dict[str, Any]:
        row = reader.find_trial(trial_id)
        if row is None:
            raise HTTPException(404, f"no trial {trial_id}")
        (summary,) = queries.trial_summaries([trial_id])
        return {
            **summary,
            "exitCode": row.exit_code,
            "attempt": row.attempt,
            "failureKind": row.failure_kind,
            "attempts": reader.attempts(trial_id),
            "parameterRecord": row.parameters,
        }

    @router.get("/trials/{trial_id}/metrics")
    def trial_metrics(trial_id: str, after: int = Query(0, ge=0, le=SQL_INT_MAX)) -> dict[str, Any]:
        return {"metrics": queries.trial_metrics(trial_id, after)}

    @router.get("/intermediate")
    def intermediate(
        key: str = "default",
        step: int | None = Query(None, ge=0, le=SQL_INT_MAX),
        min: float | None = None,
        max: float | None = None,
        trials: int = Query(100, ge=1, le=10_000),
        points: int = Query(200, ge=2, le=10_000),
    ) -> dict[str, Any]:
        selection = SeriesSelection(key, step, min, max, trials, points)
        try:
            total, series = queries.intermediate(selection)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        return {"total": total, "series": series}

    return router
