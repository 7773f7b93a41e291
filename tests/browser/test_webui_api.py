"""The web UI's JSON routes and assets, through the real app over a real store (no browser needed)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from webui_experiments import fill, final_of, new_experiment

from trialfleet.manager.decisions import parameter_record
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.server.app import create_app
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.queries import Cursor, TrialQueries, downsample
from trialfleet.webui import plotly_js_path

API = "/api/v1/trialfleet"
N = 12
STEPS = 5


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    _, experiment_dir = new_experiment(tmp_path)
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    statuses = [TrialStatus.SUCCEEDED] * (N - 2) + [TrialStatus.FAILED, TrialStatus.RUNNING]
    fill(store, N, STEPS, statuses)
    store.close()
    return experiment_dir


@pytest.fixture
def client(experiment: Path) -> Iterator[TestClient]:
    manager = ExperimentManager(experiment, readonly=True)
    with TestClient(create_app(manager)) as test_client:
        yield test_client
    manager.store.close()


def test_changes_sends_only_the_trials_changed_since_the_cursor(client: TestClient, experiment: Path) -> None:
    first = client.get(f"{API}/changes").json()
    assert first["reset"] is True and first["trials"] is None
    assert first["experiment"]["counts"] == {"SUCCEEDED": N - 2, "FAILED": 1, "RUNNING": 1}
    assert first["experiment"]["maxTrialNumber"] == 6 and first["experiment"]["optimizeMode"] == "maximize"
    quiet = client.get(f"{API}/changes", params={"cursor": first["cursor"]}).json()
    assert quiet["trials"] == [] and quiet["reset"] is False

    writer = ExperimentStore.for_experiment_dir(experiment)
    running = f"t{N - 1:05d}"
    writer.add_metrics([NewMetric(running, N - 1, "PERIODICAL", STEPS, "0.5", 1.0)], {})
    writer.end_trial(running, TrialStatus.SUCCEEDED, 2.0, exit_code=0)
    changed = client.get(f"{API}/changes", params={"cursor": quiet["cursor"]}).json()
    assert [(t["id"], t["status"]) for t in changed["trials"]] == [(running, "SUCCEEDED")]
    assert client.get(f"{API}/changes", params={"cursor": changed["cursor"]}).json()["trials"] == []


def test_too_many_changes_ask_the_client_to_reload(experiment: Path) -> None:
    queries = TrialQueries(ExperimentStore.for_experiment_dir(experiment, readonly=True))
    assert queries.changed_trial_ids(Cursor(0, 0), limit=N) is not None
    assert queries.changed_trial_ids(Cursor(0, 0), limit=N - 1) is None
    assert Cursor.decode(Cursor(7, 9).encode()) == Cursor(7, 9)
    assert Cursor.decode("garbage") is None


def test_trial_pages_are_filtered_searched_and_sorted_on_the_server(client: TestClient) -> None:
    page = client.get(f"{API}/trials", params={"limit": 5, "offset": 5, "order": "desc"}).json()
    assert page["total"] == N and [t["seq"] for t in page["trials"]] == [6, 5, 4, 3, 2]
    assert page["metricKeys"] == ["loss"] and page["trials"][0]["intermediateCount"] == STEPS

    failed = client.get(f"{API}/trials", params={"status": "FAILED,RUNNING"}).json()
    assert {t["status"] for t in failed["trials"]} == {"FAILED", "RUNNING"} and failed["total"] == 2
    assert client.get(f"{API}/trials", params={"q": "t00007"}).json()["total"] == 1
    assert client.get(f"{API}/trials", params={"q": "rmsprop"}).json()["total"] == N // 3
    assert client.get(f"{API}/trials", params={"q": "t0000_"}).json()["total"] == 0  # "_" is no wildcard

    best = client.get(f"{API}/trials", params={"sort": "final", "order": "desc", "limit": 1}).json()
    assert best["trials"][0]["final"] == max(final_of(i) for i in range(N - 2))
    by_loss = client.get(f"{API}/trials", params={"sort": "metric.loss", "limit": 1}).json()
    assert by_loss["trials"][0]["finalData"]["loss"] == round(1 - best["trials"][0]["final"], 4)
    by_lr = client.get(f"{API}/trials", params={"sort": "param.lr", "order": "desc", "limit": 1}).json()
    assert by_lr["trials"][0]["params"]["lr"] == max(0.001 + i / 1000 for i in range(N))
    unknown = client.get(f"{API}/trials", params={"sort": "param.x'; DROP TABLE trials"})
    assert unknown.status_code == 200 and unknown.json()["total"] == N  # a name, bound as a value
    refused = client.get(f"{API}/trials", params={"sort": "lr"})
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        "query.sort: cannot sort by 'lr': expected sequenceId, trialJobId, status, startTime, endTime, "
        "duration, finalMetric, final, platform, param.<parameter name> or metric.<final metric key>"
    )


def test_the_published_sort_pattern_accepts_exactly_the_keys_the_server_sorts_by(client: TestClient) -> None:
    schema = client.get("/api/v1/nni/openapi.json").json()
    (sort,) = [p for p in schema["paths"][f"{API}/trials"]["get"]["parameters"] if p["name"] == "sort"]
    pattern = re.compile(sort["schema"]["pattern"])
    for key in ["status", "finalMetric", "param.lr", "metric.a.b", "param.", "status\n", "lr", "param", ""]:
        answer = client.get(f"{API}/trials", params={"sort": key})
        assert (pattern.search(key) is not None) == (answer.status_code == 200), (key, answer.text)


def test_one_trial_and_its_metrics_after_an_id(client: TestClient) -> None:
    trial = client.get(f"{API}/trials/t00003").json()
    assert (
        trial["status"] == "SUCCEEDED"
        and trial["exitCode"] == 0
        and trial["attempts"][0]["status"] == "SUCCEEDED"
    )
    metrics = client.get(f"{API}/trials/t00003/metrics").json()["metrics"]
    assert [m["type"] for m in metrics] == ["PERIODICAL"] * STEPS + ["FINAL"]
    assert metrics[-1]["value"] == {"default": final_of(3), "loss": round(1 - final_of(3), 4)}
    after = client.get(f"{API}/trials/t00003/metrics", params={"after": metrics[2]["id"]}).json()["metrics"]
    assert after == metrics[3:]
    assert client.get(f"{API}/trials/nope").status_code == 404


def test_intermediate_series_are_filtered_and_downsampled(client: TestClient) -> None:
    answer = client.get(f"{API}/intermediate", params={"trials": 3}).json()
    assert answer["total"] == N and list(answer["series"]) == ["t00011", "t00010", "t00009"]
    last_step = {"step": STEPS - 1, "min": 0.52, "trials": 100}
    high = client.get(f"{API}/intermediate", params=last_step).json()
    assert high["total"] == sum(1 for i in range(N) if final_of(i) >= 0.52)
    small = client.get(f"{API}/intermediate", params={"points": 2, "trials": 1}).json()["series"]
    assert [p[0] for p in small["t00011"]] == [0, STEPS - 1]
    unknown = client.get(f"{API}/intermediate", params={"key": "no such key!", "trials": 1}).json()
    assert unknown == {"total": N, "series": {"t00011": []}}


#: names NNI accepts for parameters and metric keys, which SQL or a JSON path would take apart
NAMES = ["conv.kernel size", "学习率", 'a"b', "x'; DROP TABLE trials; --", "$.parameters", "1", "a\nb", ""]


@pytest.fixture
def named(tmp_path: Path) -> Iterator[TestClient]:
    """Three trials whose parameters, final metric keys and intermediate keys are :data:`NAMES`."""
    _, experiment_dir = new_experiment(tmp_path)
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    for i in range(3):
        trial_id = f"n{i}"
        store.add_trial(
            trial_id, parameter_record(i, {name: 10 * i + n for n, name in enumerate(NAMES)}), 1.0
        )
        store.mark_submitted(
            trial_id, {"trial_dir": f"/nonexistent/{trial_id}"}, "local:/x", 2.0, running=True
        )
        values = {name: 100 - 10 * i - n for n, name in enumerate(NAMES)}
        intermediate = NewMetric(trial_id, i, "PERIODICAL", 0, json.dumps(values), 3.0)
        final = NewMetric(trial_id, i, "FINAL", 0, json.dumps(values | {"default": i}), 4.0, final_value=i)
        store.add_metrics([intermediate, final], {})
        store.end_trial(trial_id, TrialStatus.SUCCEEDED, 5.0, exit_code=0)
    store.close()
    manager = ExperimentManager(experiment_dir, readonly=True)
    with TestClient(create_app(manager)) as test_client:
        yield test_client
    manager.store.close()


@pytest.mark.parametrize("index", range(len(NAMES)), ids=[repr(name) for name in NAMES])
def test_any_parameter_or_metric_name_sorts_and_charts(named: TestClient, index: int) -> None:
    name = NAMES[index]
    by_param = named.get(f"{API}/trials", params={"sort": f"param.{name}", "order": "desc"})
    assert by_param.status_code == 200, by_param.text
    assert [t["id"] for t in by_param.json()["trials"]] == ["n2", "n1", "n0"]
    assert [t["params"][name] for t in by_param.json()["trials"]] == [20 + index, 10 + index, index]
    by_metric = named.get(f"{API}/trials", params={"sort": f"metric.{name}"})
    assert by_metric.status_code == 200, by_metric.text
    assert [t["id"] for t in by_metric.json()["trials"]] == ["n2", "n1", "n0"]
    series = named.get(f"{API}/intermediate", params={"key": name, "min": 85 - index})
    assert series.status_code == 200, series.text
    assert series.json() == {"total": 2, "series": {"n1": [[0, 90 - index]], "n0": [[0, 100 - index]]}}


def test_downsample_keeps_at_most_the_limit_and_always_the_last_point() -> None:
    points = [[i, float(i)] for i in range(1000)]
    for limit in (2, 3, 10, 199, 200, 999):
        kept = downsample(points, limit)
        assert len(kept) <= limit and kept[0] == points[0] and kept[-1] == points[-1]
    assert downsample(points[:5], 10) == points[:5]


def test_page_assets_and_nni_paths_are_served(client: TestClient) -> None:
    index = client.get("/")
    assert index.status_code == 200 and re.search(r'src="webui/v-\w+/js/app.js"', index.text)
    assert client.get("/webui/js/app.js").headers["content-type"].startswith("text/javascript")
    plotly = client.get("/webui/vendor/plotly.min.js")
    assert plotly_js_path() is not None, "plotly is a dependency of the web UI: pip install 'plotly>=5'"
    assert plotly.status_code == 200 and len(plotly.content) == plotly_js_path().stat().st_size  # type: ignore[union-attr]
    redirect = client.get("/detail", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"] == "./#/trials"
    assert client.get("/api/v1/nni/check-status").status_code == 200  # NNI's routes are untouched


def test_the_ui_works_under_a_url_prefix(experiment: Path) -> None:
    manager = ExperimentManager(experiment, readonly=True)
    with TestClient(create_app(manager, url_prefix="nni")) as prefixed:
        assert prefixed.get("/nni/", follow_redirects=False).status_code == 200
        assert prefixed.get("/nni/webui/css/app.css").status_code == 200
        assert json.loads(prefixed.get(f"/nni{API}/experiment").text)["total"] == N


def test_search_words_match_trial_numbers_parameter_ranges_and_choices(client: TestClient) -> None:
    def found(q: str) -> list[int]:
        return sorted(
            t["seq"] for t in client.get(f"{API}/trials", params={"q": q, "limit": 100}).json()["trials"]
        )

    assert found("#7") == [7]
    assert found("lr:0.003..0.005") == [2, 3, 4]  # lr of trial i is 0.001 + i / 1000
    assert found("lr:..0.0025") == [0, 1]
    assert found("batch_size:32") == [i for i in range(N) if i % 3 == 1]
    assert found("optimizer:adam,rmsprop lr:0.006..") == [i for i in range(5, N) if i % 3]
    assert found("status:failed,running") == [N - 2, N - 1]
    assert found("lr:abc..def") == []  # not a range: a choice nothing equals


def test_a_page_row_carries_its_latest_intermediate_result(client: TestClient) -> None:
    row = client.get(f"{API}/trials", params={"q": "#4"}).json()["trials"][0]
    assert row["latest"] == final_of(4)  # fill() reports final_of(i) * (step + 1) / STEPS: the last equals it


def test_a_long_poll_answers_when_something_changed(client: TestClient, experiment: Path) -> None:
    import threading

    cursor = client.get(f"{API}/changes").json()["cursor"]
    writer = ExperimentStore.for_experiment_dir(experiment)
    running = f"t{N - 1:05d}"
    timer = threading.Timer(0.3, lambda: writer.end_trial(running, TrialStatus.SUCCEEDED, 2.0, exit_code=0))
    timer.start()
    answer = client.get(f"{API}/changes", params={"cursor": cursor, "wait": 8}).json()
    timer.join()
    assert [(t["id"], t["status"]) for t in answer["trials"]] == [(running, "SUCCEEDED")]
    quiet = client.get(f"{API}/changes", params={"cursor": answer["cursor"], "wait": 0.2}).json()
    assert quiet["trials"] == []


def _strict(text: str) -> object:
    """Parse as a browser's JSON.parse does: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_trial_that_reported_nan_or_infinity_still_gives_json_a_browser_parses(
    client: TestClient, experiment: Path
) -> None:
    writer = ExperimentStore.for_experiment_dir(experiment)
    running = f"t{N - 1:05d}"
    writer.add_metrics(
        [
            NewMetric(running, N - 1, "PERIODICAL", STEPS, "NaN", 1.0),
            NewMetric(
                running, N - 1, "FINAL", 0, '{"default": Infinity, "loss": NaN}', 2.0, final_value=None
            ),
        ],
        {},
    )
    writer.end_trial(running, TrialStatus.SUCCEEDED, 3.0, exit_code=0)
    for route, params in [
        ("/trials/all", {}),
        ("/trials", {"order": "desc", "limit": 1}),
        (f"/trials/{running}", {}),
        (f"/trials/{running}/metrics", {}),
        ("/intermediate", {"trials": 1}),
    ]:
        answer = client.get(f"{API}{route}", params=params)
        assert answer.status_code == 200, (route, answer.text)
        _strict(answer.text)
    (trial,) = [t for t in client.get(f"{API}/trials/all").json()["trials"] if t["id"] == running]
    assert trial["finalData"] == {"default": None, "loss": None}


