"""A manager started by ``trialfleet create``, over real HTTP: every route that takes input refuses bad input
with a 4xx and ``{"error": message}``; beyond loopback (``--host 0.0.0.0``) every request needs the
experiment's access token, which the CLI and the Python API find by themselves.

Requests go to 127.0.0.1 only, also when the manager listens on every interface.
"""

from __future__ import annotations

import contextlib
import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until, write_experiment
from trialfleet.access import token_path
from trialfleet.server.http_errors import LARGE_BODY_ROUTES

API = "/api/v1/nni"
MEBIBYTE = 1024 * 1024


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[tuple[Cli, httpx.Client]]:
    """A running experiment (trials held) on loopback, and an HTTP client for it."""
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    cli.ok("create", "-c", str(write_experiment(tmp_path, hold=True)), "-p", str(port))
    with httpx.Client(base_url=f"http://127.0.0.1:{port}{API}", timeout=30) as http:
        wait_until(lambda: len(http.get("/trial-jobs?status=RUNNING").json()) > 0, "a running trial")
        yield cli, http
    cli.ok("stop", "--all")


def _refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, (response.request.method, response.request.url, response.text)
    message = response.json()["error"]
    assert isinstance(message, str) and message.strip()
    for word in words:
        assert word in message, (word, message)


JSON_BODY_ROUTES = [
    ("PUT", "/experiment?update_type=TRIAL_CONCURRENCY"),
    ("POST", "/trial-jobs"),
    ("POST", "/experiment/import-data"),
]


@pytest.mark.parametrize(("method", "path"), JSON_BODY_ROUTES)
def test_bad_bodies_are_refused_with_a_message(
    loopback: tuple[Cli, httpx.Client], method: str, path: str
) -> None:
    _, http = loopback
    json_type = {"content-type": "application/json"}
    _refused(http.request(method, path, content=b"{not json", headers=json_type), 400, "not valid JSON")
    _refused(http.request(method, path, content=b"", headers=json_type), 422, "body")
    _refused(http.request(method, path, content=b'"\xff\xfe"', headers=json_type), 400)
    _refused(http.request(method, path, content=b"null", headers=json_type), 422)
    _refused(http.request(method, path, content=b"x=1", headers={"content-type": "text/plain"}), 415, "JSON")
    form = {"content-type": "application/x-www-form-urlencoded"}
    _refused(http.request(method, path, content=b"x=1", headers=form), 415, "application/json")
    _refused(http.request(method, path, content=b"{}"), 415)  # no content type at all
    # the route's own limit: an import of a large experiment's records may be up to 64 MiB, every other body 1 MiB
    limit = LARGE_BODY_ROUTES.get(path, MEBIBYTE)
    huge = b'{"x": "' + b"a" * limit + b'"}'
    _refused(http.request(method, path, content=huge, headers=json_type), 413, "larger than")
    deep = b"[" * 100_000 + b"]" * 100_000  # nesting that would exhaust a recursive parser
    _refused(http.request(method, path, content=deep, headers=json_type), 400)


def test_wrong_shapes_and_unknown_ids(loopback: tuple[Cli, httpx.Client]) -> None:
    _, http = loopback
    profile = http.get("/experiment").json()
    _refused(http.put("/experiment?update_type=NOPE", json=profile), 422, "update_type")
    _refused(http.put("/experiment", json=profile), 422, "update_type")
    _refused(http.put("/experiment?update_type=MAX_TRIAL_NUM", json={"params": {}}), 422, "maxTrialNumber")
    _refused(http.put("/experiment?update_type=TRIAL_CONCURRENCY", json={"nope": 1}), 422, "params")
    _refused(http.post("/trial-jobs", json=[1]), 422)
    _refused(http.post("/experiment/import-data", json={"parameter": {}}), 422, "list")
    _refused(http.post("/experiment/import-data", json=[{"parameter": {"x": 1}, "value": "high"}]), 422)
    for unknown in ("/trial-jobs/nope", "/metric-data/nope", "/trial-file/nope/stdout"):
        _refused(http.get(unknown), 404, "nope")
    _refused(http.delete("/trial-jobs/nope"), 404, "nope")
    _refused(http.get("/trial-jobs?status=BOGUS"), 422, "status")
    _refused(http.get("/trial-jobs?limit=-1"), 422, "limit")
    _refused(http.get("/metric-data-range/0/99999999999999999999"), 422, "max_seq_id")
    _refused(http.get("/trial-file/x/a%5Cb"), 422, "filename")
    _refused(http.patch("/experiment"), 405)
    assert set(http.patch("/experiment").headers["allow"].split(", ")) >= {"GET", "PUT", "POST", "DELETE"}
    assert http.get("/check-status").json()["status"] == "RUNNING"  # none of it hurt the experiment


