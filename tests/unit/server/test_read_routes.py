"""NNI's GET payloads, checked field by field against a store with known content."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, T0, Served
from trialfleet.server.app import create_app
from trialfleet.server.encoding import encoded_list


def test_trial_jobs_have_nni_shape(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    response = client.get(f"{API}/trial-jobs")
    assert response.status_code == 200
    jobs = {job["trialJobId"]: job for job in response.json()}
    assert [job["trialJobId"] for job in response.json()] == ["sA", "fB", "rC", "wD"]
    succeeded = jobs["sA"]
    assert succeeded["status"] == "SUCCEEDED"
    assert succeeded["sequenceId"] == 0
    assert succeeded["startTime"] == int((T0 + 1) * 1000)
    assert succeeded["endTime"] == int((T0 + 4) * 1000)
    assert succeeded["logPath"].startswith("local:")
    # hyperParameters: a list of ParameterRecord JSON strings, compact as NNI's JSON.stringify writes them
    assert succeeded["hyperParameters"] == [
        '{"parameter_id":0,"parameter_source":"algorithm","parameters":{"x":0.25},"parameter_index":0}'
    ]
    (final,) = succeeded["finalMetricData"]
    assert final["parameterId"] == "0"
    assert final["type"] == "FINAL"
    assert json.loads(json.loads(final["data"])) == {"default": 0.25, "loss": 0.75}
    assert "stderrPath" not in succeeded


def test_final_metric_data_only_for_succeeded_and_stderr_path_only_for_failed(
    populated: tuple[Served, TestClient],
) -> None:
    _, client = populated
    jobs = {job["trialJobId"]: job for job in client.get(f"{API}/trial-jobs").json()}
    assert "finalMetricData" not in jobs["fB"]  # it reported a FINAL metric, but FAILED
    assert jobs["fB"]["stderrPath"].endswith("/trial.stderr")
    assert jobs["fB"]["message"] == "exit code 3"
    assert "endTime" not in jobs["rC"]
    waiting = jobs["wD"]
    assert waiting["status"] == "WAITING"
    assert waiting["startTime"] == int((T0 + 11) * 1000)  # the submit time until it runs, as NNI
    assert "logPath" not in waiting


@pytest.mark.slow
def test_status_filter_and_paging(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    assert [j["trialJobId"] for j in client.get(f"{API}/trial-jobs?status=RUNNING").json()] == ["rC"]
    page = client.get(f"{API}/trial-jobs?offset=1&limit=2")
    assert [j["trialJobId"] for j in page.json()] == ["fB", "rC"]
    assert page.headers["X-Total-Count"] == "4"
    best = client.get(f"{API}/trial-jobs?sort=finalMetric&order=desc&limit=1").json()
    assert best[0]["trialJobId"] == "sA"  # fB's 0.5 is no final result (it FAILED): trials without one sort last
    (first,) = client.get(f"{API}/trial-jobs?limit=1").json()  # a page builds the same payload
    assert json.loads(json.loads(first["finalMetricData"][0]["data"]))["default"] == 0.25
    newest = client.get(f"{API}/trial-jobs?sort=sequenceId&order=desc&limit=1").json()
    assert newest[0]["trialJobId"] == "wD"
    assert client.get(f"{API}/trial-jobs?status=BOGUS").status_code == 422
    assert client.get(f"{API}/trial-jobs?limit=0").status_code == 422


def test_single_trial_and_unknown_trial(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    job = client.get(f"{API}/trial-jobs/sA").json()
    assert job["trialJobId"] == "sA" and len(job["finalMetricData"]) == 1
    missing = client.get(f"{API}/trial-jobs/nope")
    assert missing.status_code == 404
    assert "nope" in missing.json()["error"]
    assert client.get(f"{API}/metric-data/nope").status_code == 404


def test_metric_data_is_double_encoded(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    records = client.get(f"{API}/metric-data").json()
    assert len(records) == 4
    first = records[0]
    assert set(first) == {"timestamp", "trialJobId", "parameterId", "type", "sequence", "data"}
    assert first["timestamp"] == int((T0 + 2) * 1000)
    assert first["data"] == '"0.1"'
    assert json.loads(json.loads(first["data"])) == 0.1
    finals = client.get(f"{API}/metric-data?type=FINAL").json()
    assert {r["trialJobId"] for r in finals} == {"sA", "fB"}
    assert [r["type"] for r in client.get(f"{API}/metric-data/sA").json()] == ["PERIODICAL", "FINAL"]
    ranged = client.get(f"{API}/metric-data-range/1/2").json()
    assert {r["trialJobId"] for r in ranged} == {"fB", "rC"}
    latest = client.get(f"{API}/metric-data-latest/").json()
    assert sorted((r["trialJobId"], r["type"]) for r in latest) == [
        ("fB", "FINAL"),
        ("rC", "PERIODICAL"),
        ("sA", "FINAL"),
        ("sA", "PERIODICAL"),
    ]


def test_export_statistics_and_profile(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    assert client.get(f"{API}/export-data").json() == [
        {"parameter": {"x": 0.25}, "value": '{"default": 0.25, "loss": 0.75}', "trialJobId": "sA"}
    ]
    statistics = {
        s["trialJobStatus"]: s["trialJobNumber"] for s in client.get(f"{API}/job-statistics").json()
    }
    assert statistics == {"SUCCEEDED": 1, "FAILED": 1, "RUNNING": 1, "WAITING": 1}
    profile = client.get(f"{API}/experiment").json()
    assert profile["id"] == served.manager.experiment_id
    assert profile["nextSequenceId"] == 4
    assert profile["logDir"] == str(served.experiment_dir)
    assert profile["params"]["trialConcurrency"] == 2
    assert profile["params"]["searchSpace"] == {"x": {"_type": "uniform", "_value": [0, 1]}}
    assert isinstance(profile["startTime"], int) and isinstance(profile["execDuration"], int)


def test_status_version_manifest(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    assert client.get(f"{API}/check-status").json() == {"status": "INITIALIZED", "errors": []}
    served.manager.fail("the tuner crashed")
    assert client.get(f"{API}/check-status").json() == {"status": "ERROR", "errors": ["the tuner crashed"]}
    assert isinstance(client.get(f"{API}/version").json(), str)
    infos = client.get(f"{API}/experiments-info").json()
    assert [i["id"] for i in infos] == [served.manager.experiment_id]
    metadata = client.get(f"{API}/experiment-metadata").json()
    assert metadata["id"] == served.manager.experiment_id and metadata["platform"] == "local"
    assert client.get(f"{API}/experiment/imported-data").json() == []
    assert client.get(f"{API}/tensorboard-tasks").json() == []


@pytest.mark.slow
def test_trial_files_and_logs(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    # no training service (the manager is not started): files come straight from the trial directory
    response = client.get(f"{API}/trial-file/sA/stdout")
    assert response.status_code == 200 and response.text == "hello stdout\n"
    assert response.headers["content-type"].startswith("text/plain")
    assert client.get(f"{API}/trial-file/sA/stderr").text == "stderr is empty."
    assert client.get(f"{API}/trial-file/sA/nothing.txt").status_code == 404
    assert client.get(f"{API}/trial-file/sA/%2E%2E").status_code == 404  # a directory
    backslash = client.get(f"{API}/trial-file/sA/..%5Csecret")
    assert backslash.status_code == 422 and "filename" in backslash.json()["error"]
    (served.experiment_dir / "trials" / "secret").write_text("not for you")
    escaped = client.get(f"{API}/trial-file/sA/%2E%2E%2Fsecret")
    assert escaped.status_code in (400, 404) and "not for you" not in escaped.text
    assert client.get(f"{API}/trial-file/wD/stdout").status_code == 404  # not started
    assert client.get(f"{API}/trial-file/zz/stdout").status_code == 404
    (served.experiment_dir / "log" / "manager.log").write_text("manager says hi\n")
    assert client.get("/logs/nnimanager.log").text == "manager says hi\n"
    assert client.get("/logs/manager.log").text == "manager says hi\n"
    assert client.get("/logs/missing.log").status_code == 404
    assert client.get("/logs/%2E%2E").status_code == 404


def test_unknown_route_and_openapi(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    missing = client.get(f"{API}/no-such-route")
    assert missing.status_code == 404 and "error" in missing.json()
    schema = client.get(f"{API}/openapi.json").json()
    assert f"{API}/trial-jobs" in schema["paths"]
    assert f"{API}/metric-data/{{trial_id}}" in schema["paths"]


@pytest.mark.slow
def test_url_prefix(populated: tuple[Served, TestClient]) -> None:
    served, _ = populated
    with TestClient(create_app(served.manager, url_prefix="/team/")) as client:
        assert client.get(f"/team{API}/check-status").json()["status"] == "INITIALIZED"
        assert client.get(f"{API}/check-status").status_code == 404
        assert client.get(f"/team{API}/openapi.json").status_code == 200


def test_whole_lists_encoded_chunk_by_chunk_equal_the_lists(populated: tuple[Served, TestClient]) -> None:
    """``/trial-jobs`` and ``/metric-data`` are encoded a chunk of records at a time; at any chunk size the
    body is the list the reader builds in one piece."""
    _, client = populated
    reader = client.app.state.trialfleet.reader  # type: ignore[attr-defined]
    for size in (1, 3, 4, 1000):
        assert json.loads(encoded_list(reader.trial_job_chunks(size)).data) == reader.trial_jobs()
        for kind in (None, "FINAL", "PERIODICAL"):
            chunks = reader.metric_data_chunks(kind, size)
            assert json.loads(encoded_list(chunks).data) == reader.metric_data(type=kind)
    assert client.get(f"{API}/trial-jobs").json() == reader.trial_jobs()
    assert client.get(f"{API}/metric-data").json() == reader.metric_data()
    assert json.loads(encoded_list(iter([[], []])).data) == []


def test_a_final_result_is_the_same_on_every_route(populated: tuple[Served, TestClient]) -> None:
    """fB reported a FINAL metric and then FAILED: NNI's rule gives it no final result, and no route or page may
    show one (the web UI's table showed its default metric while /trial-jobs/<id> had none; issue 46, item 4)."""
    _, client = populated
    assert [m["type"] for m in client.get(f"{API}/metric-data/fB").json()] == ["FINAL"]  # kept as metric data
    assert "finalMetricData" not in client.get(f"{API}/trial-jobs/fB").json()
    assert "finalMetricData" in client.get(f"{API}/trial-jobs/sA").json()
    ui = "/api/v1/trialfleet"
    page = {t["id"]: t for t in client.get(f"{ui}/trials?limit=50").json()["trials"]}
    every = {t["id"]: t for t in client.get(f"{ui}/trials/all").json()["trials"]}
    single = client.get(f"{ui}/trials/fB").json()
    for shown in (page["fB"], every["fB"], single):
        assert (shown["final"], shown["finalData"]) == (None, None)
    assert (page["sA"]["final"], every["sA"]["final"]) == (0.25, 0.25)
    assert client.get(f"{ui}/finals").json()["id"] == ["sA"]
    best_first = [t["id"] for t in client.get(f"{ui}/trials?sort=finalMetric&order=desc").json()["trials"]]
    assert best_first[0] == "sA"
    nni_sorted = client.get(f"{API}/trial-jobs?sort=finalMetric&order=desc&limit=1").json()
    assert [job["trialJobId"] for job in nni_sorted] == ["sA"]
