"""The NNI payload shapes as pydantic models, for the OpenAPI schema only.

Routes build their payloads with :mod:`trialfleet.nni_view.payloads` and return them as ready JSON (validating
100,000 metric records on every poll would cost more than building them), so these models document the
answers without being applied to them. The schemathesis test checks that every answer conforms.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trialfleet.status import ExperimentStatus, TrialStatus

#: every error answer of the server: 4xx (and a 5xx it never means to send) carry ``{"error": message}``
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "what was wrong, in one readable message"}},
}
ERROR_RESPONSES: dict[str, dict[str, Any]] = {
    "4XX": {
        "description": "refused: malformed JSON (400), no or a wrong access token (401), a read-only or "
        "finished experiment (403/409), unknown trial or file (404), body too large (413), a body that "
        "is not JSON (415) or of the wrong shape or value (422)",
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    }
}
#: the empty 200 NNI answers commands with (no body, no content type)
EMPTY_RESPONSE: dict[int | str, dict[str, Any]] = {200: {"description": "done (empty body)", "content": {}}}


class CheckStatus(BaseModel):
    status: ExperimentStatus
    errors: list[str] = Field(description="the experiment's error while it is ERROR, else empty")
    platforms: list[dict[str, Any]] | None = Field(
        None,
        description="trialfleet, hybrid experiments: each platform's {platform, status (UP, UNAVAILABLE, FAILED), "
        "trials (live now), message (why it is not UP)}",
    )
    warnings: list[str] | None = Field(
        None,
        description="trialfleet: while another process holds the database's write lock, since when (the "
        "manager's writes wait for it; reads are answered)",
    )


class ExperimentProfile(BaseModel):
    model_config = ConfigDict(extra="allow")

    params: dict[str, Any] = Field(description="the experiment config (NNI v2 keys), secrets masked")
    id: str
    execDuration: int = Field(description="seconds the experiment has run")
    logDir: str
    startTime: int | None = Field(description="ms since the epoch")
    endTime: int | None = Field(None, description="ms since the epoch; absent while the experiment runs")
    nextSequenceId: int
    revision: int


class MetricDataRecord(BaseModel):
    timestamp: int | None = Field(description="ms since the epoch")
    trialJobId: str
    parameterId: str | None
    type: str = Field(description="FINAL, PERIODICAL or REQUEST_PARAMETER")
    sequence: int
    data: str = Field(description="the trial's reported value, JSON-encoded twice (decode it twice)")


class TrialJobInfo(BaseModel):
    trialJobId: str
    sequenceId: int
    status: TrialStatus
    hyperParameters: list[str] = Field(description="ParameterRecord objects as compact JSON strings")
    startTime: int | None = Field(description="ms since the epoch; the submit time until the trial runs")
    endTime: int | None = Field(None, description="absent until the trial ends")
    logPath: str | None = Field(None, description="where the trial runs, e.g. local:/path/to/trial")
    message: str | None = None
    finalMetricData: list[MetricDataRecord] | None = Field(None, description="SUCCEEDED trials only")
    stderrPath: str | None = Field(None, description="FAILED trials only")


class JobStatistic(BaseModel):
    trialJobStatus: TrialStatus
    trialJobNumber: int


class ExportRecord(BaseModel):
    parameter: dict[str, Any]
    value: str = Field(description="the trial's final metric as it reported it (JSON)")
    trialJobId: str


class ManifestEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    status: str | None = None
    port: int | None = None
    experimentName: str | None = None
    platform: str | None = None


class SequenceId(BaseModel):
    sequenceId: int = Field(description="the sequence id of the queued customized trial")


#: ``POST /experiment/import-data``: the records as NNI's ``experiment import`` sends them
IMPORT_BODY_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["parameter", "value"],
        "properties": {
            "parameter": {"type": "object", "description": "the hyperparameters of one past trial"},
            "value": {
                "description": "its final metric: a number, an object with a numeric 'default', "
                "or either of them as a JSON string",
                "anyOf": [
                    {"type": "number"},
                    {
                        "type": "object",
                        "required": ["default"],
                        "properties": {"default": {"type": "number"}},
                    },
                ],
            },
        },
    },
}