def test_listening_beyond_loopback_needs_the_token(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    out = cli.ok(
        "create", "-c", str(write_experiment(tmp_path, hold=True)), "-p", str(port), "--host", "0.0.0.0"
    )
    match = re.search(r"Access token \(shown once; kept in (\S+)\): (\S+)", out)
    assert match, out
    token_file, token = Path(match.group(1)), match.group(2)
    assert token_file.read_text().strip() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert f"/?token={token}" in out
    base = f"http://127.0.0.1:{port}"
    bearer = {"authorization": f"Bearer {token}"}
    _refused(httpx.get(f"{base}{API}/check-status", timeout=30), 401, "access token")
    _refused(httpx.delete(f"{base}{API}/experiment", timeout=30), 401)
    _refused(httpx.get(f"{base}{API}/trial-jobs", headers={"authorization": "Bearer guess"}, timeout=30), 401)
    assert httpx.get(f"{base}{API}/check-status", headers=bearer, timeout=30).status_code == 200
    # the web UI: one page load with the token, then the cookie
    with httpx.Client(base_url=base, timeout=30) as browser:
        first = browser.get(f"/?token={token}", headers={"accept": "text/html"}, follow_redirects=True)
        assert first.status_code == 200 and "<html" in first.text.lower()
        assert browser.get(f"{API}/trial-jobs").status_code == 200
    # the CLI reads the token from the experiment directory
    wait_until(lambda: len(cli.json("trial", "ls", "--json")) > 0, "trials listed through the CLI")
    cli.ok("update", "concurrency", "--value", "3")
    assert cli.json("experiment", "status")["status"] == "RUNNING"
    cli.ok("stop", "--all")

    experiment_id = json.loads(cli.ok("experiment", "list", "--all", "--json"))[0]["id"]
    view_port = free_port()
    out = cli.ok("view", experiment_id, "-p", str(view_port), "--host", "0.0.0.0", "--public-read")
    assert token not in out and str(token_path(token_file.parent)) in out  # printed once, by create
    viewed = f"http://127.0.0.1:{view_port}{API}"
    assert httpx.get(f"{viewed}/trial-jobs", timeout=30).status_code == 200  # reads are public
    _refused(httpx.delete(f"{viewed}/experiment", timeout=30), 401)  # stopping the viewer is not
    assert cli.json("experiment", "status", experiment_id)["status"] == "VIEWED"
    cli.ok("stop", "--all")


def test_python_api_beyond_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trialfleet.config import load_config
    from trialfleet.experiment import Experiment, RunMode

    cli = Cli.in_dir(tmp_path)
    for name in ("TRIALFLEET_HOME", "TRIALFLEET_CONFIG_DIR"):
        monkeypatch.setenv(name, cli.env[name])
    config = load_config(write_experiment(tmp_path, hold=False)).config
    experiment = Experiment(config)
    experiment.host = "0.0.0.0"
    port = free_port()
    experiment.start(port, run_mode=RunMode.Background)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}{API}/check-status", timeout=30).status_code == 401
        wait_until(lambda: experiment.get_status() == "DONE", "the experiment to finish")
        assert len(experiment.list_trial_jobs()) == 6
        assert Experiment.connect(port).get_status() == "DONE"
    finally:
        experiment.stop()


def test_a_slow_reader_does_not_hold_stop_hostage(tmp_path: Path) -> None:
    """Issue 44, item 2: a client that stops reading a 100 MB trial log keeps no manager (port, lock) alive
    after ``stop``: the stream ends when the experiment stops and the server's graceful shutdown is bounded."""
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    cli.ok("create", "-c", str(write_experiment(tmp_path, hold=True)), "-p", str(port))
    base = f"http://127.0.0.1:{port}{API}"
    with httpx.Client(base_url=base, timeout=30) as http:
        wait_until(lambda: len(http.get("/trial-jobs?status=RUNNING").json()) > 0, "a running trial")
        job = http.get("/trial-jobs?status=RUNNING").json()[0]
    trial_dir = Path(job["logPath"].split(":", 1)[1])
    size = 100 * MEBIBYTE
    with open(trial_dir / "big.log", "wb") as f:
        f.truncate(size)
    with httpx.Client(timeout=60) as reader, reader.stream("GET", f"{base}/trial-file/{job['trialJobId']}/big.log") as r:
        chunks = r.iter_raw()
        got = len(next(chunks))  # then it reads nothing while the experiment stops
        stopped = cli.run("stop", "--all", timeout=300)
        assert stopped.returncode == 0, stopped.stderr
        wait_until(lambda: not _managers_of(tmp_path), "the manager to exit while the reader still waits")
        with contextlib.suppress(httpx.HTTPError):
            for chunk in chunks:
                got += len(chunk)
    assert got < size


def _managers_of(root: Path) -> list[tuple[int, str]]:
    return [p for p in processes_mentioning(str(root)) if "trialfleet.manager" in p[1]]