def test_the_whole_list_is_fresh_after_each_change_and_revalidates_while_unchanged(
    client: TestClient, experiment: Path
) -> None:
    first = client.get(f"{API}/trials/all")
    assert [t["seq"] for t in first.json()["trials"]] == list(range(N))
    assert (
        client.get(f"{API}/trials/all", headers={"If-None-Match": first.headers["etag"]}).status_code == 304
    )

    writer = ExperimentStore.for_experiment_dir(experiment)
    running = f"t{N - 1:05d}"
    writer.end_trial(running, TrialStatus.SUCCEEDED, 3.0, exit_code=0)
    writer.add_trial("later", parameter_record(N, {"x": 1}), 4.0)
    changed = client.get(f"{API}/trials/all", headers={"If-None-Match": first.headers["etag"]})
    assert changed.status_code == 200 and changed.headers["etag"] != first.headers["etag"]
    trials = changed.json()["trials"]
    assert [t["seq"] for t in trials] == list(range(N + 1))
    assert trials[N - 1]["status"] == "SUCCEEDED" and trials[N]["id"] == "later"
    assert changed.json()["cursor"] == TrialQueries(writer).cursor().encode()
    page = client.get(f"{API}/trials", params={"order": "desc", "limit": 1}).json()
    assert page["total"] == N + 1 and page["trials"][0]["id"] == "later"
