"""Parameters an older trialfleet stored unchecked (900 levels deep, NaN) must not break any list (issue 44):
the rows are written into the real database as the old manager wrote them, then every list is read."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, Served
from trialfleet.cli.output import short_json
from trialfleet.json_values import finite_copy, non_finite

DEEP = "[" * 900 + "0.5" + "]" * 900


def _store_unchecked(served: Served) -> None:
    with sqlite3.connect(served.experiment_dir / "db" / "trialfleet.sqlite") as conn:
        conn.execute(
            "UPDATE trials SET parameters = ? WHERE id = 'fB'",
            ('{"parameter_id": 1, "parameter_source": "customized", "parameters": {"x": NaN}}',),
        )
        conn.execute(
            "UPDATE trials SET parameters = ? WHERE id = 'rC'",
            ('{"parameter_id": 2, "parameter_source": "customized", "parameters": {"x": ' + DEEP + "}}",),
        )


@pytest.mark.slow
def test_lists_read_unchecked_parameters(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    _store_unchecked(served)
    for path in (
        "/api/v1/trialfleet/trials",
        "/api/v1/trialfleet/trials?sort=param.x",
        "/api/v1/trialfleet/trials?sort=param.x&order=desc",
        "/api/v1/trialfleet/trials/all",
        "/api/v1/trialfleet/trials/fB",
        f"{API}/trial-jobs",
    ):
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
    page = client.get("/api/v1/trialfleet/trials?sort=param.x").json()
    assert {t["id"] for t in page["trials"]} == {"sA", "fB", "rC", "wD"}


def test_printers_and_walks_are_bounded() -> None:
    deep: object = 0.5
    for _ in range(5000):
        deep = [deep]
    cell = short_json({"x": deep, "y": float("nan")})
    assert len(cell) < 200 and "…" in cell
    assert non_finite({"a": [1, {"b": float("inf")}]}) == ("a.1.b", float("inf"))
    copied = finite_copy({"x": deep, "n": [float("nan")]})
    assert copied["n"] == [None]
