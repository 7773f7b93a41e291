"""NNI's whole lists and the web UI's summaries encoded by SQLite (trialfleet/storage/nni_json.py,
trialfleet/storage/summary_json.py) are byte for byte the Python build's,
for ordinary trials (which SQLite encodes) and for values where SQLite would write otherwise (built the Python
way): non-ASCII and escaped characters, NaN stored by an older manager, times on a half millisecond."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from trialfleet.manager.decisions import parameter_record
from trialfleet.nni_view.reader import ExperimentReader
from trialfleet.server.encoding import encode_strict_json, encoded_list
from trialfleet.server.lists import WholeLists
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.kept import SummaryIndex
from trialfleet.storage.nni_json import metric_data_rows, trial_job_rows
from trialfleet.storage.queries import TrialQueries
from trialfleet.storage.summary_json import summary_rows
from trialfleet.training_services.trial_dir import STDERR_FILE

T0 = 1_700_000_000.0
ODD_TEXT = ["plain", 'a "quoted" \\ back', "é ü 漢", "tab\tnew\nline\x01\x7f", "\u2028", "/x/y//"]
ODD_VALUES = [0.1 + 0.2, 1e300, -0.0, 2**70, 1 / 3, 5e-324, "é", 'q"', [1, {"a": None}], True]
#: times whose milliseconds end in exactly .5 (Python rounds half to even), integers, and ordinary ones
ODD_TIMES = [T0 + 0.0005, T0 + 0.0015, T0 + 0.0025, 1_700_000_001, 0.0025, T0 + 0.123456789]


def _populate(path: Path, rng: random.Random, trials: int = 120) -> ExperimentStore:
    store = ExperimentStore(path)
    store.init_experiment("exp", {}, T0)
    for i in range(trials):
        trial_id = f"t{i}" if i % 7 else f"t{i}-{rng.choice(ODD_TEXT)}"
        params = {"x": rng.choice(ODD_VALUES), rng.choice(ODD_TEXT): rng.random()}
        store.add_trial(trial_id, parameter_record(i, params), rng.choice(ODD_TIMES))
        if i % 5 == 0:
            continue  # waiting
        if i % 9 == 0:
            store.set_waiting_reason(trial_id, rng.choice(ODD_TEXT), T0)
        location = rng.choice([f"local:/t/{trial_id}", "/x/y//", rng.choice(ODD_TEXT)])
        store.mark_submitted(
            trial_id,
            {"d": 1},
            location,
            rng.choice(ODD_TIMES),
            running=True,
            platform=rng.choice([None, "local"]),
        )
        for seq in range(rng.randrange(3)):
            data = json.dumps(rng.choice([rng.random(), {"default": 0.5, "é": 1}, 'x"\\y', float("nan")]))
            store.add_metrics([NewMetric(trial_id, i, "PERIODICAL", seq, data, rng.choice(ODD_TIMES))], {})
        if i % 3:
            value = rng.random()
            final = NewMetric(trial_id, i, "FINAL", 0, json.dumps(value), rng.choice(ODD_TIMES), value)
            store.add_metrics([final], {})
        ended = rng.choice([TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.USER_CANCELED, None])
        if ended is not None:
            store.end_trial(
                trial_id, ended, rng.choice(ODD_TIMES), exit_code=0, message=rng.choice([None, *ODD_TEXT])
            )
    return store


def _python_build(path: Path) -> tuple[bytes, dict[str | None, bytes]]:
    reader = ExperimentReader(ExperimentStore(path, readonly=True), path.parent)
    try:
        jobs = encoded_list(reader.trial_job_chunks()).data
        metrics = {kind: encoded_list(reader.metric_data_chunks(kind)).data for kind in (None, "FINAL")}
        return jobs, metrics
    finally:
        reader.store.close()


def test_sqlite_encodes_every_list_as_python_does(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = _populate(path, random.Random(3))
    with sqlite3.connect(path) as conn:  # as an older manager stored them, unchecked
        conn.execute("""UPDATE trials SET parameters = '{"parameters": {"x": NaN}}' WHERE sequence_id = 2""")
        conn.execute("""UPDATE metrics SET data = '{"é": NaN}' WHERE id = 3""")
        conn.execute("UPDATE metrics SET data = 'tab\t' WHERE id = 4")
    lists = WholeLists(path, tmp_path)
    try:
        jobs, metrics = _python_build(path)
        assert lists.trial_jobs() == jobs
        for kind in (None, "FINAL"):
            assert lists.metric_data(kind) == metrics[kind], kind
        # SQLite wrote most elements, Python the rest: both paths were taken
        encoded = [row[2] for row in trial_job_rows(store, STDERR_FILE)]
        assert 0 < sum(e is None for e in encoded) < len(encoded)
        records = [row[1] for row in metric_data_rows(store, None, 0, None)]
        assert 0 < sum(e is None for e in records) < len(records)
    finally:
        lists.close()
        store.close()


def test_kept_lists_stay_equal_to_the_python_build_as_trials_change(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = _populate(path, random.Random(5), trials=40)
    lists = WholeLists(path, tmp_path)
    try:
        lists.trial_jobs(), lists.metric_data()
        for trial in store.trials(status=TrialStatus.RUNNING)[:5]:
            store.add_metrics(
                [NewMetric(trial.id, 0, "FINAL", 0, '"é"', T0 + 0.0035, 1.0, trial.attempt)], {}
            )
            store.end_trial(trial.id, TrialStatus.SUCCEEDED, T0 + 0.0045, exit_code=0)
        store.add_trial("new", parameter_record(99, {"é": 1}), T0 + 0.0005)
        jobs, metrics = _python_build(path)
        assert lists.trial_jobs() == jobs
        assert lists.metric_data() == metrics[None]
    finally:
        lists.close()
        store.close()


def test_sqlite_encodes_the_web_uis_summaries_as_python_does(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = _populate(path, random.Random(7))
    with sqlite3.connect(path) as conn:  # as an older manager stored them, unchecked
        conn.execute("""UPDATE trials SET parameters = '{"parameters": {"x": NaN}}' WHERE sequence_id = 2""")
        conn.execute("UPDATE trials SET final_data = 'NaN', final_value = 0.1 + 0.2 WHERE sequence_id = 3")
        conn.execute("UPDATE trials SET final_data = '[1e-7]', final_value = 1e-7 WHERE sequence_id = 6")
        conn.execute("UPDATE trials SET final_value = 1e20 WHERE sequence_id = 8")
    queries = TrialQueries(ExperimentStore(path, readonly=True))
    index = SummaryIndex(TrialQueries(ExperimentStore(path, readonly=True)), encode_strict_json)
    try:
        python = "[" + ",".join(encode_strict_json(s) for s in queries.trial_summaries()) + "]"
        assert index.look()[1] == python.encode()
        encoded = [row[2] for row in summary_rows(queries.store.read_rows, None)]
        assert 0 < sum(e is None for e in encoded) < len(encoded)
        store.add_trial("new", parameter_record(99, {"é": 1}), T0 + 0.0005)
        store.end_trial("t1", TrialStatus.FAILED, T0 + 0.0045, exit_code=1, message="é")
        python = "[" + ",".join(encode_strict_json(s) for s in queries.trial_summaries()) + "]"
        assert index.look()[1] == python.encode()
    finally:
        queries.close()
        store.close()
