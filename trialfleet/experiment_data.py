"""NNI's result classes of the Python experiment API (``nni/experiment/data.py``), built from REST payloads.

Field names are NNI's (camelCase), so code written against ``nni.experiment`` reads them unchanged. Unlike
NNI's, they accept payloads with missing or extra keys (a WAITING trial has no endTime; trialfleet adds
``message``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrialResult:
    """One ``export_data()`` record: parameters, the decoded final metric, and the trial's id."""

    parameter: dict[str, Any]
    value: Any
    trialJobId: str

    @classmethod
    def from_payload(cls, record: dict[str, Any]) -> TrialResult:
        return cls(record["parameter"], json.loads(record["value"]), record["trialJobId"])


@dataclass
class TrialMetricData:
    timestamp: int
    trialJobId: str
    parameterId: str | None
    type: str
    sequence: int
    data: Any  # decoded (NNI's REST double encoding undone)

    @classmethod
    def from_payload(cls, record: dict[str, Any]) -> TrialMetricData:
        return cls(
            record["timestamp"],
            record["trialJobId"],
            record.get("parameterId"),
            record["type"],
            record["sequence"],
            json.loads(json.loads(record["data"])),
        )


@dataclass
class TrialHyperParameters:
    parameter_id: int | None
    parameter_source: str
    parameters: Any  # a dict, or a bare value (NNI's BatchTuner)
    parameter_index: int = 0


@dataclass
class TrialJob:
    trialJobId: str
    status: str
    hyperParameters: list[TrialHyperParameters] = field(default_factory=list)
    logPath: str | None = None
    startTime: int | None = None
    sequenceId: int | None = None
    endTime: int = -1
    finalMetricData: list[TrialMetricData] = field(default_factory=list)
    stderrPath: str = ""
    message: str | None = None

    @classmethod
    def from_payload(cls, job: dict[str, Any]) -> TrialJob:
        return cls(
            trialJobId=job["trialJobId"],
            status=job["status"],
            hyperParameters=[TrialHyperParameters(**json.loads(h)) for h in job.get("hyperParameters", [])],
            logPath=job.get("logPath"),
            startTime=job.get("startTime"),
            sequenceId=job.get("sequenceId"),
            endTime=job.get("endTime", -1),
            finalMetricData=[TrialMetricData.from_payload(m) for m in job.get("finalMetricData", [])],
            stderrPath=job.get("stderrPath", ""),
            message=job.get("message"),
        )
