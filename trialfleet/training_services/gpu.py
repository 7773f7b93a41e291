"""GPUs: reading the hardware (NVML, else ``nvidia-smi``) and one pure allocator shared by every platform.

The allocator follows NNI's rules (§3.5 of the NNI surface notes) without its bugs: a request for every
GPU of the machine can be satisfied, and "no GPU now" is an answer (a reason string), never a wait.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

MIB = 1024 * 1024
SMI_TIMEOUT = 20.0
SMI_GPU_QUERY = (
    "--query-gpu=index,uuid,memory.total,memory.used,utilization.gpu",
    "--format=csv,noheader,nounits",
)
SMI_APPS_QUERY = ("--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader")


@dataclass(frozen=True)
class GpuInfo:
    index: int
    memory_total: int  # MiB
    memory_used: int  # MiB
    utilization: float  # percent of the last sample period
    process_count: int  # processes using the GPU, ours or anybody's

    @property
    def memory_fraction(self) -> float:
        return self.memory_used / self.memory_total if self.memory_total else 0.0


def read_gpus_nvml() -> list[GpuInfo] | None:
    """GPUs through NVML (``nvidia-ml-py``); None when the package or the driver library is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.debug("NVML unavailable: %s", exc)
        return None
    try:
        return [_nvml_gpu(pynvml, index) for index in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError as exc:
        log.warning("reading GPUs through NVML failed: %s", exc)
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _nvml_gpu(nvml: Any, index: int) -> GpuInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    utilization = 0.0
    with contextlib.suppress(nvml.NVMLError):  # not supported on some boards
        utilization = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    processes = 0
    for query in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
        with contextlib.suppress(nvml.NVMLError):
            processes += len(query(handle))
    return GpuInfo(index, int(memory.total) // MIB, int(memory.used) // MIB, utilization, processes)


def read_gpus_nvidia_smi() -> list[GpuInfo] | None:
    """GPUs through the ``nvidia-smi`` command; None when it is missing or fails (no driver)."""
    gpu_csv = _run_nvidia_smi(SMI_GPU_QUERY)
    if gpu_csv is None:
        return None
    return parse_nvidia_smi(gpu_csv, _run_nvidia_smi(SMI_APPS_QUERY) or "")


def _run_nvidia_smi(args: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("nvidia-smi unavailable: %s", exc)
        return None
    if done.returncode != 0:
        log.info("nvidia-smi %s failed (%d): %s", " ".join(args), done.returncode, done.stdout + done.stderr)
        return None
    return done.stdout


def parse_nvidia_smi(gpu_csv: str, apps_csv: str) -> list[GpuInfo]:
    """Parse ``index, uuid, memory.total, memory.used, utilization.gpu`` rows and ``gpu_uuid, pid`` rows."""
    processes = Counter(line.split(",")[0].strip() for line in apps_csv.splitlines() if "," in line)
    gpus = []
    for line in gpu_csv.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            if line.strip():
                log.warning("unexpected nvidia-smi line: %r", line)
            continue
        index, uuid, total, used, utilization = fields
        gpus.append(
            GpuInfo(
                int(index), int(_number(total)), int(_number(used)), _number(utilization), processes[uuid]
            )
        )
    return gpus


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return 0.0


_cache: tuple[float, list[GpuInfo]] | None = None


def read_gpus(max_age: float = 5.0) -> list[GpuInfo]:
    """This machine's GPUs (NVML, else nvidia-smi, else none), reusing a reading up to ``max_age`` seconds old."""
    global _cache
    if _cache is not None and time.monotonic() - _cache[0] <= max_age:
        return _cache[1]
    gpus = read_gpus_nvml()
    if gpus is None:
        gpus = read_gpus_nvidia_smi()
    _cache = (time.monotonic(), gpus or [])
    return _cache[1]


def allocate_gpus(
    gpus: Sequence[GpuInfo],
    request: int,
    *,
    assigned: Mapping[int, int],
    max_trials_per_gpu: int = 1,
    use_active_gpu: bool = False,
    only_indices: Collection[int] | None = None,
    leased: Mapping[int, str] | None = None,
) -> list[int] | str:
    """Choose ``request`` GPUs for one trial, or say why it cannot run now.

    ``assigned`` counts the trials already on each GPU (this experiment's, or every experiment's lease);
    a GPU takes at most ``max_trials_per_gpu`` of them. ``leased``: the GPUs leased to another experiment's
    trial, each with the holder's name, are refused. A GPU none of our trials uses is refused while other
    processes use it, unless ``use_active_gpu``. Among the eligible GPUs the least loaded win; the result is
    sorted, ready for ``CUDA_VISIBLE_DEVICES``.
    """
    if request <= 0:
        return []
    usable = [gpu for gpu in gpus if only_indices is None or gpu.index in only_indices]
    if len(usable) < request:
        return _too_few(gpus, usable, request, only_indices)
    free, busy = [], []
    for gpu in usable:
        trials = assigned.get(gpu.index, 0)
        if leased and gpu.index in leased:
            busy.append(f"GPU {gpu.index} is leased to {leased[gpu.index]}")
        elif trials >= max_trials_per_gpu:
            busy.append(f"GPU {gpu.index} has {trials} trial(s), the most allowed (maxTrialNumberPerGpu)")
        elif trials == 0 and gpu.process_count and not use_active_gpu:
            busy.append(
                f"GPU {gpu.index} is used by {gpu.process_count} other process(es) and useActiveGpu is false"
            )
        else:
            free.append(gpu)
    if len(free) < request:
        return f"{len(free)} of {len(usable)} usable GPU(s) free: " + "; ".join(busy)
    free.sort(
        key=lambda g: (assigned.get(g.index, 0), g.process_count, g.memory_fraction, g.utilization, g.index)
    )
    return sorted(gpu.index for gpu in free[:request])


class GpuPolicy(Protocol):
    """The GPU settings a local machine or a remote host has (LocalConfig, RemoteMachineConfig)."""

    max_trial_number_per_gpu: int
    use_active_gpu: bool
    gpu_indices: list[int] | None


def allocate_for(
    policy: GpuPolicy,
    gpus: Sequence[GpuInfo],
    request: int,
    assigned: Mapping[int, int],
    leased: Mapping[int, str] | None = None,
) -> list[int] | str:
    """:func:`allocate_gpus` with a machine's configured policy."""
    indices = policy.gpu_indices
    return allocate_gpus(
        gpus,
        request,
        assigned=assigned,
        max_trials_per_gpu=policy.max_trial_number_per_gpu,
        use_active_gpu=policy.use_active_gpu,
        only_indices=set(indices) if indices is not None else None,
        leased=leased,
    )


def _too_few(
    gpus: Sequence[GpuInfo], usable: Sequence[GpuInfo], request: int, only_indices: Collection[int] | None
) -> str:
    if not gpus:
        return "no GPU found on this machine (neither NVML nor nvidia-smi reports one)"
    found = ", ".join(str(gpu.index) for gpu in gpus)
    if only_indices is not None:
        return (
            f"a trial needs {request} GPU(s) but gpuIndices allows {len(usable)} of the GPUs found ({found})"
        )
    return f"a trial needs {request} GPU(s) but this machine has {len(gpus)} ({found})"
