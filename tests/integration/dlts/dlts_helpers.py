"""Helpers for the DLTS platform tests: the config block that points at an emulator."""

from __future__ import annotations

from typing import Any

from tests.emulators.dlts import DltsEmulator
from trialfleet.training_services.dlts import DltsConfig


def dlts_block(dlts: DltsEmulator, **extra: Any) -> dict[str, Any]:
    """The ``trainingService`` block that points at the emulator, with its storage mounted here."""
    return {
        "platform": "dlts",
        "dashboard": dlts.url,
        "cluster": dlts.cluster,
        "team": dlts.team,
        "email": dlts.email,
        "password": dlts.password,
        "image": "msranni/nni",
        "localStorageMountPoint": str(dlts.work_dir()),
        "containerStorageMountPoint": "/work",
        **extra,
    }


def dlts_config(dlts: DltsEmulator, **extra: Any) -> DltsConfig:
    return DltsConfig.model_validate({"trialCommand": "unused", **dlts_block(dlts, **extra)})
