"""Reuse mode against one job per trial on the cluster platforms, with the queue latency of a busy cluster.

    python -m bench.cluster_reuse                       # every platform below, 6 trials, latency 10 s
    python -m bench.cluster_reuse --only dlts --trials 4 --latency 5

Each platform runs on its emulator (``tests/emulators``) with the scheduling-latency knob set: a job waits
``--latency`` seconds in the cluster's queue before it runs. The training service is driven as the manager drives
it (``trialfleet.testing.poll_until``), one trial at a time: a trial is submitted when the previous one ended.
Per-trial overhead = submit → end seen, minus the trial's bare run time (its command run alone here, measured
first). The first trial pays the queue in both modes; the figure of merit is the median overhead of the trials
after it (target with reuse: < 0.2 s). On a loaded machine the bare run time measured first says little of a
trial's own run a minute later, so the overhead is also given against the trial's own run as its keeper timed it
(``keeper.json``'s ``start_time``, the command started, to ``result.json``'s ``end_time``, its end recorded): what
is left is the platform's, the worker's and the manager's part. Figures are printed, never asserted.

Platforms: those with reuse mode and an emulator — OpenPAI, DLTS, Kubeflow (a TFJob of one worker replica) and
FrameworkController (a Framework of one task), the last two on the Kubernetes emulator through the real
``kubernetes`` client, whose knob holds every pod ``Pending`` without a node for ``--latency`` seconds, and Azure
ML (its emulator's ``queueLatency`` keeps every job ``Queued``; the real ``azure-ai-ml``, a worker's mailbox and
each attempt's files over the emulated MLflow). Slurm has reuse too but is a real Slurm here,
whose queue latency this module cannot set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

COMMAND = "python3 -c pass"
RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {"x": 1}})


def bare_runtime(reps: int = 5) -> float:
    """The trial's command run alone here: what no platform can save."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(["bash", "-c", COMMAND], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


INTEGRATION = Path(__file__).resolve().parent.parent / "tests" / "integration"


def _helpers(platform: str) -> None:
    """The platform tests' config helpers (``tests/integration/<platform>/<platform>_helpers.py``)."""
    if str(INTEGRATION / platform) not in sys.path:
        sys.path.insert(0, str(INTEGRATION / platform))


@contextlib.asynccontextmanager
async def started(service: Any) -> AsyncIterator[Any]:
    await service.start()
    try:
        yield service
    finally:
        await service.close()


@contextlib.asynccontextmanager
async def dlts_service(root: Path, latency: float, reuse: bool) -> AsyncIterator[Any]:
    from tests.emulators.dlts import DltsEmulator
    from trialfleet.testing import make_context
    from trialfleet.training_services.dlts import DltsTrainingService

    _helpers("dlts")
    from dlts_helpers import dlts_config

    with DltsEmulator(root / "nfs", kill_grace=0.2, wait_for_poll=False) as dlts:
        dlts.set_scheduling_latency(latency)
        context = make_context(root / "experiment", dlts_config(dlts, reuseMode=reuse), "bench")
        async with started(DltsTrainingService(context)) as service:
            yield service


@contextlib.asynccontextmanager
async def openpai_service(root: Path, latency: float, reuse: bool) -> AsyncIterator[Any]:
    from tests.emulators.openpai import OpenPAIEmulator
    from tests.emulators.openpai.config import ClusterConfig, Timing
    from trialfleet.training_services.openpai import OpenpaiTrainingService

    _helpers("openpai")
    from openpai_helpers import openpai_context

    config = ClusterConfig(timing=Timing(stop_grace=10.0))
    with OpenPAIEmulator(config, storage_dir=root / "nfs", workdir=root / "cluster") as pai:
        pai.set_scheduling_latency(latency)
        context = openpai_context(pai, root / "experiment", "bench", reuseMode=reuse)
        async with started(OpenpaiTrainingService(context)) as service:
            yield service


@contextlib.asynccontextmanager
async def kubernetes_service(root: Path, latency: float, reuse: bool, platform: str) -> AsyncIterator[Any]:
    from trialfleet.testing import make_context
    from trialfleet.training_services.kubernetes.service import (
        FrameworkControllerTrainingService,
        KubeflowTrainingService,
    )

    _helpers("kubernetes")
    from k8s_helpers import KF_ROLE, fc_config, kubeflow_config, start_cluster

    cluster = start_cluster(root)
    try:
        cluster.set_scheduling_latency(latency)
        if platform == "kubeflow":
            block: Any = kubeflow_config(root, cluster, "tf-operator", worker=KF_ROLE, reuseMode=reuse)
            service: Any = KubeflowTrainingService(make_context(root / "experiment", block, "bench"))
        else:
            block = fc_config(root, cluster, reuseMode=reuse)
            service = FrameworkControllerTrainingService(make_context(root / "experiment", block, "bench"))
        async with started(service):
            yield service
    finally:
        cluster.stop()


@contextlib.asynccontextmanager
async def aml_service(root: Path, latency: float, reuse: bool) -> AsyncIterator[Any]:
    import os

    from tests.emulators.aml import AmlEmulator, Timing
    from trialfleet.testing import make_context
    from trialfleet.training_services.aml import AmlTrainingService

    _helpers("aml")
    from aml_helpers import aml_config

    timing = Timing(state_delay=0.02, cancel_grace=1.0, require_seen=False)
    with AmlEmulator(root / "aml", timing=timing) as aml:
        saved = dict(os.environ)
        os.environ.update(aml.client_env())  # azure-identity's variables, the CA bundle, the proxy
        try:
            aml.configure(retryAfter=0, queueLatency=latency)
            context = make_context(root / "experiment", aml_config(aml, reuseMode=reuse), "bench")
            async with started(AmlTrainingService(context)) as service:
                yield service
        finally:
            os.environ.clear()
            os.environ.update(saved)


