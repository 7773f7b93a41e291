"""NNI's whole lists kept between builds: after any sequence of changes, each is what a build from scratch gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialfleet.manager.decisions import parameter_record
from trialfleet.nni_view.reader import ExperimentReader
from trialfleet.server.encoding import encoded_list
from trialfleet.server.lists import WholeLists
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.kept import SplicedList

T0 = 1_700_000_000.0

# an update: (key, order, value); the order of a key never changes once it is in the list (a trial's sequence id)
updates = st.lists(
    st.lists(st.tuples(st.integers(0, 30), st.text(max_size=12)), max_size=8),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(updates)
@pytest.mark.slow
def test_a_spliced_list_is_the_encoding_of_its_elements_in_order(steps: list[list[tuple[int, str]]]) -> None:
    spliced, expected = SplicedList(), {}
    for step in steps:
        items = [(f"k{n}", n * 7 % 31, json.dumps(value).encode()) for n, value in step]
        spliced.update(items)
        for n, value in step:
            expected[n * 7 % 31] = value
        assert json.loads(spliced.body) == [expected[order] for order in sorted(expected)]
        assert len(spliced) == len(expected)


def test_a_spliced_list_reset_then_updated() -> None:
    spliced = SplicedList()
    spliced.reset([("b", 2, b'"two"'), ("a", 1, b'"one"')])
    assert spliced.body == b'["one","two"]'
    spliced.update([("a", 1, b'"ONE!"'), ("c", 3, b"3")])
    assert spliced.body == b'["ONE!","two",3]'
    spliced.update([("z", 0, b"0")])  # before every kept element: laid out again
    assert spliced.body == b'[0,"ONE!","two",3]'
    spliced.update([("c", 3, b'"three"'), ("b", 2, b"2")])
    assert spliced.body == b'[0,"ONE!",2,"three"]'


class _Experiment:
    """A store changed at random the ways a manager changes it, and a kept list beside a scratch build."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        self.rng = rng
        self.store = ExperimentStore(path)
        self.store.init_experiment("exp", {}, T0)
        self.lists = WholeLists(path, path.parent)
        self.scratch = ExperimentReader(ExperimentStore(path, readonly=True), path.parent)
        self.trials: list[str] = []
        self.now = T0

    def close(self) -> None:
        self.lists.close()
        self.scratch.store.close()
        self.store.close()

    def step(self) -> None:
        self.now += 1
        rng, store = self.rng, self.store
        trial = rng.choice(self.trials) if self.trials else None
        status = store.trial(trial).status if trial else None
        choice = rng.randrange(8)
        if choice == 0 or trial is None:
            trial_id = f"t{len(self.trials)}"
            store.add_trial(trial_id, parameter_record(len(self.trials), {"x": rng.random()}), self.now)
            self.trials.append(trial_id)
        elif choice == 1 and status is TrialStatus.WAITING:
            store.set_waiting_reason(trial, rng.choice(["no GPU free", "queued", None]), self.now)
        elif choice == 2 and status is TrialStatus.WAITING:
            store.mark_submitted(trial, {"d": 1}, f"local:/t/{trial}", self.now, running=rng.random() < 0.5)
        elif choice == 3 and status is TrialStatus.WAITING:
            store.mark_running(trial, self.now)
        elif choice == 4 and status is TrialStatus.RUNNING:
            kind = rng.choice(["PERIODICAL", "PERIODICAL", "FINAL"])
            attempt = store.trial(trial).attempt
            value = rng.random()
            metric = NewMetric(trial, 0, kind, rng.randrange(5), json.dumps(value), self.now, value, attempt)
            store.add_metrics([metric], {})
        elif choice == 5 and status is TrialStatus.RUNNING:
            ended = rng.choice([TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.USER_CANCELED])
            store.end_trial(trial, ended, self.now, exit_code=0 if ended is TrialStatus.SUCCEEDED else 1)
        elif choice == 6 and status is not None and status.is_terminal:
            store.retry_trial(trial, self.now, "retried")
        elif choice == 7:
            self.check()

    def check(self) -> None:
        assert self.lists.trial_jobs() == encoded_list(self.scratch.trial_job_chunks()).data
        for kind in (None, "FINAL", "PERIODICAL"):
            assert self.lists.metric_data(kind) == encoded_list(self.scratch.metric_data_chunks(kind)).data, (
                kind
            )


@pytest.mark.slow
def test_kept_lists_follow_every_kind_of_change(tmp_path: Path) -> None:
    for seed in range(6):
        experiment = _Experiment(tmp_path / f"{seed}.db", random.Random(seed))
        try:
            for _ in range(400):
                experiment.step()
            experiment.check()
        finally:
            experiment.close()


def test_a_new_waiting_reason_is_seen_by_the_kept_trial_list(tmp_path: Path) -> None:
    experiment = _Experiment(tmp_path / "db", random.Random(0))
    try:
        experiment.store.add_trial("wA", parameter_record(0, {"x": 1}), T0)
        assert json.loads(experiment.lists.trial_jobs())[0].get("message") is None
        experiment.store.set_waiting_reason("wA", "no GPU free", T0 + 1)
        assert json.loads(experiment.lists.trial_jobs())[0]["message"] == "no GPU free"
        events = [e.event for e in experiment.store.events("wA")]
        experiment.store.set_waiting_reason("wA", "no GPU free", T0 + 2)  # the same reason: no new event
        assert [e.event for e in experiment.store.events("wA")] == events == ["WAITING", "WAITING_REASON"]
    finally:
        experiment.close()


def test_lists_nobody_asks_for_are_let_go_and_built_again_when_asked(tmp_path: Path) -> None:
    experiment = _Experiment(tmp_path / "db", random.Random(1))
    try:
        for _ in range(100):
            experiment.step()
        experiment.check()
        assert not experiment.lists.forget_unasked(3600)  # just asked
        assert experiment.lists.forget_unasked(0)
        assert len(experiment.lists._trials.list) == 0 and not experiment.lists._metrics
        for _ in range(100):
            experiment.step()
        experiment.check()
    finally:
        experiment.close()
