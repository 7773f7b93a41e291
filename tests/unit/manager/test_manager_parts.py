"""The manager's named parts on their own: the reconciler over a real store with a batch as the platform
reports it, the scheduler with an injected training service, and config updates checked by the model."""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_experiment_manager import drive, make_manager, stopper  # noqa: F401 - the fixture is used

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.errors import ConfigError
from trialfleet.manager.clock import ManualClock
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.manager.reconciler import Reconciler
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.storage.patience import PatientWrites
from trialfleet.training_services import LocalTrainingService
from trialfleet.training_services.events import PollBatch, TrialEnded, TrialMetric, TrialStarted
from trialfleet.training_services.gpu import GpuInfo
from trialfleet.training_services.metric_channels import decode_metric
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec

HELD_TRIAL = (
    "import os, time, nni\np = nni.get_next_parameter()\n"
    "while os.path.exists('hold'): time.sleep(0.02)\nnni.report_final_result(p['x'])\n"
)


async def test_a_batch_is_stored_before_the_tuner_hears_of_it(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, "", max_trial_number=1)
    store: ExperimentStore = manager.store
    trial = store.add_trial("t1", {"parameter_id": 0, "parameters": {"x": 1}}, 10.0)
    store.mark_submitted(trial.id, {"trial_dir": "/nowhere"}, "local:/nowhere", 11.0, running=False)
    heard: list[str] = []
    driver = AlgorithmDriver(on_failure=heard.append)
    await driver.start(manager.config.tuner, None, manager.config.search_space)
    received = []
    driver.tuner.receive_trial_result = lambda *args, **kwargs: received.append(store.trial("t1").final_data)  # type: ignore[union-attr, method-assign]
    reconciler = Reconciler(store, driver, ManualClock(), PatientWrites(store.path))
    batch = PollBatch(
        started=[TrialStarted("t1", 12.0)],
        metrics=[
            TrialMetric("t1", 0, "PERIODICAL", 0, "0.5", 12.5, {"metrics": 40}),
            TrialMetric("t1", 0, "FINAL", 0, "0.75", 13.0, {"metrics": 80}),
            TrialMetric("t1", 0, "FINAL", 1, "0.25", 13.5, {"metrics": 120}),
        ],
        ended=[TrialEnded("t1", TrialStatus.SUCCEEDED, 14.0, exit_code=0)],
    )
    applied = await reconciler.apply(batch)
    stored = store.trial("t1")
    assert (stored.status, stored.start_time, stored.end_time, stored.exit_code) == (
        TrialStatus.SUCCEEDED,
        12.0,
        14.0,
        0,
    )
    assert stored.cursor == {"metrics": 120} and stored.final_data == "0.75"
    assert [m.data for m in store.metrics("t1")] == ["0.5", "0.75", "0.25"]
    assert received == ["0.75"], "only the first FINAL reaches the tuner, once it is stored"
    assert [t.id for t in applied.ended] == ["t1"] and applied.early_stop == []
    assert heard == []
    driver.close()


class _Heard:
    """An assessor that records what it is given and lets every trial go on."""

    def __init__(self) -> None:
        self.histories: list[list[object]] = []

    def assess_trial(self, trial_id: str, history: list[object]) -> None:
        self.histories.append(history)


