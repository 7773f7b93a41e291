"""Access control: no token on loopback (but only this machine's names in Host), the experiment's token for
every route beyond it — as a bearer header, a cookie set from ``?token=``, or not for reads with public_read."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, Served
from trialfleet.access import AccessPolicy, ensure_token, is_loopback, read_token, token_path
from trialfleet.server.app import create_app


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.1.2.3", False),
        ("myhost.example", False),
        ("localhost.evil.example", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_token_file_is_made_once_and_readable_by_its_owner_only(tmp_path: Path) -> None:
    assert read_token(tmp_path) is None
    token, created = ensure_token(tmp_path)
    assert created and len(token) >= 43  # 32 random bytes, base64url
    mode = stat.S_IMODE(token_path(tmp_path).stat().st_mode)
    assert mode == 0o600
    assert ensure_token(tmp_path) == (token, False)
    assert read_token(tmp_path) == token
    other, _ = ensure_token(tmp_path / "..")
    assert other != token  # one per experiment


def test_listening_address_decides_the_policy(tmp_path: Path) -> None:
    loopback = AccessPolicy.for_listening("127.0.0.1", tmp_path, "e1")
    assert loopback.token is None and loopback.loopback_only
    assert not token_path(tmp_path).exists()  # no token made for loopback
    wide = AccessPolicy.for_listening("0.0.0.0", tmp_path, "e1", public_read=True)
    assert wide.token == read_token(tmp_path) and wide.public_read and not wide.loopback_only
    assert wide.cookie_name == "trialfleet_token_e1"


_made: list[TestClient] = []


@pytest.fixture(autouse=True)
def _shut_down_clients() -> Iterator[None]:
    """Each app made by ``_client`` is shut down after its test (that closes its read connections)."""
    yield
    while _made:
        _made.pop().__exit__(None, None, None)


def _client(served: Served, policy: AccessPolicy) -> TestClient:
    client = TestClient(create_app(served.manager, access=policy), follow_redirects=False)
    _made.append(client.__enter__())
    return client


@pytest.mark.slow
def test_loopback_refuses_hosts_that_are_not_this_machine(populated: tuple[Served, TestClient]) -> None:
    served, _ = populated
    client = _client(served, AccessPolicy(loopback_only=True))
    for host in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "127.0.0.1"):
        assert client.get(f"{API}/check-status", headers={"host": host}).status_code == 200, host
    rebound = client.get(f"{API}/check-status", headers={"host": "attacker.example:8080"})
    assert rebound.status_code == 403 and "loopback" in rebound.json()["error"]
    assert client.delete(f"{API}/trial-jobs/rC", headers={"host": "attacker.example"}).status_code == 403


def _every_route(served: Served, token: str) -> list[tuple[str, str]]:
    """(method, path) of every route in the schema, with sample path parameters, plus the pages and logs."""
    schema = _client(served, AccessPolicy(token=token)).get(
        f"{API}/openapi.json", headers={"authorization": f"Bearer {token}"}
    )
    routes = [
        (
            method.upper(),
            path.replace("{trial_id}", "sA").replace("{filename}", "stdout").replace("{name}", "x"),
        )
        for path, item in schema.json()["paths"].items()
        for method in item
    ]
    routes = [(m, p.replace("{min_seq_id}", "0").replace("{max_seq_id}", "9")) for m, p in routes]
    return [*routes, ("GET", "/"), ("GET", "/webui/js/api.js"), ("GET", f"{API}/docs"), ("GET", "/oview")]


@pytest.mark.slow
def test_every_route_needs_the_token(populated: tuple[Served, TestClient]) -> None:
    served, _ = populated
    token = "t" * 43
    client = _client(served, AccessPolicy(token=token))
    routes = _every_route(served, token)
    assert len(routes) > 25
    for method, path in routes:
        response = client.request(method, path)
        assert response.status_code == 401, (method, path, response.status_code)
        assert method == "HEAD" or "access token" in response.json()["error"]  # a HEAD answer has no body
        assert response.headers["www-authenticate"].startswith("Bearer")
        wrong = client.request(method, path, headers={"authorization": "Bearer " + "u" * 43})
        assert wrong.status_code == 401, (method, path)
    good = {"authorization": f"Bearer {token}"}
    assert client.get(f"{API}/trial-jobs", headers=good).status_code == 200
    assert client.get(f"{API}/trial-jobs", headers={"authorization": f"bearer  {token}"}).status_code == 200
    assert client.delete(f"{API}/trial-jobs/nope", headers=good).status_code == 404  # past the check


@pytest.mark.slow
def test_public_read_opens_reads_only(populated: tuple[Served, TestClient]) -> None:
    served, _ = populated
    token = "p" * 43
    client = _client(served, AccessPolicy(token=token, public_read=True))
    assert client.get(f"{API}/trial-jobs").status_code == 200
    assert client.get("/").status_code == 200
    for method, path in [
        ("PUT", f"{API}/experiment?update_type=TRIAL_CONCURRENCY"),
        ("POST", f"{API}/trial-jobs"),
        ("DELETE", f"{API}/trial-jobs/rC"),
        ("POST", f"{API}/experiment/import-data"),
        ("DELETE", f"{API}/experiment"),
    ]:
        assert client.request(method, path, json={}).status_code == 401, (method, path)
    assert served.manager.status.value == "INITIALIZED"  # the DELETE did not stop it


@pytest.mark.slow
def test_first_page_load_with_token_sets_a_cookie(populated: tuple[Served, TestClient]) -> None:
    served, _ = populated
    token = "c" * 43
    policy = AccessPolicy(token=token, cookie_name="trialfleet_token_x")
    client = _client(served, policy)
    page = client.get(f"/?token={token}&view=trials", headers={"accept": "text/html,*/*"})
    assert page.status_code == 303
    assert page.headers["location"] == "/?view=trials"  # the token leaves the address bar
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"trialfleet_token_x={token};")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    # the browser now sends the cookie with every call the page makes
    browser = _client(served, policy)  # a client of its own: the first one keeps the cookie it was given

    def with_cookie(path: str, cookie: str) -> int:
        return browser.get(path, headers={"cookie": cookie}).status_code

    assert with_cookie("/", f"trialfleet_token_x={token}") == 200
    assert with_cookie(f"{API}/trial-jobs", f"other=1; trialfleet_token_x={token}") == 200
    assert with_cookie(f"{API}/trial-jobs", "trialfleet_token_x=no") == 401
    assert with_cookie(f"{API}/trial-jobs", f"trialfleet_token_y={token}") == 401
    assert with_cookie(f"{API}/trial-jobs", 'broken="; =') == 401
    # a script may pass ?token= too: it is answered directly
    assert browser.get(f"{API}/trial-jobs?token={token}").status_code == 200
    bad = browser.get("/?token=nope", headers={"accept": "text/html"})
    assert bad.status_code == 401


@pytest.mark.slow
def test_schema_names_the_bearer_scheme(populated: tuple[Served, TestClient]) -> None:
    served, open_client = populated
    assert "security" not in open_client.get(f"{API}/openapi.json").json()
    token = "s" * 43
    client = _client(served, AccessPolicy(token=token))
    schema = client.get(f"{API}/openapi.json", headers={"authorization": f"Bearer {token}"}).json()
    assert schema["components"]["securitySchemes"]["accessToken"] == {"type": "http", "scheme": "bearer"}
    assert schema["security"] == [{"accessToken": []}]
