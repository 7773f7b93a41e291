"""A page of the trials table is answered while the whole lists (``/trials/all``, NNI's ``/trial-jobs``) are
being built: it reads neither of them (at 100,000 trials a first build takes seconds)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import Served
from trialfleet.storage.kept import KeptTrials

WHOLE = ("/api/v1/trialfleet/trials/all", "/api/v1/nni/trial-jobs")


def test_a_page_answers_while_the_whole_lists_are_built(
    populated: tuple[Served, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client = populated
    building = threading.Semaphore(0)
    release = threading.Event()
    refresh = KeptTrials.refresh

    def held_refresh(self: KeptTrials) -> Any:
        building.release()
        assert release.wait(120), "the whole-list builds were never released"
        return refresh(self)

    monkeypatch.setattr(KeptTrials, "refresh", held_refresh)
    answers: dict[str, Any] = {}
    whole = [threading.Thread(target=lambda r=r: answers.update({r: client.get(r)})) for r in WHOLE]
    for thread in whole:
        thread.start()
    for _ in WHOLE:
        assert building.acquire(timeout=120)  # both builds are under way, and held
    pages = threading.Thread(
        target=lambda: answers.update(
            page=client.get("/api/v1/trialfleet/trials?offset=0&limit=20"),
            nni_page=client.get("/api/v1/nni/trial-jobs?offset=0&limit=2"),
        )
    )
    pages.start()
    pages.join(60)  # (a bound for the failure only: answered at once, they take milliseconds)
    answered = not pages.is_alive()
    release.set()
    for thread in [*whole, pages]:
        thread.join()
    assert answered, "a page waited for a whole-list build"
    page, nni_page = answers["page"], answers["nni_page"]
    assert page.status_code == 200 and page.json()["total"] == 4
    assert [t["id"] for t in page.json()["trials"]] == ["sA", "fB", "rC", "wD"]
    assert page.json()["metricKeys"] == ["loss"]
    assert [j["trialJobId"] for j in nni_page.json()] == ["sA", "fB"]
    assert nni_page.headers["X-Total-Count"] == "4"
    assert all(answers[route].status_code == 200 for route in WHOLE)