def kubeflow_service(root: Path, latency: float, reuse: bool) -> Any:
    return kubernetes_service(root, latency, reuse, "kubeflow")


def frameworkcontroller_service(root: Path, latency: float, reuse: bool) -> Any:
    return kubernetes_service(root, latency, reuse, "frameworkcontroller")


PLATFORMS: dict[str, Callable[[Path, float, bool], Any]] = {
    "openpai": openpai_service,
    "dlts": dlts_service,
    "kubeflow": kubeflow_service,
    "frameworkcontroller": frameworkcontroller_service,
    "aml": aml_service,
}


@dataclasses.dataclass
class Timed:
    """One trial: submit → end seen, and its own run as its keeper timed it (seconds)."""

    seen: float
    own: float


async def own_run(service: Any, trial_id: str, handle: Any) -> float:
    """The trial's command from its start to its recorded end, by its keeper's records."""
    start = json.loads(await service.read_trial_file(trial_id, handle, "keeper.json"))["start_time"]
    end = json.loads(await service.read_trial_file(trial_id, handle, "result.json"))["end_time"]
    return float(end) - float(start)


async def run(platform: str, trials: int, latency: float, reuse: bool, poll: float | None) -> list[Timed]:
    """Submit → end seen of each trial, one after another; ``poll``: the service's poll period and its
    watcher's shortest interval instead of the platform's (1 s)."""
    from trialfleet.status import TrialStatus
    from trialfleet.testing import poll_until
    from trialfleet.training_services.spec import Submitted, TrialSpec

    durations = []
    with tempfile.TemporaryDirectory(prefix=f"bench-reuse-{platform}-") as tmp:
        root = Path(tmp)
        code = root / "code"
        code.mkdir()
        async with PLATFORMS[platform](root, latency, reuse) as service:
            if poll is not None:
                service.poll_interval = poll
                # the batch platforms' watcher; a Kubernetes service's workers' (None without reuse)
                watcher = service.job_watcher if hasattr(service, "job_watcher") else service.watcher
                if watcher is not None:
                    watcher.min_interval = poll
            for n in range(trials):
                start = time.perf_counter()
                submitted = await service.submit(TrialSpec(f"t{n}", n, COMMAND, code, RECORD))
                assert isinstance(submitted, Submitted), submitted
                seen = await poll_until(service, lambda s, n=n: f"t{n}" in s.ended, guard=latency + 120)
                elapsed = time.perf_counter() - start
                assert seen.ended[f"t{n}"].status is TrialStatus.SUCCEEDED, seen.ended
                durations.append(Timed(elapsed, await own_run(service, f"t{n}", submitted.handle)))
    return durations


def table(rows: list[tuple[str, list[Timed], list[Timed]]], bare: float, latency: float) -> str:
    lines = [
        f"Queue latency {latency:g} s (the emulators' scheduling-latency knob); trial `{COMMAND}`, bare run time "
        f"{bare:.3f} s; overhead = submit → end seen - bare run time, one trial at a time; 'own run' = the same "
        "minus the trial's own run as its keeper timed it instead of the bare run time.",
        "",
        "| platform | first trial, one job per trial | first trial, reuse | overhead after the first, one job "
        "per trial (median, min..max) | overhead after the first, reuse (median, min..max) | ratio | "
        "reuse, against the own run (median, min..max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for platform, single, reused in rows:
        after_single = [t.seen - bare for t in single[1:]]
        after_reused = [t.seen - bare for t in reused[1:]]
        against_own = [t.seen - t.own for t in reused[1:]]
        reused_median = statistics.median(after_reused)
        # an overhead the bare run's own noise hides (at or below 0) has no meaningful ratio
        ratio = f"{statistics.median(after_single) / reused_median:.0f}x" if reused_median >= 0.01 else "n/a"
        lines.append(
            f"| {platform} | {single[0].seen:.2f} s | {reused[0].seen:.2f} s | {_figure(after_single)} | "
            f"{_figure(after_reused)} | {ratio} | {_figure(against_own)} |"
        )
    return "\n".join(lines)


def _seen(timed: list[Timed]) -> list[float]:
    return [round(t.seen, 2) for t in timed]


def _figure(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}..{max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster_reuse", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(PLATFORMS), help="platforms, comma-separated")
    parser.add_argument("--trials", type=int, default=6, help="trials per run (at least 2)")
    parser.add_argument("--latency", type=float, default=10.0, help="seconds every job waits in the queue")
    parser.add_argument("--poll", type=float, help="the services' poll period (default: the platform's, 1 s)")
    args = parser.parse_args(argv)
    bare = bare_runtime()
    rows = []
    for platform in args.only.split(","):
        single = asyncio.run(run(platform, args.trials, args.latency, False, args.poll))
        reused = asyncio.run(run(platform, args.trials, args.latency, True, args.poll))
        rows.append((platform, single, reused))
        print(f"{platform}: one job per trial {_seen(single)}, reuse {_seen(reused)}")
        print(f"{platform}: own runs with reuse {[round(t.own, 3) for t in reused]}")
    print(f"poll period: {args.poll or 'the platform default'}")
    print(table(rows, bare, args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
