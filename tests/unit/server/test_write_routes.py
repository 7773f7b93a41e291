"""NNI's commands against a manager running real trials, and the refusals: bad bodies, views, unknown trials."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, Served, wait_for
from trialfleet.storage import ExperimentStore


async def _statuses(client: httpx.AsyncClient) -> dict[str, str]:
    return {job["trialJobId"]: job["status"] for job in (await client.get(f"{API}/trial-jobs")).json()}


@pytest.mark.slow
async def test_kill_a_running_trial(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running

    async def two_running() -> bool:
        return list((await _statuses(client)).values()).count("RUNNING") == 2

    await wait_for(two_running)
    victim = next(t for t, s in (await _statuses(client)).items() if s == "RUNNING")
    response = await client.delete(f"{API}/trial-jobs/{victim}")
    assert response.status_code == 200 and response.content == b""

    async def canceled() -> bool:
        return (await _statuses(client))[victim] == "USER_CANCELED"

    await wait_for(canceled)
    assert (await client.delete(f"{API}/trial-jobs/nope")).status_code == 404


@pytest.mark.slow
async def test_trial_file_through_the_training_service(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running

    async def printed() -> bool:
        jobs = (await client.get(f"{API}/trial-jobs?status=RUNNING")).json()
        if not jobs:
            return False
        return "hello from" in (await client.get(f"{API}/trial-file/{jobs[0]['trialJobId']}/stdout")).text

    await wait_for(printed)
    job = (await client.get(f"{API}/trial-jobs?status=RUNNING")).json()[0]
    stderr = await client.get(f"{API}/trial-file/{job['trialJobId']}/stderr")
    assert stderr.text == "to stderr\n"


@pytest.mark.slow
async def test_update_profile_like_nnictl(running: tuple[Served, httpx.AsyncClient]) -> None:
    served, client = running
    profile = (await client.get(f"{API}/experiment")).json()
    profile["params"]["trialConcurrency"] = 3
    response = await client.put(f"{API}/experiment?update_type=TRIAL_CONCURRENCY", json=profile)
    assert response.status_code == 200
    profile["params"]["maxExperimentDuration"] = "2h"
    assert (
        await client.put(f"{API}/experiment?update_type=MAX_EXEC_DURATION", json=profile)
    ).status_code == 200
    profile["params"]["maxTrialNumber"] = 7
    assert (await client.put(f"{API}/experiment?update_type=MAX_TRIAL_NUM", json=profile)).status_code == 200
    space = {"x": {"_type": "choice", "_value": [0.1, 0.2]}}
    profile["params"]["searchSpace"] = space
    assert (await client.put(f"{API}/experiment?update_type=SEARCH_SPACE", json=profile)).status_code == 200
    params = (await client.get(f"{API}/experiment")).json()["params"]
    assert params["trialConcurrency"] == 3
    assert params["maxTrialNumber"] == 7
    assert params["searchSpace"] == space
    assert served.manager.config.max_experiment_duration == 7200
    stored = ExperimentStore.for_experiment_dir(served.experiment_dir, readonly=True)
    assert stored.experiment().config["trialConcurrency"] == 3
    stored.close()


@pytest.mark.slow
async def test_bad_profile_updates_are_4xx(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running
    profile = (await client.get(f"{API}/experiment")).json()
    bad = json.loads(json.dumps(profile))
    bad["params"]["trialConcurrency"] = "many"
    response = await client.put(f"{API}/experiment?update_type=TRIAL_CONCURRENCY", json=bad)
    assert response.status_code == 422
    assert "trialConcurrency" in response.json()["error"]
    bad["params"]["searchSpace"] = {"x": {"_type": "uniform", "_value": "wrong"}}
    response = await client.put(f"{API}/experiment?update_type=SEARCH_SPACE", json=bad)
    assert response.status_code == 422 and "searchSpace" in response.json()["error"]
    bad["params"]["maxExperimentDuration"] = "soon"
    response = await client.put(f"{API}/experiment?update_type=MAX_EXEC_DURATION", json=bad)
    assert response.status_code == 422 and "maxExperimentDuration" in response.json()["error"]
    assert (await client.put(f"{API}/experiment?update_type=NOPE", json=profile)).status_code == 422
    assert (await client.put(f"{API}/experiment", json=profile)).status_code == 422  # update_type missing
    assert (await client.put(f"{API}/experiment?update_type=TRIAL_CONCURRENCY", json=[1])).status_code == 422
    malformed = await client.put(
        f"{API}/experiment?update_type=TRIAL_CONCURRENCY",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert malformed.status_code == 400 and "not valid JSON" in malformed.json()["error"]


LEGACY_KEYS = {"maxTrialNum": "maxTrialNumber", "maxExecDuration": "maxExperimentDuration"}


@pytest.mark.slow
async def test_profile_updates_past_their_bounds_are_refused_and_change_nothing(
    running: tuple[Served, httpx.AsyncClient],
) -> None:
    served, client = running
    profile = (await client.get(f"{API}/experiment")).json()
    before = json.loads(json.dumps(profile["params"]))
    for update_type, key, value, bound in [
        ("TRIAL_CONCURRENCY", "trialConcurrency", 2**70, "at most 10000"),
        ("MAX_TRIAL_NUM", "maxTrialNumber", 2**63, "at most 1000000"),
        ("MAX_TRIAL_NUM", "maxTrialNum", 1_000_001, "at most 1000000"),
        ("MAX_EXEC_DURATION", "maxExperimentDuration", 1e308, "at most 3650d (ten years)"),
        ("MAX_EXEC_DURATION", "maxExecDuration", "3651d", "at most 3650d (ten years)"),
    ]:
        bad = json.loads(json.dumps(profile))
        canonical = LEGACY_KEYS.get(key, key)
        bad["params"].pop(canonical, None)  # NNI's legacy key is read only when the current one is absent
        bad["params"][key] = value
        response = await client.put(f"{API}/experiment?update_type={update_type}", json=bad)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert f"{canonical}: expected a" in error and bound in error, error
    assert (await client.get(f"{API}/experiment")).json()["params"] == before
    assert served.manager.config.trial_concurrency == 2
    stored = ExperimentStore.for_experiment_dir(served.experiment_dir, readonly=True)
    assert stored.experiment().config["trialConcurrency"] == 2
    assert stored.events(event="CONFIG_UPDATED") == []
    stored.close()


@pytest.mark.slow
async def test_customized_trial_and_import(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running
    response = await client.post(f"{API}/trial-jobs", json={"x": 0.42})
    assert response.status_code == 200
    sequence_id = response.json()["sequenceId"]
    jobs = (await client.get(f"{API}/trial-jobs")).json()
    (custom,) = [j for j in jobs if j["sequenceId"] == sequence_id]
    assert json.loads(custom["hyperParameters"][0])["parameter_source"] == "customized"
    assert (await client.post(f"{API}/trial-jobs", json=[1, 2])).status_code == 422
    records = [{"parameter": {"x": 0.3}, "value": 0.9}, {"parameter": {"x": 0.4}, "value": {"default": 0.8}}]
    assert (await client.post(f"{API}/experiment/import-data", json=records)).status_code == 200
    imported = (await client.get(f"{API}/experiment/imported-data")).json()
    assert [json.loads(i) for i in imported] == [records]
    bad = await client.post(f"{API}/experiment/import-data", json=[{"parameter": {"x": 1}}, {"value": 1}])
    assert bad.status_code == 422
    assert "[0].value: missing" in bad.json()["error"] and "[1].parameter" in bad.json()["error"]


@pytest.mark.slow
async def test_body_over_one_mebibyte_is_413(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running
    huge = {"x": "a" * (1024 * 1024 + 1)}
    response = await client.post(f"{API}/trial-jobs", json=huge)
    assert response.status_code == 413 and "larger than" in response.json()["error"]

    async def chunks():  # no Content-Length: the bytes are counted as they arrive
        for _ in range(3):
            yield b"x" * (512 * 1024)

    streamed = await client.post(
        f"{API}/trial-jobs", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413


@pytest.mark.slow
async def test_delete_experiment_stops_the_manager(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running

    async def two_running() -> bool:
        return list((await _statuses(client)).values()).count("RUNNING") == 2

    await wait_for(two_running)
    assert (await client.delete(f"{API}/experiment")).status_code == 200

    async def stopped() -> bool:
        return (await client.get(f"{API}/check-status")).json()["status"] == "STOPPED"

    await wait_for(stopped)
    assert set((await _statuses(client)).values()) == {"SYS_CANCELED"}


@pytest.mark.slow
def test_view_refuses_changes(viewed: tuple[Served, TestClient]) -> None:
    _, client = viewed
    assert client.get(f"{API}/check-status").json()["status"] == "VIEWED"
    profile = client.get(f"{API}/experiment").json()
    refusals = [
        client.put(f"{API}/experiment?update_type=TRIAL_CONCURRENCY", json=profile),
        client.post(f"{API}/trial-jobs", json={"x": 0.1}),
        client.delete(f"{API}/trial-jobs/rC"),
        client.post(f"{API}/experiment/import-data", json=[{"parameter": {"x": 1}, "value": 1}]),
    ]
    for response in refusals:
        assert response.status_code == 403
        assert "read-only" in response.json()["error"]
    assert client.get(f"{API}/trial-file/sA/stdout").text == "hello stdout\n"
    assert client.post(f"{API}/experiment", json={}).status_code == 409


async def test_customized_trial_is_checked_as_a_tuners_parameters(
    running: tuple[Served, httpx.AsyncClient],
) -> None:
    """A stored request must not break the lists afterwards (issue 44): parameters nested 900 deep, NaN,
    outside the search space or with a field left empty are refused before anything is stored."""
    _, client = running
    before = len((await client.get(f"{API}/trial-jobs")).json())
    deep = '{"x": ' + "[" * 900 + "0.5" + "]" * 900 + "}"
    refused = [
        (deep, "nested more than 32 levels"),
        ('{"x": NaN}', "x: NaN is not a finite number"),
        ('{"x": [1, -Infinity]}', "x.1: -Infinity is not a finite number"),
        ('{"x": 5}', "x: 5 is not in the search space (uniform [0, 1])"),
        ('{"x": ""}', 'x: "" is not in the search space'),
        ('{"y": 0.5}', "x: missing"),
        ("{}", "x: missing"),
    ]
    for body, words in refused:
        response = await client.post(
            f"{API}/trial-jobs", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (body[:40], response.text)
        assert words in response.json()["error"], (body[:40], response.json())
    assert len((await client.get(f"{API}/trial-jobs")).json()) == before
    assert (await client.post(f"{API}/trial-jobs", json={"x": 1.0})).status_code == 200


@pytest.mark.slow
async def test_customized_trial_respects_max_trial_number(running: tuple[Served, httpx.AsyncClient]) -> None:
    """NNI refuses a customized trial once maxTrialNumber trials were submitted (issue 46, item 3)."""
    served, client = running
    limit = served.manager.config.max_trial_number
    assert limit is not None
    added = [await client.post(f"{API}/trial-jobs", json={"x": 0.5}) for _ in range(limit)]
    assert [r.status_code for r in added].count(409) >= 1, [r.text for r in added]
    refusal = next(r for r in added if r.status_code == 409)
    assert "maxTrialNumber" in refusal.json()["error"]
    assert len((await client.get(f"{API}/trial-jobs")).json()) == limit


@pytest.mark.slow
async def test_the_dialog_s_check_says_what_a_customized_trial_would_meet_and_a_raise_adds_it(
    running: tuple[Served, httpx.AsyncClient],
) -> None:
    """``/trial-check`` answers by the manager's own rule and writes nothing; ``raiseMaxTrialNumber`` grows the
    limit by the one trial (issue 46, item 3: the dialog offers to raise max trials)."""
    served, client = running
    check = "/api/v1/trialfleet/trial-check"
    empty = (await client.post(check, json={"x": ""})).json()["problem"]
    assert empty["what"] == "parameters" and empty["message"].startswith("x: ")
    limit = served.manager.config.max_trial_number
    assert limit is not None
    while (await client.post(check, json={"x": 0.5})).json()["problem"] is None:
        assert (await client.post(f"{API}/trial-jobs", json={"x": 0.5})).status_code == 200
    full = (await client.post(check, json={"x": 0.5})).json()["problem"]
    assert (full["what"], full["maxTrialNumber"]) == ("maxTrialNumber", limit)
    raised = await client.post(f"{API}/trial-jobs?raiseMaxTrialNumber=true", json={"x": 0.5})
    assert raised.status_code == 200, raised.text
    assert served.manager.config.max_trial_number == limit + 1
    assert len((await client.get(f"{API}/trial-jobs")).json()) == limit + 1


@pytest.mark.slow
async def test_a_large_legitimate_import_is_accepted(running: tuple[Served, httpx.AsyncClient]) -> None:
    _, client = running
    records = [
        {"parameter": {"x": i / 300_000, "batch": 32}, "value": {"default": 0.5}} for i in range(300_000)
    ]
    body = json.dumps(records).encode()
    assert len(body) > 13_000_000  # the size of NNI's export of a large experiment
    response = await client.post(
        f"{API}/experiment/import-data",
        content=body,
        headers={"content-type": "application/json"},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    imported = (await client.get(f"{API}/experiment/imported-data", timeout=300)).json()
    assert sum(len(json.loads(i)) for i in imported) == 300_000
