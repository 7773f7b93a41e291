"""``platform: simulated``: trials that run no process, so one machine can hold 10,000 of them running at once
(the web UI's scale tests and benchmarks). Everything else is real: the manager, its tuner, the store and the
REST server see an ordinary platform, registered through the plugin API (an entry point).

A simulated trial starts at once, reports an intermediate result every ``metricInterval`` seconds and runs
until it is killed, until ``duration`` seconds passed (then it succeeds), or until a file named after it
appears in ``controlDirectory``: its content is ``SUCCEEDED <final metric>``, ``FAILED`` or empty (SUCCEEDED
with a final metric derived from its id). The file is removed once acted on.

:func:`plugin_dir` writes the entry point's metadata into a directory; put that directory on ``PYTHONPATH``
(for the manager's process too) and ``platform: simulated`` is found like any installed plugin.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Literal, TypedDict

from pydantic import Field

from trialfleet.config.service import TrainingServiceConfig
from trialfleet.layout import MANAGER_STDERR_LOG, MANAGER_STDOUT_LOG
from trialfleet.status import TrialStatus
from trialfleet.training_services import base
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.events import PollBatch, TrialEnded, TrialMetric, TrialStarted
from trialfleet.training_services.spec import Submitted, TrialSpec

DISTRIBUTION = "trialfleet_simulated-0.1.0"
ENTRY_POINT = "simulated = trialfleet.testing.simulated:SimulatedTrainingService"


class SimulatedConfig(TrainingServiceConfig):
    platform: Literal["simulated"] = "simulated"
    control_directory: Path | None = None
    metric_interval: float = Field(default=0.0, ge=0)  # 0: no intermediate results
    duration: float | None = Field(default=None, gt=0)  # None: until killed or told to end

    not_acted_on: ClassVar[dict[str, str]] = {
        "trial_gpu_number": "simulated trials use no GPU",
        "nni_manager_ip": "simulated trials never connect to the manager",
    }


def final_of(trial_id: str) -> float:
    """A trial's final metric when its control file names none: a fixed number in [0, 1) from its id."""
    digest = hashlib.sha256(trial_id.encode()).digest()
    return round(int.from_bytes(digest[:4], "big") / 2**32, 4)


class SimulatedHandle(TypedDict):
    simulated: str  # the trial's id
    start: float


LiveTrial = base.LiveTrial[SimulatedHandle]


class SimulatedTrainingService(TrainingService[SimulatedConfig, SimulatedHandle]):
    platform = "simulated"
    config_class = SimulatedConfig
    poll_interval = 0.5

    async def _launch(self, spec: TrialSpec) -> Submitted[SimulatedHandle]:
        return Submitted({"simulated": spec.trial_id, "start": time.time()}, f"simulated:{spec.trial_id}")

    async def _adopt(self, trial: LiveTrial) -> None:
        trial.started = True

    async def _kill(self, trial: LiveTrial) -> None:
        trial.state["end"] = (trial.cancel_status or TrialStatus.USER_CANCELED, None)

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        now = time.time()
        batch = PollBatch()
        self._read_control(now)
        for trial in trials:
            if not trial.started:
                batch.started.append(TrialStarted(trial.trial_id, now))
            self._report(trial, now, batch)
            end = trial.state.get("end")
            if end is None and self.config.duration and now - trial.handle["start"] >= self.config.duration:
                end = (TrialStatus.SUCCEEDED, final_of(trial.trial_id))
            if end is not None:
                self._end(trial, end, now, batch)
        return batch

    def _read_control(self, now: float) -> None:
        directory = self.config.control_directory
        if directory is None or not directory.is_dir():
            return
        for entry in os.scandir(directory):
            trial = self.live.get(entry.name)
            if trial is None:
                continue
            words = Path(entry.path).read_text().split()
            status = TrialStatus(words[0]) if words else TrialStatus.SUCCEEDED
            final = float(words[1]) if len(words) > 1 else final_of(trial.trial_id)
            trial.state["end"] = (status, final if status is TrialStatus.SUCCEEDED else None)
            os.unlink(entry.path)

    def _report(self, trial: LiveTrial, now: float, batch: PollBatch) -> None:
        """One intermediate result per ``metricInterval``, at a phase of its own per trial: 10,000 trials
        report evenly over the interval, never all in the same poll."""
        interval = self.config.metric_interval
        if not interval:
            return
        phase = trial.state.setdefault("phase", final_of(trial.trial_id) * interval)
        period = int((now - phase) // interval)
        last = trial.state.setdefault("period", period)
        if period <= last:
            return
        trial.state["period"] = period
        sequence = int(trial.cursor.get("sequence", 0))
        value = round(final_of(trial.trial_id) * (1 - 0.8 ** (sequence + 1)), 4)
        batch.metrics.append(self._metric(trial, "PERIODICAL", sequence, value, now))

    def _end(
        self, trial: LiveTrial, end: tuple[TrialStatus, float | None], now: float, batch: PollBatch
    ) -> None:
        status, final = end
        if final is not None:
            sequence = int(trial.cursor.get("sequence", 0))
            batch.metrics.append(self._metric(trial, "FINAL", sequence, final, now))
        exit_code = 0 if status is TrialStatus.SUCCEEDED else None if status in _CANCELED else 1
        batch.ended.append(TrialEnded(trial.trial_id, status, now, exit_code=exit_code))

    @staticmethod
    def _metric(trial: LiveTrial, kind: str, sequence: int, value: float, now: float) -> TrialMetric:
        cursor = {"sequence": sequence + 1}
        trial.cursor.update(cursor)  # the base class does too, after this poll: the next metric needs it now
        return TrialMetric(trial.trial_id, None, kind, sequence, repr(value), now, cursor, value)

    async def _read_file(self, handle: SimulatedHandle, name: str) -> bytes:
        if name in ("trial.stdout", "stdout"):
            return f"simulated trial {handle.get('simulated')}\n".encode()
        return b""


_CANCELED = (TrialStatus.USER_CANCELED, TrialStatus.EARLY_STOPPED, TrialStatus.SYS_CANCELED)


def plugin_dir(directory: Path) -> Path:
    """Write the entry point of ``platform: simulated`` under ``directory`` (a distribution's metadata, as
    pip installs it) and make this process find it; put ``directory`` on the manager's ``PYTHONPATH`` too."""
    info = directory / f"{DISTRIBUTION}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trialfleet-simulated\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[trialfleet.training_services]\n{ENTRY_POINT}\n")
    if str(directory) not in sys.path:
        sys.path.append(str(directory))
    importlib.invalidate_caches()
    from trialfleet.training_services import registry

    registry._plugins.cache_clear()
    return directory


