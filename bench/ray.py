"""The Ray platform's per-trial overhead: trialfleet on Ray against trialfleet local, and against Ray Tune running
the same trivial trials on the same cluster. Figures are printed, never asserted.

    python -m bench.ray                      # 16 trials, 4 at a time, 2 repetitions
    python -m bench.ray --trials 8 --reps 1

It needs Ray Tune besides the test extra's Ray: ``pip install 'ray[tune]==2.60.0'`` (pandas, pyarrow, tensorboardX).

The cluster is the Ray tests' own (``tests/integration/ray/ray_cluster.py``: a head and a second node of 2 CPUs
each on this machine), started and stopped here. Every trial reserves half a CPU, so 4 fit at once on either
side. The trial is ``bench/trials/trial_nni.py`` (``import nni``, read the parameters, report one final result);
Ray Tune runs the same work as a function trainable (read the config, report one result), which is how Tune
users write it: Tune keeps trials in actors of a running Ray, where trialfleet starts a job (a supervisor actor,
a process running the keeper, the trial's own Python) per trial. Per-trial overhead = wall x C / N - the trial's
bare run time (its Python process alone, measured here).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import time_command
from bench.stats import Figure
from bench.systems import TRIALS_DIR

CLUSTER_DIR = Path(__file__).resolve().parent.parent / "tests" / "integration" / "ray"
CPU_PER_TRIAL = 0.5


def experiment(workdir: Path, trials: int, concurrency: int, service: dict[str, Any]) -> Any:
    from trialfleet.config import ExperimentConfig

    return ExperimentConfig.from_dict(
        {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": f"{sys.executable} trial_nni.py",
            "trialCodeDirectory": str(TRIALS_DIR),
            "trialConcurrency": concurrency,
            "maxTrialNumber": trials,
            "tuner": {"name": "Random"},
            "experimentWorkingDirectory": str(workdir),
            "trainingService": service,
        }
    )


async def run_trialfleet(workdir: Path, trials: int, concurrency: int, service: dict[str, Any]) -> float:
    """Wall time of a whole experiment through the real manager, in this process."""
    from trialfleet.manager.experiment_manager import ExperimentManager
    from trialfleet.manager.launcher import create_experiment
    from trialfleet.status import ExperimentStatus, TrialStatus

    _, experiment_dir = create_experiment(experiment(workdir, trials, concurrency, service))
    manager = ExperimentManager(experiment_dir)
    start = time.perf_counter()
    await manager.start()
    loop = asyncio.create_task(manager.run())
    try:
        await manager.wait_until({ExperimentStatus.DONE, ExperimentStatus.ERROR}, timeout=1800)
        wall = time.perf_counter() - start
        statuses = [trial.status for trial in manager.store.trials()]
        assert statuses == [TrialStatus.SUCCEEDED] * trials, statuses
    finally:
        manager.request_stop()
        await asyncio.wait_for(loop, 300)
        manager.store.close()
    return wall


def run_tune(gcs_address: str, trials: int, concurrency: int) -> float:
    """Wall time of Ray Tune running the same trials on the same cluster (a driver in this process)."""
    import ray
    from ray import tune

    def trainable(config: dict[str, Any]) -> None:
        tune.report({"default": config["x"]})

    ray.init(address=gcs_address, log_to_driver=False, logging_level="WARNING")
    storage = tempfile.mkdtemp(prefix="bench-tune-")
    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": CPU_PER_TRIAL}),
            param_space={"x": tune.uniform(0, 1)},
            tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=concurrency),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        )
        start = time.perf_counter()
        results = tuner.fit()
        wall = time.perf_counter() - start
        assert len(results) == trials and not results.errors, results.errors
    finally:
        ray.shutdown()
        shutil.rmtree(storage, ignore_errors=True)
    return wall


def overhead(wall: float, trials: int, concurrency: int, bare: float) -> float:
    return wall * concurrency / trials - bare


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(CLUSTER_DIR))
    from ray_cluster import HEAD_IP, RayCluster

    from trialfleet.compat import SHIM_PATH

    bare = time_command(
        [sys.executable, str(TRIALS_DIR / "trial_nni.py")], 5, env={"PYTHONPATH": str(SHIM_PATH)}
    ).median
    walls: dict[str, list[float]] = {"local": [], "ray": [], "tune": []}
    cluster = RayCluster()
    try:
        cluster.start()
        ray_service = {"platform": "ray", "address": cluster.address, "trialCpuNumber": CPU_PER_TRIAL}
        ray_service["nodeDirectory"] = str(cluster.root / "trials")
        with tempfile.TemporaryDirectory(prefix="bench-ray-") as scratch:
            for rep in range(args.reps):
                for name, service in (("local", {"platform": "local"}), ("ray", ray_service)):
                    workdir = Path(scratch) / f"{name}-{rep}"
                    walls[name].append(
                        asyncio.run(run_trialfleet(workdir, args.trials, args.concurrency, service))
                    )
                walls["tune"].append(run_tune(f"{HEAD_IP}:{cluster.gcs_port}", args.trials, args.concurrency))
                print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in walls.items()), flush=True)
    finally:
        cluster.stop()
    report(walls, args.trials, args.concurrency, bare)


def report(walls: dict[str, list[float]], trials: int, concurrency: int, bare: float) -> None:
    print(f"\n{trials} trivial trials, {concurrency} at a time; the trial alone runs in {bare:.3f} s\n")
    print("| system | wall (median, min..max) | wall per trial slot (wall x C / N) | per-trial overhead |")
    print("|---|---|---|---|")
    slot = {}
    for name, label in (("local", "trialfleet, local"), ("ray", "trialfleet, ray"), ("tune", "Ray Tune")):
        wall = Figure.of(walls[name])
        slot[name] = wall.median * concurrency / trials
        cost = overhead(wall.median, trials, concurrency, bare)
        print(
            f"| {label} | {wall.median:.1f} s ({wall.low:.1f}..{wall.high:.1f}) | {slot[name]:.2f} s | {cost:.2f} s |"
        )
    print(f"\ntime per trial, trialfleet on Ray / trialfleet local: {slot['ray'] / slot['local']:.1f}x")
    print(
        f"time per trial, trialfleet on Ray / Ray Tune on the same cluster: {slot['ray'] / slot['tune']:.1f}x"
    )


if __name__ == "__main__":
    main()
