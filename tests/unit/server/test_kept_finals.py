"""The Overview's final results (``/finals``) kept between commits: built again only when a trial's summary
changed (a status, a final result, a retry), never for an intermediate result."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from tests.unit.server.conftest import Served
from trialfleet.manager.decisions import parameter_record
from trialfleet.server.encoding import encode_strict_json
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.kept import KeptFinals
from trialfleet.storage.queries import TrialQueries

T0 = 1_700_000_000.0


def test_final_results_are_built_again_only_when_a_summary_changed(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path / "db")
    store.init_experiment("exp", {}, T0)
    for i in range(3):
        store.add_trial(f"t{i}", parameter_record(i, {"x": i}), T0)
        store.mark_submitted(f"t{i}", {"d": 1}, f"local:/t{i}", T0, running=True)
    queries = TrialQueries(ExperimentStore(tmp_path / "db", readonly=True))
    finals = KeptFinals(queries, encode_strict_json)

    def current() -> bytes:
        return encode_strict_json(queries.final_results()).encode()

    try:
        assert finals.look() == current() and finals.builds == 1
        store.add_metrics([NewMetric("t0", 0, "PERIODICAL", 0, "0.5", T0 + 1)], {})
        assert finals.look() == current() and finals.builds == 1  # an intermediate result: kept
        store.add_metrics([NewMetric("t0", 0, "FINAL", 0, "0.75", T0 + 2, final_value=0.75)], {})
        # a final result is a SUCCEEDED trial's (sql.final_sql): not shown while the trial runs
        assert finals.look() == current() and json.loads(current())["final"] == []
        builds = finals.builds
        store.end_trial("t0", TrialStatus.SUCCEEDED, T0 + 3, exit_code=0)
        shown = json.loads(finals.look())
        assert (shown["final"], shown["status"]) == ([0.75], ["SUCCEEDED"]) and finals.builds == builds + 1
        assert finals.look() == current() and finals.builds == builds + 1  # nothing changed
        store.retry_trial("t0", T0 + 4, "again")  # its final result leaves it
        assert json.loads(finals.look())["final"] == [] and finals.builds == builds + 2
        assert finals.look() == current()
    finally:
        queries.close()
        store.close()


def test_the_finals_route_answers_the_kept_columns(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    queries = TrialQueries(ExperimentStore.for_experiment_dir(served.experiment_dir, readonly=True))
    try:
        assert client.get("/api/v1/trialfleet/finals").json() == queries.final_results()
        served.manager.store.add_metrics([NewMetric("rC", 2, "FINAL", 0, "0.25", T0, final_value=0.25)], {})
        answer = client.get("/api/v1/trialfleet/finals").json()
        assert answer == queries.final_results() and 0.25 in answer["final"]
    finally:
        queries.close()
