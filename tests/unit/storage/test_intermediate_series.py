"""The web UI's intermediate series (``TrialQueries.intermediate``): the trials a selection picks, and how many
match, equal what a plain reading of every trial's intermediate results gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trialfleet.manager.decisions import parameter_record
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.queries import SeriesSelection, TrialQueries

SELECTIONS = [
    SeriesSelection(),
    SeriesSelection(trials=3),
    SeriesSelection(step=2),
    SeriesSelection(step=1, low=0.3),
    SeriesSelection(low=0.2, high=0.6, trials=5),
    SeriesSelection(key="loss", high=0.5),
    SeriesSelection(key="no such key", low=0.0),
]


def _value(data: object, key: str) -> float | None:
    if key == "default" and isinstance(data, (int, float)):
        return float(data)
    if isinstance(data, dict) and isinstance(data.get(key), (int, float)):
        return float(data[key])
    return None


def _expected(results: dict[str, list[tuple[int, object]]], order: list[str], selection: SeriesSelection):
    def matches(step: int, data: object) -> bool:
        if selection.step is not None and step != selection.step:
            return False
        value = _value(data, selection.key)
        if selection.low is not None and (value is None or value < selection.low):
            return False
        return not (selection.high is not None and (value is None or value > selection.high))

    picked = [t for t in order if any(matches(step, data) for step, data in results.get(t, []))]
    return len(picked), list(reversed(picked))[: selection.trials]


@pytest.mark.parametrize("seed", range(3))
def test_the_selected_trials_are_the_ones_a_plain_reading_finds(tmp_path: Path, seed: int) -> None:
    store = ExperimentStore.for_experiment_dir(tmp_path)
    store.init_experiment("exp1", {"trialConcurrency": 2}, now=1.0)
    rng = random.Random(seed)
    results: dict[str, list[tuple[int, object]]] = {}
    order = []
    for i in range(40):
        trial_id = f"t{i:03d}"
        order.append(trial_id)
        store.add_trial(trial_id, parameter_record(i, {"x": i}), now=2.0 + i)
        store.mark_submitted(trial_id, {"pid": i}, f"local:/{i}", now=2.0 + i, running=True)
        metrics = []
        for step in range(rng.randint(0, 4)):  # some trials report no intermediate result at all
            data: object = (
                rng.random() if rng.random() < 0.6 else {"default": rng.random(), "loss": rng.random()}
            )
            metrics.append(NewMetric(trial_id, i, "PERIODICAL", step, json.dumps(data), 3.0 + i))
            results.setdefault(trial_id, []).append((step, data))
        if rng.random() < 0.5:  # a final result is never part of a series
            metrics.append(NewMetric(trial_id, i, "FINAL", 0, "0.99", 4.0 + i, final_value=0.99))
        store.add_metrics(metrics, {})
    queries = TrialQueries(ExperimentStore(store.path, readonly=True))
    for selection in SELECTIONS:
        total, series = queries.intermediate(selection)
        expected_total, expected_ids = _expected(results, order, selection)
        assert (total, list(series)) == (expected_total, expected_ids), selection
        for trial_id, points in series.items():
            assert points == [
                [s, _value(d, selection.key)]
                for s, d in results[trial_id]
                if _value(d, selection.key) is not None
            ]