SEARCH_SPACE = {
    "lr": {"_type": "loguniform", "_value": [0.0001, 0.1]},
    "batch_size": {"_type": "choice", "_value": [16, 32, 64, 128]},
    "dropout": {"_type": "uniform", "_value": [0.0, 0.5]},
    "optimizer": {"_type": "choice", "_value": ["sgd", "adam", "rmsprop"]},
}


def experiment_config(
    work_dir: Path, trials: int, *, metric_interval: float = 0.0, duration: float | None = None
) -> Any:
    """A config of ``trials`` simulated trials, all running at once, steered through ``work_dir/control``."""
    from trialfleet.config import ExperimentConfig

    control = work_dir / "control"
    control.mkdir(parents=True, exist_ok=True)
    return ExperimentConfig.model_validate(
        {
            "experimentName": f"simulated-{trials}",
            "searchSpace": SEARCH_SPACE,
            "trialConcurrency": trials,
            "maxTrialNumber": trials,
            "tuner": {"name": "Random", "classArgs": {"seed": 7, "optimize_mode": "maximize"}},
            "experimentWorkingDirectory": str(work_dir / "experiments"),
            "trainingService": {
                "platform": "simulated",
                "trialCommand": "true",
                "trialCodeDirectory": str(work_dir),
                "controlDirectory": str(control),
                "metricInterval": metric_interval,
                "duration": duration,
            },
        }
    )


def add_running_trials(experiment_dir: Path, trials: int) -> None:
    """Record ``trials`` simulated trials as running, as a manager that submitted them and was then stopped
    would have left them; ``resume`` re-adopts them all at once (creating 10,000 through the tuner takes
    minutes on a small machine)."""
    from trialfleet.manager.decisions import parameter_record
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(experiment_dir)
    try:
        now = time.time()
        for i in range(trials):
            trial_id = f"s{i:05d}"
            start = now - (trials - i) * 0.01
            store.add_trial(trial_id, parameter_record(i, parameters_of(i)), start)
            handle = {"simulated": trial_id, "start": start}
            store.mark_submitted(trial_id, handle, f"simulated:{trial_id}", start, running=True)
    finally:
        store.close()


def parameters_of(i: int) -> dict[str, Any]:
    """Trial i's parameters: spread over the search space, a fixed function of i."""
    return {
        "lr": round(10 ** (-4 + 3 * ((i * 7919) % 1000) / 1000), 6),
        "batch_size": [16, 32, 64, 128][i % 4],
        "dropout": round(((i * 104729) % 500) / 1000, 3),
        "optimizer": ["sgd", "adam", "rmsprop"][i % 3],
    }


def spawn_manager(experiment_dir: Path, action: str, port: int, ready_timeout: float = 600.0) -> Any:
    """The real manager process, as :func:`trialfleet.manager.launcher.spawn_manager` starts it, given longer
    to answer: re-adopting 10,000 trials takes a while on a small, busy machine."""
    import subprocess

    from trialfleet.manager.launcher import Launched, connect_url, manager_command, wait_ready

    log_dir = experiment_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / MANAGER_STDOUT_LOG, "ab") as out, open(log_dir / MANAGER_STDERR_LOG, "ab") as err:
        proc = subprocess.Popen(
            manager_command(experiment_dir, action, port, "127.0.0.1", False, False, ""),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    url = connect_url("127.0.0.1", port)
    try:
        wait_ready(proc, url, experiment_dir, timeout=ready_timeout)
    except BaseException:
        proc.kill()
        raise
    return Launched(experiment_dir.name, experiment_dir, url, proc.pid)
