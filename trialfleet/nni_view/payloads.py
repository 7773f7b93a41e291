"""Store rows → NNI's REST payload shapes (camelCase keys, times in ms since the epoch).

Pure functions, no web framework: the REST server and the offline reader of stopped experiments
build exactly the same payloads from the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentRow, MetricRow, TrialRow
from trialfleet.training_services.trial_dir import STDERR_FILE

#: names the web UI asks for (``/trial-file/<id>/stdout``) → files of the trial directory protocol


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def compact_json(value: Any) -> str:
    """JSON as JavaScript's ``JSON.stringify`` writes it (NNI's manager is Node)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def metric_record(row: MetricRow) -> dict[str, Any]:
    """NNI's MetricDataRecord. ``data`` is the trial's serialised value JSON-encoded once more (NNI's double
    encoding: clients decode it twice); ``parameterId`` is a string, as NNI's TEXT column returns it."""
    return {
        "timestamp": ms(row.timestamp),
        "trialJobId": row.trial_id,
        "parameterId": None if row.parameter_id is None else str(row.parameter_id),
        "type": row.type,
        "sequence": row.sequence,
        "data": json.dumps(row.data),
    }


def trial_job_info(row: TrialRow, final_metric: MetricRow | None) -> dict[str, Any]:
    """NNI's TrialJobInfo. ``startTime`` is the submit time until the trial runs (as NNI's event replay gives);
    ``finalMetricData`` is ``final_metric``, the trial's final result by the store's rule (``sql.final_sql``:
    SUCCEEDED trials only, as NNI gives it); ``stderrPath`` only for FAILED ones."""
    info: dict[str, Any] = {
        "trialJobId": row.id,
        "sequenceId": row.sequence_id,
        "status": row.status.value,
        "hyperParameters": [compact_json(json.loads(row.parameters))],
        "startTime": ms(row.start_time if row.start_time is not None else row.submit_time),
    }
    if row.end_time is not None:
        info["endTime"] = ms(row.end_time)
    if row.location is not None:
        info["logPath"] = row.location
    if row.platform is not None and row.handle is not None:  # trialfleet: where it runs (hybrid experiments)
        info["platform"] = row.platform
    if row.message is not None:
        info["message"] = row.message
    if final_metric is not None:
        info["finalMetricData"] = [metric_record(final_metric)]
    if row.status is TrialStatus.FAILED and row.location is not None:
        info["stderrPath"] = f"{row.location.rstrip('/')}/{STDERR_FILE}"
    return info


def first_final_metrics(metrics: Iterable[MetricRow]) -> dict[str, MetricRow]:
    """The first FINAL metric of each trial (NNI keeps only the first)."""
    first: dict[str, MetricRow] = {}
    for metric in metrics:
        first.setdefault(metric.trial_id, metric)
    return first


def experiment_profile(
    row: ExperimentRow, params: Mapping[str, Any], exec_duration: float, log_dir: str
) -> dict[str, Any]:
    """NNI's ExperimentProfile; ``params`` is the canonical config JSON without secrets."""
    profile: dict[str, Any] = {
        "params": dict(params),
        "id": row.id,
        "execDuration": int(exec_duration),
        "logDir": log_dir,
        "startTime": ms(row.start_time),
        "nextSequenceId": row.next_sequence_id,
        "revision": row.revision,
    }
    if row.end_time is not None:
        profile["endTime"] = ms(row.end_time)
    return profile


def job_statistics(counts: Mapping[TrialStatus, int]) -> list[dict[str, Any]]:
    return [{"trialJobStatus": status.value, "trialJobNumber": n} for status, n in counts.items() if n]


def export_records(succeeded: Iterable[TrialRow], *, platform: bool = False) -> list[dict[str, Any]]:
    """``/export-data``: one ``{parameter, value, trialJobId}`` per succeeded trial with a final metric;
    ``value`` is the trial's serialised metric (a JSON string), as NNI exports it. With ``platform`` (a hybrid
    experiment) trialfleet adds the ``platform`` each ran on; other exports keep NNI's shape exactly."""
    records = []
    for row in succeeded:
        if row.final_data is None:
            continue
        record: dict[str, Any] = {
            "parameter": row.hyper_parameters,
            "value": row.final_data,
            "trialJobId": row.id,
        }
        if platform and row.platform is not None:
            record["platform"] = row.platform
        records.append(record)
    return records
