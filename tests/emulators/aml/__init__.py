"""An Azure ML (SDK v2) emulator: ARM, run history, MLflow, blob storage and Entra ID over HTTPS on loopback,
driven unchanged by ``azure-ai-ml`` and ``azure-identity`` (cluster-platforms.md §6, §9.4).

    with AmlEmulator() as emulator:
        os.environ.update(emulator.client_env())       # trust the test CA; storage host names via the proxy
        ml_client = emulator.ml_client()                # MLClient(cloud=..., cloud_metadata=...) + a real credential
        job = ml_client.jobs.create_or_update(command(command="python train.py", code="./src",
                                                      environment="azureml:...", compute="cpu-cluster"))
"""

from __future__ import annotations

from .clock import Clock, ManualClock
from .emulator import STORAGE_SUFFIX, AmlEmulator
from .jobs import IN_PROGRESS, POST_PROCESSING, TERMINAL, Timing
from .workspace import WorkspaceConfig

__all__ = [
    "IN_PROGRESS",
    "POST_PROCESSING",
    "STORAGE_SUFFIX",
    "TERMINAL",
    "AmlEmulator",
    "Clock",
    "ManualClock",
    "Timing",
    "WorkspaceConfig",
]
