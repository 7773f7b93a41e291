"""The web UI's whole trial list kept encoded (``SummaryIndex``): after any sequence of changes a look gives
exactly what a full query would, in sequence order, and the same final metric keys."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trialfleet.manager.decisions import parameter_record
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.kept import SummaryIndex
from trialfleet.storage.queries import TrialQueries


def _full(queries: TrialQueries) -> list[dict[str, object]]:
    return queries.trial_summaries()


def _all_metric_keys(queries: TrialQueries) -> list[str]:
    """What the trials page listed before the index counted them: every trial's final metric, read by SQLite."""
    rows = queries.store._query(
        "SELECT DISTINCT j.key FROM trials, json_each(trials.final_data) j "
        "WHERE trials.final_data IS NOT NULL AND json_valid(trials.final_data) "
        "AND json_type(trials.final_data) = 'object' AND j.key != 'default' ORDER BY j.key",
        (),
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("max_changed", [2, 2000])
@pytest.mark.slow
def test_a_look_after_any_changes_equals_the_full_query(tmp_path: Path, seed: int, max_changed: int) -> None:
    store = ExperimentStore.for_experiment_dir(tmp_path)
    store.init_experiment("exp1", {"trialConcurrency": 2}, now=1.0)
    index = SummaryIndex(TrialQueries(ExperimentStore(store.path, readonly=True)), json.dumps, max_changed)
    full = TrialQueries(ExperimentStore(store.path, readonly=True))
    rng = random.Random(seed)
    trials: list[str] = []
    now = 2.0
    for step in range(120):
        now += 1
        waiting = [t for t in trials if store.trial(t).status is TrialStatus.WAITING]
        running = [t for t in trials if store.trial(t).status is TrialStatus.RUNNING]
        action = rng.choice(["add", "add", "submit", "metric", "final", "end", "retry", "look"])
        if action == "add" or not trials:
            trials.append(f"t{step:04d}")
            store.add_trial(trials[-1], parameter_record(None, {"x": rng.random()}), now=now)
        elif action == "submit" and waiting:
            store.mark_submitted(rng.choice(waiting), {"pid": step}, f"local:/{step}", now=now, running=True)
        elif action == "metric" and running:
            store.add_metrics([NewMetric(rng.choice(running), 0, "PERIODICAL", step, "0.5", now)], {})
        elif action == "final" and running:
            value = rng.random()
            keys = rng.sample(["loss", "acc", "学习率", 'a"b'], rng.randint(0, 2))
            data = {"default": value, **{key: rng.random() for key in keys}} if keys else value
            store.add_metrics(
                [NewMetric(rng.choice(running), 0, "FINAL", 0, json.dumps(data), now, final_value=value)], {}
            )
        elif action == "end" and running:
            store.end_trial(rng.choice(running), TrialStatus.SUCCEEDED, now=now, exit_code=0)
        elif action == "retry" and (ended := [t for t in trials if store.trial(t).status.is_terminal]):
            store.retry_trial(rng.choice(ended), now, "retry")  # its final result leaves it
        if action == "look" or step % 7 == 0:
            cursor, data = index.look()
            assert json.loads(data) == _full(full)
            assert cursor == full.cursor()
            assert full.metric_keys() == _all_metric_keys(full)  # as the store's triggers keep them
            finals = [t for t in _full(full) if t["final"] is not None]
            assert full.final_results() == {
                k: [t[k] for t in finals] for k in ("id", "seq", "status", "final")
            }
    assert json.loads(index.look()[1]) == _full(full)
