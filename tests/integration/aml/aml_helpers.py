"""Helpers for the Azure ML platform tests: the config block that points at an emulator."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.emulators.aml import AmlEmulator
from trialfleet.training_services.aml import AmlConfig


def aml_block(aml: AmlEmulator, **extra: Any) -> dict[str, Any]:
    """The ``trainingService`` block for the emulated workspace, its cloud named and described in the config;
    one job per trial attempt unless ``reuseMode`` is given (the default, NNI's, is reuse mode)."""
    c = aml.config
    return {
        "platform": "aml",
        "subscriptionId": c.subscription_id,
        "resourceGroup": c.resource_group,
        "workspaceName": c.workspace_name,
        "computeTarget": c.computes[0],
        "dockerImage": "msranni/nni",
        "cloud": aml.cloud_name,
        "cloudMetadata": aml.cloud_metadata,
        "disableInstanceDiscovery": True,
        "reuseMode": False,
        **extra,
    }


def aml_config(aml: AmlEmulator, **extra: Any) -> AmlConfig:
    return AmlConfig.model_validate({"trialCommand": "unused", **aml_block(aml, **extra)})


def job_working_dir(name: str) -> str:
    """Where the job's code snapshot is, as its container sees it (the emulator's AML common runtime layout)."""
    return f"/mnt/azureml/cr/j/{uuid.uuid5(uuid.NAMESPACE_URL, name).hex}/exe/wd"


def job_trial_dir(aml: AmlEmulator, name: str) -> Path:
    """The job's trial directory on this machine (the emulator keeps each job's working directory here)."""
    return aml.root / "jobs" / name / "wd" / "outputs" / "trialfleet-trial"


def worker_dir(aml: AmlEmulator, job: str) -> Path:
    """A reuse-mode worker job's directory (worker_relay.py's ``outputs/trialfleet-worker``) on this machine."""
    return aml.root / "jobs" / job / "wd" / "outputs" / "trialfleet-worker"


def worker_trial_dir(aml: AmlEmulator, handle: Mapping[str, Any]) -> Path:
    """A worker's trial directory as its job keeps it, from the trial's handle."""
    return worker_dir(aml, handle["job_name"]) / "trials" / Path(handle["trial_dir"]).name
