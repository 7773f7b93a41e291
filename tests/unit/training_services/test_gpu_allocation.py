"""The GPU allocator, table-driven: NNI's rules (§3.5) without its bugs (§10 item 4)."""

from __future__ import annotations

import pytest

from trialfleet.training_services.gpu import GpuInfo, allocate_gpus


def gpu(index: int, *, processes: int = 0, used: int = 0, utilization: float = 0.0) -> GpuInfo:
    return GpuInfo(index, 16000, used, utilization, processes)


TWO = [gpu(0), gpu(1)]
FOUR = [gpu(0), gpu(1), gpu(2), gpu(3)]

CASES = [
    # (name, gpus, request, options, expected list or a fragment of the reason)
    ("nothing asked", TWO, 0, {}, []),
    ("first idle GPU", TWO, 1, {}, [0]),
    ("skip a GPU a trial holds", TWO, 1, {"assigned": {0: 1}}, [1]),
    ("all GPUs of the machine", TWO, 2, {}, [0, 1]),
    ("the only GPU of the machine", [gpu(0)], 1, {}, [0]),
    ("all held", TWO, 1, {"assigned": {0: 1, 1: 1}}, "0 of 2 usable GPU(s) free"),
    ("all held names the limit", TWO, 1, {"assigned": {0: 1, 1: 1}}, "maxTrialNumberPerGpu"),
    ("more than the machine has", TWO, 3, {}, "needs 3 GPU(s) but this machine has 2"),
    ("no GPU at all", [], 1, {}, "no GPU found"),
    ("active GPU refused", [gpu(0, processes=2), gpu(1)], 1, {}, [1]),
    (
        "only active GPUs",
        [gpu(0, processes=2)],
        1,
        {},
        "used by 2 other process(es) and useActiveGpu is false",
    ),
    ("active GPU allowed", [gpu(0, processes=2)], 1, {"use_active_gpu": True}, [0]),
    ("idle preferred over active", [gpu(0, processes=1), gpu(1)], 1, {"use_active_gpu": True}, [1]),
    ("gpuIndices restricts", TWO, 1, {"only_indices": {1}}, [1]),
    (
        "gpuIndices names nothing",
        TWO,
        1,
        {"only_indices": {5}},
        "gpuIndices allows 0 of the GPUs found (0, 1)",
    ),
    ("gpuIndices too few", FOUR, 3, {"only_indices": {0, 2}}, "needs 3 GPU(s) but gpuIndices allows 2"),
    ("sharing: least loaded first", TWO, 1, {"assigned": {0: 1}, "max_trials_per_gpu": 2}, [1]),
    ("sharing: a GPU with room", TWO, 1, {"assigned": {0: 1, 1: 2}, "max_trials_per_gpu": 2}, [0]),
    ("sharing: full", TWO, 1, {"assigned": {0: 2, 1: 2}, "max_trials_per_gpu": 2}, "0 of 2 usable"),
    # our own trial's processes make the GPU active; that must not stop a second trial sharing it
    ("sharing our active GPU", [gpu(0, processes=1)], 1, {"assigned": {0: 1}, "max_trials_per_gpu": 2}, [0]),
    ("less memory used wins", [gpu(0, used=9000), gpu(1, used=100)], 1, {"use_active_gpu": True}, [1]),
    ("less utilisation wins", [gpu(0, utilization=90), gpu(1, utilization=5)], 1, {}, [1]),
    ("indices sorted", FOUR, 2, {"assigned": {0: 1, 2: 1}}, [1, 3]),
    ("partly free is not enough", FOUR, 3, {"assigned": {0: 1, 2: 1}}, "2 of 4 usable GPU(s) free"),
]


@pytest.mark.parametrize(
    ("name", "gpus", "request_count", "options", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_allocate_gpus(
    name: str, gpus: list[GpuInfo], request_count: int, options: dict, expected: object
) -> None:
    options = {"assigned": {}, **options}
    result = allocate_gpus(gpus, request_count, **options)
    if isinstance(expected, list):
        assert result == expected
    else:
        assert isinstance(result, str) and str(expected) in result, result


def test_allocation_never_exceeds_the_per_gpu_limit() -> None:
    assigned: dict[int, int] = {}
    chosen = []
    while isinstance(choice := allocate_gpus(FOUR, 2, assigned=assigned, max_trials_per_gpu=3), list):
        chosen.append(choice)
        for index in choice:
            assigned[index] = assigned.get(index, 0) + 1
    assert len(chosen) == 6  # 4 GPUs * 3 trials each / 2 GPUs per trial
    assert assigned == {0: 3, 1: 3, 2: 3, 3: 3}
    assert all(len(set(choice)) == 2 for choice in chosen)
