"""Reading GPUs: nvidia-smi through a scripted double (tests/doubles/nvidia-smi), and a machine without any."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_service_helpers import fake_gpu

from trialfleet.training_services.gpu import (
    GpuInfo,
    parse_nvidia_smi,
    read_gpus,
    read_gpus_nvidia_smi,
    read_gpus_nvml,
)


@pytest.mark.slow
def test_nvidia_smi_output_is_parsed(fake_gpus) -> None:
    gpus = [fake_gpu(0), fake_gpu(1, memory_used=2048, utilization=37)]
    fake_gpus(
        gpus, [{"gpu_uuid": gpus[1]["uuid"], "pid": 4242, "process_name": "python", "used_memory": 2000}]
    )
    assert read_gpus_nvidia_smi() == [GpuInfo(0, 15360, 0, 0.0, 0), GpuInfo(1, 15360, 2048, 37.0, 1)]


def test_unsupported_values_read_as_zero(fake_gpus) -> None:
    fake_gpus([{**fake_gpu(0), "utilization": "[Not Supported]", "memory_used": "[N/A]"}])
    assert read_gpus_nvidia_smi() == [GpuInfo(0, 15360, 0, 0.0, 0)]


def test_a_failing_driver_reads_as_unknown(fake_gpus) -> None:
    fake_gpus([fake_gpu(0)], driver_error=True)
    assert read_gpus_nvidia_smi() is None


def test_missing_nvidia_smi_reads_as_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert read_gpus_nvidia_smi() is None


def test_unexpected_lines_are_skipped() -> None:
    assert parse_nvidia_smi("No devices were found\n", "") == []
    assert parse_nvidia_smi("0, GPU-x, 100, 10, 5\nbogus\n", "GPU-x, 1\nGPU-x, 2\n") == [
        GpuInfo(0, 100, 10, 5.0, 2)
    ]


def _require_no_nvml() -> None:
    if read_gpus_nvml() is not None:
        pytest.skip("this machine has a working NVML driver, so it cannot play a machine without GPUs")


def test_machine_without_gpus_has_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _require_no_nvml()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert read_gpus(max_age=0) == []


@pytest.mark.slow
def test_readings_are_reused_for_max_age(fake_gpus) -> None:
    _require_no_nvml()
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    assert len(read_gpus(max_age=0)) == 2
    fake_gpus([fake_gpu(0)])
    assert len(read_gpus(max_age=3600)) == 2
    assert len(read_gpus(max_age=0)) == 1
