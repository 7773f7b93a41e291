"""JSON routes of the web UI under ``/api/v1/trialfleet``: incremental and paged views that NNI's
routes are too coarse for (NNI's UI re-downloads every trial and metric on each refresh).

Commands (kill, customised trial, config edits) go through NNI's own routes; these are reads only (``/trial-check``
asks the manager what it would answer a customised trial, and changes nothing).

* ``GET /changes?cursor=E.M&wait=S``  the experiment summary plus the trials whose summary changed since the
  cursor (status, start, end, final result; ``trials: null, reset: true`` when the client must reload what it
  shows) and how many intermediate results arrived (``metrics``); with ``wait``, held until something changed or
  ``S`` seconds passed (a long poll: changes reach the page within ~50 ms)
* ``GET /trials?offset&limit&sort&order&status&q``  one page of the trials table, filtered server-side;
  ``sort`` is a column or ``param.<name>`` / ``metric.<key>`` with any name NNI allows (bound as a value)
* ``GET /trials/all``  compact records of every trial (charts)
* ``GET /finals``  the final results as columns (id, seq, status, final): the Overview's first chart
* ``GET /trials/{id}`` and ``/trials/{id}/metrics?after=N``  one trial and its metrics after id N
* ``GET /intermediate?key&step&min&max&trials&points``  downsampled intermediate series of any ``key``
* ``POST /trial-check``  would a customized trial with these parameters be queued? (the dialog's check; no write)
* ``GET /gpu-leases``  what every experiment holds and waits for on this machine's GPUs
  (``{"hosts": {host: {experiment: {"gpus", "waiting", "waitingSince"}}}}``, docs/shared-fleet.md)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Body, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

import trialfleet
from trialfleet.server.cache import ResponseCache
from trialfleet.server.encoding import EncodedJson, encode_strict_json
from trialfleet.storage import ExperimentStore
from trialfleet.storage.kept import KeptFinals, SummaryIndex
from trialfleet.storage.queries import Cursor, SeriesSelection, TrialQueries
from trialfleet.storage.sql import SORT_CHOICES, SORT_PATTERN
from trialfleet.training_services.gpu_leases import holdings_record, machine_holdings
from trialfleet.tuning.catalog import configured_optimize_mode

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager

PREFIX = "/api/v1/trialfleet"
MAX_CHANGED_TRIALS = 2000
MAX_WAIT = 10.0  # seconds a long poll of /changes may be held
CHECK_EVERY = 0.05  # seconds between two looks at the store while one is held
MAX_PAGE = 500
SQL_INT_MAX = 2**63 - 1
LEASE_READING_TIMEOUT = 10.0  # seconds the GPU-lease view waits for a platform's hosts  # SQLite integers are 64-bit: a larger one cannot be bound into a query


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
        # a hybrid experiment's platforms: each one's state, and why one failed or is unavailable
        "platforms": _platforms(manager),
        "version": trialfleet.__version__,
    }


async def fleet_leases(manager: ExperimentManager) -> dict[str, Any]:
    """This machine's GPU leases and those of the machines the experiment's platforms lease GPUs on."""
    hosts = {"localhost": holdings_record(await run_in_threadpool(machine_holdings))}
    platforms = getattr(manager, "platforms", None)
    for member in platforms.running if platforms is not None else []:
        try:
            hosts.update(await asyncio.wait_for(member.service.gpu_leases(), LEASE_READING_TIMEOUT))
        except TimeoutError:
            continue  # an unreachable host: shown by the platform's own status
    return hosts


def _platforms(manager: ExperimentManager) -> list[dict[str, Any]] | None:
    platforms = getattr(manager, "platforms", None)
    return platforms.status() if platforms is not None and platforms.hybrid else None


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _platform(config: dict[str, Any]) -> str:
    service = config.get("trainingService")
    if isinstance(service, list):
        return "hybrid (" + ", ".join(str(s.get("platform")) for s in service) + ")"
    return str((service or {}).get("platform", "local"))


def build_router(
    manager: ExperimentManager,
    reader: ExperimentStore,
    queries: TrialQueries,
    closers: list[Callable[[], object]],
    cache: ResponseCache,
) -> APIRouter:
    """The routes; ``reader`` and ``queries`` are read-only connections, so polls never take the manager's
    write lock. The change feed has two of its own: ``feed`` for its answers, never queued behind a page's
    query, and ``watch`` for the long polls' looks, made on the event loop itself (three index lookups each),
    so a look never waits for a thread. The routes that only read the database answer from ``cache`` while
    the database is unchanged (in JSON a browser parses: no NaN), and the whole list from a
    :class:`SummaryIndex` of its own."""
    router = APIRouter(prefix=PREFIX)
    feed = TrialQueries(ExperimentStore(reader.path, readonly=True))
    watch = TrialQueries(ExperimentStore(reader.path, readonly=True))
    every = TrialQueries(ExperimentStore(reader.path, readonly=True))
    index = SummaryIndex(every, encode_strict_json, MAX_CHANGED_TRIALS)
    kept_finals = KeptFinals(TrialQueries(ExperimentStore(reader.path, readonly=True)), encode_strict_json)
    closers += [feed.close, watch.close, every.close, kept_finals.close]

    async def cached(request: Request, build: Callable[[], Any]) -> Response:
        return await cache.respond(request, lambda: (build(), {}), encode=encode_strict_json)

    def changes_since(since: Cursor | None) -> dict[str, Any]:
        # take the new cursor first: a change landing during this request is sent again next time
        now = feed.cursor()
        ids = feed.changed_trial_ids(since, MAX_CHANGED_TRIALS) if since else None
        return {
            "cursor": now.encode(),
            "experiment": experiment_summary(manager, feed.store),
            "trials": feed.trial_summaries(ids) if ids is not None else None,
            "reset": ids is None,
            # intermediate results stored since: they change no summary, only what pages query themselves
            "metrics": now.metric - since.metric if since else 0,
        }

    @router.get("/changes")
    async def changes(cursor: str | None = None, wait: float = Query(0, ge=0, le=MAX_WAIT)) -> dict[str, Any]:
        """With ``wait``, a long poll: answered as soon as something changed after ``cursor`` (checked every
        CHECK_EVERY seconds), at the latest after ``wait`` seconds."""
        since = Cursor.decode(cursor)
        if since is not None and wait:
            first = watch.state()
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                event, metric, revision = watch.state()
                if (event, metric) != (since.event, since.metric) or revision != first[2]:
                    break
                await asyncio.sleep(CHECK_EVERY)
        return await run_in_threadpool(changes_since, since)

    @router.get("/experiment")
    def experiment() -> dict[str, Any]:
        return experiment_summary(manager, reader)

    @router.post("/trial-check")
    def trial_check(parameters: Any = Body(...)) -> dict[str, Any]:
        """Would ``POST /api/v1/nni/trial-jobs`` queue a trial with these parameters? ``{"problem": null}``, or
        what it would refuse (``parameters`` or ``maxTrialNumber``, with why and the current max trial number):
        the customized-trial dialog's check while the user types, by the manager's own rule. Writes nothing."""
        refused = manager.customized_trial_problem(parameters)
        if refused is None:
            return {"problem": None}
        what, why = refused
        return {"problem": {"what": what, "message": why, "maxTrialNumber": manager.config.max_trial_number}}

    @router.get("/gpu-leases")
    async def gpu_leases() -> dict[str, Any]:
        return {"hosts": await fleet_leases(manager)}

    @router.get("/trials")
    async def trials(
        request: Request,
        offset: int = Query(0, ge=0, le=SQL_INT_MAX),
        limit: int = Query(50, ge=1, le=MAX_PAGE),
        sort: str = Query(
            "sequenceId", description=f"one of {SORT_CHOICES}", json_schema_extra={"pattern": SORT_PATTERN}
        ),
        order: str = Query("asc", pattern="^(asc|desc)$"),
        status: str = "",
        q: str = "",
    ) -> Response:
        statuses = [s for s in status.split(",") if s]

        def build() -> dict[str, Any]:
            try:
                page = queries.trial_page(
                    offset=offset,
                    limit=limit,
                    sort=sort,
                    descending=order == "desc",
                    statuses=statuses,
                    search=q,
                )
            except ValueError as exc:  # the only value the query refuses is an unknown sort key
                raise HTTPException(422, f"query.sort: {exc}") from exc
            return {
                "total": page.total,
                "offset": offset,
                "trials": page.rows,
                "metricKeys": queries.metric_keys(),
                "searchHints": page.hints,
            }

        return await cached(request, build)

    @router.get("/trials/all")
    async def all_trials(request: Request) -> Response:
        def build() -> EncodedJson:
            cursor, trials = index.look()
            return EncodedJson(b'{"cursor":"' + cursor.encode().encode() + b'","trials":' + trials + b"}")

        return await cached(request, build)

    @router.get("/finals")
    async def finals(request: Request) -> Response:
        """Columns ``id``, ``seq``, ``status``, ``final`` of the trials with a final result (the Overview's
        first chart: a fraction of ``/trials/all``'s bytes, parsed without an object per trial), kept until a
        trial's summary changes (:class:`KeptFinals`)."""
        return await cached(request, lambda: EncodedJson(kept_finals.look()))

    @router.get("/trials/{trial_id}")
    async def trial(trial_id: str, request: Request) -> Response:
        def build() -> dict[str, Any]:
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

        return await cached(request, build)

    @router.get("/trials/{trial_id}/metrics")
    async def trial_metrics(
        trial_id: str, request: Request, after: int = Query(0, ge=0, le=SQL_INT_MAX)
    ) -> Response:
        return await cached(request, lambda: {"metrics": queries.trial_metrics(trial_id, after)})

    @router.get("/intermediate")
    async def intermediate(
        request: Request,
        key: str = Query("default", description="a key of the intermediate results (any string)"),
        step: int | None = Query(None, ge=0, le=SQL_INT_MAX),
        min: float | None = None,
        max: float | None = None,
        trials: int = Query(100, ge=1, le=10_000),
        points: int = Query(200, ge=2, le=10_000),
    ) -> Response:
        def build() -> dict[str, Any]:
            total, series = queries.intermediate(SeriesSelection(key, step, min, max, trials, points))
            return {"total": total, "series": series}

        return await cached(request, build)

    return router