async def test_a_metric_is_decoded_once_on_its_way_to_the_tuner_and_the_assessor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel reader checks a metric's value by decoding it and hands the decoded value on: the reconciler
    (the stored final value) and the driver (tuner, assessor) take it from the TrialMetric, not from its JSON."""
    manager = make_manager(tmp_path, "", max_trial_number=1)
    store: ExperimentStore = manager.store
    trial = store.add_trial("t1", {"parameter_id": 0, "parameters": {"x": 1}}, 10.0)
    store.mark_submitted(trial.id, {"trial_dir": "/nowhere"}, "local:/nowhere", 11.0, running=True)
    driver = AlgorithmDriver(on_failure=print)
    await driver.start(manager.config.tuner, None, manager.config.search_space)
    received: list[object] = []
    driver.tuner.receive_trial_result = lambda _p, _h, value, **_: received.append(value)  # type: ignore[union-attr, method-assign]
    driver.assessor = assessor = _Heard()  # type: ignore[assignment]
    values = {"PERIODICAL": '{"default": 0.5, "loss": 0.5}', "FINAL": '{"default": 0.75, "loss": 0.25}'}
    decoded: list[str] = []
    loads = json.loads

    def counting_loads(text: str | bytes, **kwargs: Any) -> Any:
        decoded.extend(kind for kind, value in values.items() if text == value)
        return loads(text, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    metrics = []
    for sequence, (kind, value) in enumerate(values.items()):
        record = json.dumps({"type": kind, "sequence": 0, "parameter_id": 0, "value": value}).encode()
        metric = decode_metric("t1", record, {"metrics": 40 * (sequence + 1)}, 12.0 + sequence)
        assert isinstance(metric, TrialMetric)
        metrics.append(metric)
    await Reconciler(store, driver, ManualClock(), PatientWrites(store.path)).apply(PollBatch(metrics=metrics))
    assert assessor.histories == [[{"default": 0.5, "loss": 0.5}]]
    assert received == [{"default": 0.75, "loss": 0.25}] and store.trial("t1").final_value == 0.75
    assert decoded == ["PERIODICAL", "FINAL"], "each metric's value is decoded once, by the channel reader"
    driver.close()


async def test_only_the_first_final_metric_ever_reaches_the_tuner(tmp_path: Path) -> None:
    """The store says which trials a batch gave their final result: a FINAL metric of a trial that already has
    one (an earlier batch's, seen by an earlier manager), even with the same value, does not reach the tuner."""
    manager = make_manager(tmp_path, "", max_trial_number=1)
    store: ExperimentStore = manager.store
    store.add_trial("t1", {"parameter_id": 0, "parameters": {"x": 1}}, 10.0)
    received: list[object] = []
    for sequence in range(2):  # two managers, each with a driver of its own
        driver = AlgorithmDriver(on_failure=print)
        await driver.start(manager.config.tuner, None, manager.config.search_space)
        driver.tuner.receive_trial_result = lambda _p, _h, value, **_: received.append(value)  # type: ignore[union-attr, method-assign]
        final = TrialMetric("t1", 0, "FINAL", sequence, "0.75", 13.0, {"metrics": 80 * (sequence + 1)})
        await Reconciler(store, driver, ManualClock(), PatientWrites(store.path)).apply(PollBatch(metrics=[final]))
        driver.close()
    assert received == [0.75]
    assert [m.sequence for m in store.metrics("t1")] == [0, 1] and store.trial("t1").final_data == "0.75"


async def test_a_trial_cancelled_when_the_experiment_stops_is_marked_for_a_rerun(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, "", max_trial_number=1)
    store = manager.store
    store.add_trial("t1", {"parameter_id": 0, "parameters": {"x": 1}}, 10.0)
    reconciler = Reconciler(
        store, AlgorithmDriver(on_failure=print), ManualClock(), PatientWrites(store.path)
    )
    ended = TrialEnded("t1", TrialStatus.SYS_CANCELED, 12.0, message="canceled")
    await reconciler.apply(PollBatch(ended=[ended]), stopping=True)
    assert store.trial("t1").failure_kind == FailureKind.EXPERIMENT_STOPPED.value


async def test_a_cancel_ends_the_trial_with_the_reason_stored_before_it_was_sent(tmp_path: Path) -> None:
    """A new manager (nothing in memory) learns why each trial was asked to end from the store, whatever
    status the platform or the re-adopting service reports for the cancel."""
    manager = make_manager(tmp_path, "", max_trial_number=3)
    store = manager.store
    for trial_id in ("stop", "user", "both"):
        store.add_trial(trial_id, {"parameters": {"x": 1}}, 10.0)
        store.mark_submitted(trial_id, {"trial_dir": "/nowhere"}, "local", 11.0, running=True)
    store.request_cancel(["stop", "both"], TrialStatus.SYS_CANCELED)
    store.request_cancel(["user", "both"], TrialStatus.USER_CANCELED)  # the user's reason replaces the stop's
    store.request_cancel(["user"], TrialStatus.SYS_CANCELED)  # and is not replaced by it
    assert [store.trial(t).cancel_status for t in ("stop", "user", "both")] == [
        TrialStatus.SYS_CANCELED,
        TrialStatus.USER_CANCELED,
        TrialStatus.USER_CANCELED,
    ]
    reconciler = Reconciler(
        store, AlgorithmDriver(on_failure=print), ManualClock(), PatientWrites(store.path)
    )
    reported = [TrialEnded(t, TrialStatus.USER_CANCELED, 12.0, message="canceled") for t in ("stop", "user")]
    await reconciler.apply(PollBatch(ended=reported))
    stop, user = store.trial("stop"), store.trial("user")
    assert (stop.status, stop.failure_kind) == (
        TrialStatus.SYS_CANCELED,
        FailureKind.EXPERIMENT_STOPPED.value,
    )
    assert user.status is TrialStatus.USER_CANCELED and user.cancel_status is None


@pytest.mark.slow
async def test_the_scheduler_defers_a_trial_until_the_injected_service_has_a_gpu(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    one_gpu = [GpuInfo(index=0, memory_total=16000, memory_used=0, utilization=0.0, process_count=0)]
    factory = functools.partial(LocalTrainingService, gpu_reader=lambda: one_gpu)
    manager = make_manager(tmp_path, HELD_TRIAL, max_trial_number=2, trial_gpu_number=1)
    manager = ExperimentManager(manager.experiment_dir, service_factory=factory)
    stopper.append(manager)
    (tmp_path / "code" / "hold").touch()
    await manager.start()

    def statuses() -> list[TrialStatus]:
        return [t.status for t in manager.store.trials()]

    await drive(manager, lambda: statuses() == [TrialStatus.RUNNING, TrialStatus.WAITING])
    waiting = manager.store.trials()[1]
    assert waiting.message is not None and waiting.message.startswith("waiting for 1 free GPU(s)")
    (tmp_path / "code" / "hold").unlink()
    await drive(manager, lambda: statuses() == [TrialStatus.SUCCEEDED] * 2)
    trials = manager.store.trials()
    assert [t.handle["gpus"] for t in trials] == [[0], [0]]  # type: ignore[index]
    assert trials[1].start_time >= trials[0].end_time  # type: ignore[operator]


class _OverlapCounting(LocalTrainingService):
    """The local platform with launches that take a while (a round trip, as over SSH), counting how many were
    under way at once."""

    def __init__(self, *args: Any, overlap: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.concurrent_submits = overlap
        self.under_way = self.most_at_once = 0
        self._one_real_launch = asyncio.Lock()  # local does not say its own launches may overlap

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        self.under_way += 1
        self.most_at_once = max(self.most_at_once, self.under_way)
        try:
            await asyncio.sleep(0.05)
            async with self._one_real_launch:
                return await super()._launch(spec)
        finally:
            self.under_way -= 1


@pytest.mark.parametrize(
    ("overlap", "block_limit", "at_once"), [(True, None, 4), (False, None, 1), (True, 2, 2)]
)
@pytest.mark.slow
async def test_a_platform_whose_launches_may_overlap_is_offered_the_whole_queue_at_once(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
    overlap: bool,
    block_limit: int | None,
    at_once: int,
) -> None:
    services: list[_OverlapCounting] = []

    def factory(context: Any) -> _OverlapCounting:
        services.append(_OverlapCounting(context, overlap=overlap))
        return services[-1]

    made = make_manager(tmp_path, "import nni\nnni.report_final_result(1)\n", trial_concurrency=4)
    if block_limit is not None:  # the platform block's own trialConcurrency, under the experiment's 4
        config = made.config.model_dump(mode="json", by_alias=True, exclude_none=True)
        config["trainingService"]["trialConcurrency"] = block_limit
        made = ExperimentManager(create_experiment(ExperimentConfig.from_dict(config))[1])
    manager = ExperimentManager(made.experiment_dir, service_factory=factory)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.SUCCEEDED) == 4)
    assert services[0].most_at_once == at_once
    assert sorted(t.sequence_id for t in manager.store.trials()) == [0, 1, 2, 3]


async def test_config_updates_are_checked_by_the_config_model(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    manager = make_manager(tmp_path, HELD_TRIAL)
    stopper.append(manager)
    await manager.start()
    with pytest.raises(ConfigError, match=r"trialConcurrency: expected a number greater than 0, got 0"):
        await manager.update_config(trial_concurrency=0)
    with pytest.raises(ConfigError, match=r"maxExperimentDuration: "):
        await manager.update_config(max_experiment_duration="soon")
    with pytest.raises(ConfigError, match=r"searchSpace\.x"):
        await manager.update_config(search_space={"x": {"_type": "uniform", "_value": "wrong"}})
    with pytest.raises(ConfigError, match="cannot update trialCommand of a running experiment"):
        await manager.update_config(trial_command=f"{sys.executable} other.py")
    await manager.update_config(max_experiment_duration="2h", trial_concurrency=3)
    assert (manager.config.max_experiment_duration, manager.config.trial_concurrency) == (7200, 3)
    stored = json.loads(json.dumps(manager.store.experiment().config))
    assert (stored["maxExperimentDuration"], stored["trialConcurrency"]) == (7200, 3)
