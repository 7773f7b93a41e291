"""Server-side checks of a job PUT body, rejected as the service does: 400 with ARM's error JSON, code ``UserError``.

The rules are the JobBase/CommandJob REST contract (``_restclient/arm_ml_service`` in azure-ai-ml 1.35.2): a
``properties`` object, a known ``jobType``, and for command jobs a non-empty ``command``, an ``environmentId``, and a
``computeId`` naming a compute of this workspace. The message texts are modelled on the service's; the exact
wording of a real workspace was not recorded.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from .wire import HttpError, arm_error

JOB_TYPES = ("Command", "Pipeline", "Sweep", "AutoML", "Spark", "Labeling", "FineTuning", "Distillation")
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}")
INPUT_TYPES = ("literal", "uri_file", "uri_folder", "mltable", "custom_model", "mlflow_model", "triton_model")


def user_error(message: str, *, target: str | None = None) -> HttpError:
    details = [{"code": "Invalid", "message": message, "target": target}] if target else []
    return HttpError(arm_error(400, "UserError", message, target=target, details=details))


def check_job_name(name: str) -> None:
    if not JOB_NAME.fullmatch(name):
        raise user_error(
            f"Job name '{name}' is invalid: it must start with a letter or digit and contain only letters, digits, '-' and '_' (at most 255 characters).",
            target="name",
        )


def compute_name(compute_id: str, workspace_prefix: str) -> str | None:
    """The compute's name when ``compute_id`` is ``<workspace id>/computes/<name>`` of this workspace."""
    match = re.fullmatch(re.escape(workspace_prefix) + r"/computes/([^/]+)", compute_id, re.IGNORECASE)
    return match.group(1) if match else None


def check_command_job(properties: dict[str, Any], workspace_prefix: str, computes: Collection[str]) -> None:
    command = properties.get("command")
    if not isinstance(command, str) or not command.strip():
        raise user_error(
            "The Command field is required for a command job and must not be empty.", target="command"
        )
    if not isinstance(properties.get("environmentId"), str) or not properties["environmentId"]:
        raise user_error("The EnvironmentId field is required for a command job.", target="environmentId")
    compute_id = properties.get("computeId")
    if not isinstance(compute_id, str) or not compute_id:
        raise user_error("The ComputeId field is required for a command job.", target="computeId")
    name = compute_name(compute_id, workspace_prefix)
    if name is None or name not in computes:
        shown = name or compute_id
        raise user_error(
            f"Compute '{shown}' was not found in the workspace; known computes: {', '.join(sorted(computes))}.",
            target="computeId",
        )
    _check_inputs(properties.get("inputs") or {})
    variables = properties.get("environmentVariables") or {}
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise user_error(
            "EnvironmentVariables must map names to string values.", target="environmentVariables"
        )


def _check_inputs(inputs: Any) -> None:
    if not isinstance(inputs, dict):
        raise user_error("Inputs must be an object.", target="inputs")
    for key, value in inputs.items():
        kind = value.get("jobInputType") if isinstance(value, dict) else None
        if kind not in INPUT_TYPES:
            raise user_error(f"Input '{key}' has an invalid jobInputType '{kind}'.", target=f"inputs.{key}")


def check_job_body(body: Any, workspace_prefix: str, computes: Collection[str]) -> dict[str, Any]:
    """The validated ``properties`` of a job PUT body."""
    if not isinstance(body, dict) or not isinstance(body.get("properties"), dict):
        raise user_error(
            "The request body must be a JSON object with a 'properties' object.", target="properties"
        )
    properties: dict[str, Any] = body["properties"]
    job_type = properties.get("jobType")
    if job_type not in JOB_TYPES:
        raise user_error(f"JobType '{job_type}' is not supported.", target="jobType")
    if job_type != "Command":
        # the emulator runs command jobs only; the real service would accept the others
        raise HttpError(
            arm_error(
                400,
                "UserError",
                f"Job type '{job_type}' is not supported by this emulator.",
                target="jobType",
            )
        )
    check_command_job(properties, workspace_prefix, computes)
    return properties
