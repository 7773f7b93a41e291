"""Helpers for tests that drive the OpenPAI emulator with plain HTTP (httpx), as an OpenPAI client does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import yaml

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED")


def protocol(
    name: str,
    commands: list[str],
    *,
    role: str = "main",
    instances: int = 1,
    cpu: int = 1,
    memory_mb: int = 1024,
    gpu: int = 0,
    **top: Any,
) -> str:
    """A job protocol with one task role, as YAML text; ``top`` adds or replaces top-level keys."""
    spec: dict[str, Any] = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "jobRetryCount": 0,
        "prerequisites": [{"name": "image", "type": "dockerimage", "uri": "python:3.11"}],
        "taskRoles": {
            role: {
                "instances": instances,
                "dockerImage": "image",
                "resourcePerInstance": {"cpu": cpu, "memoryMB": memory_mb, "gpu": gpu},
                "commands": commands,
            }
        },
    }
    spec.update(top)
    return yaml.safe_dump(spec, sort_keys=False)


def submit(client: httpx.Client, text: str) -> httpx.Response:
    return client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.01) -> Any:
    """Poll until ``condition()`` returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def watch(
    client: httpx.Client, name: str, until: tuple[str, ...] = TERMINAL_STATES, timeout: float = 30.0
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """Poll a job's detail; returns the (state, subState) pairs seen in order and the last detail."""
    seen: list[tuple[str, str]] = []
    last: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal last
        response = client.get(f"/jobs/{name}")
        assert response.status_code == 200, response.text
        last = response.json()
        pair = (last["jobStatus"]["state"], last["jobStatus"]["subState"])
        if not seen or seen[-1] != pair:
            seen.append(pair)
        return pair[0] in until

    wait_for(reached, timeout)
    return seen, last


def read_log(
    client: httpx.Client, detail: dict[str, Any], name: str, role: str = "main", index: int = 0
) -> str:
    """A task's log (``stdout``, ``stderr``, ``all``) through the log-list URL and the log manager's URI."""
    task = detail["taskRoles"][role]["taskStatuses"][index]
    listing = client.get(task["containerLog"].removeprefix("/api/v2")).json()
    uri = next(location["uri"] for location in listing["locations"] if location["name"] == name)
    return httpx.get(str(client.base_url).split("/rest-server")[0] + uri).text


__all__ = ["TERMINAL_STATES", "protocol", "read_log", "submit", "wait_for", "watch"]
