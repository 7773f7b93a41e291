"""Schema parity: job protocols answered exactly as the real rest server's protocol middleware answers them.

``golden/protocol_expected.json`` holds what microsoft/pai's own ``middlewares/v2/protocol.js`` (with ajv 6,
ajv-merge-patch, js-yaml 3 and mustache 2.3) answered for each protocol of ``golden/protocol_cases.yaml``
(``golden/regenerate.js``): the 400 body with ajv's error list, the 500 of a YAML or template error, or the
entrypoint rendered for each task role.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.emulators.openpai import ClusterConfig, OpenPAIEmulator, VirtualCluster, protocol
from tests.emulators.openpai.errors import PaiError
from tests.emulators.openpai.exit_spec import generate
from tests.emulators.openpai.testing import submit

GOLDEN = Path(__file__).parent / "golden"
CASES = yaml.safe_load((GOLDEN / "protocol_cases.yaml").read_text())
EXPECTED = {item["title"]: item for item in json.loads((GOLDEN / "protocol_expected.json").read_text())}
REJECTED = [case for case in CASES if "status" in EXPECTED[case["title"]]]
ACCEPTED = [case for case in CASES if "entrypoints" in EXPECTED[case["title"]]]
UPSTREAM = sorted((GOLDEN / "upstream").glob("*.yaml"))


def test_the_golden_cases_cover_both_answers() -> None:
    assert len(CASES) == len(EXPECTED)
    assert len(REJECTED) > 40 and len(ACCEPTED) > 15


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """One cluster for every rejected protocol: none of them makes a job."""
    root = tmp_path_factory.mktemp("parity")
    with OpenPAIEmulator(storage_dir=root / "nfs", workdir=root / "cluster") as emulator:
        emulator.set_limits(submit_job_per_hour=0)
        with httpx.Client(base_url=emulator.api, headers=emulator.auth_headers()) as http:
            yield http


@pytest.mark.parametrize("case", REJECTED, ids=lambda case: case["title"])
def test_rejected_protocols_get_the_rest_servers_answer(shared: httpx.Client, case: dict[str, Any]) -> None:
    expected = EXPECTED[case["title"]]
    response = submit(shared, case["body"])
    assert response.status_code == expected["status"]
    body = response.json()
    if expected["status"] == 500 and expected["body"]["message"].startswith("unexpected end of the stream"):
        assert set(body) == {"message"}  # a YAML syntax error: js-yaml's wording is not PyYAML's
    else:
        assert body == {k: v for k, v in expected["body"].items() if v is not None}


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case["title"])
def test_accepted_protocols_render_the_same_entrypoints(case: dict[str, Any]) -> None:
    rendered = protocol.submit(case["body"])
    entrypoints = {role: spec["entrypoint"] for role, spec in rendered.task_roles.items()}
    assert entrypoints == EXPECTED[case["title"]]["entrypoints"]


def test_a_json_object_sent_as_application_json_fails_validation(client: httpx.Client) -> None:
    body = yaml.safe_load(next(c["body"] for c in CASES if c["title"] == "minimal valid protocol"))
    response = client.post("/jobs", json=body)
    assert response.status_code == 400
    assert response.json() == EXPECTED["what an application/json body becomes"]["body"]


def test_json_text_sent_as_text_yaml_is_accepted(client: httpx.Client) -> None:
    case = next(c for c in CASES if c["title"] == "JSON text")
    assert submit(client, case["body"]).status_code == 202
    assert client.get("/jobs/alice~j").json()["name"] == "j"


@pytest.fixture
def idle_pai(tmp_path: Path) -> Any:
    """A cluster without room for any pod: accepted jobs wait instead of running the examples' commands."""
    config = ClusterConfig(virtual_clusters=[VirtualCluster("default", cpu=0, memory=0, gpu=0)])
    with OpenPAIEmulator(config, storage_dir=tmp_path / "nfs", workdir=tmp_path / "cluster") as emulator:
        yield emulator


@pytest.mark.parametrize("example", UPSTREAM, ids=lambda path: path.stem)
def test_upstream_examples_are_accepted(idle_pai: OpenPAIEmulator, example: Path) -> None:
    with httpx.Client(base_url=idle_pai.api, headers=idle_pai.auth_headers()) as http:
        response = submit(http, example.read_text())
        assert response.status_code == 202, response.text
        name = yaml.safe_load(example.read_text())["name"]
        assert http.get(f"/jobs/alice~{name}").json()["jobStatus"]["state"] == "WAITING"


def test_a_known_bad_variant_of_the_hello_world_example_is_rejected(idle_pai: OpenPAIEmulator) -> None:
    hello = yaml.safe_load((GOLDEN / "upstream" / "hello-world-job.yaml").read_text())
    del hello["taskRoles"]["taskrole"]["resourcePerInstance"]["memoryMB"]
    with httpx.Client(base_url=idle_pai.api, headers=idle_pai.auth_headers()) as http:
        response = submit(http, yaml.safe_dump(hello))
    assert response.status_code == 400
    assert json.loads(response.json()["message"]) == [
        {
            "keyword": "required",
            "dataPath": ".taskRoles['taskrole'].resourcePerInstance",
            "schemaPath": "#/properties/taskRoles/patternProperties/%5E%5Ba-zA-Z_%5D%5Ba-zA-Z0-9_%5D*%24/properties/resourcePerInstance/required",
            "params": {"missingProperty": "memoryMB"},
            "message": "should have required property 'memoryMB'",
        }
    ]


def test_exit_specs_fall_back_to_256_and_minus_8000() -> None:
    assert generate(None) is None
    assert generate(-210)["phrase"] == "StopFrameworkRequested"  # type: ignore[index]
    assert generate(3) == {**generate(256), "code": 3}  # type: ignore[dict-item]
    assert generate(-5) == {**generate(-8000), "code": -5}  # type: ignore[dict-item]


def test_a_protocol_error_is_a_pai_error() -> None:
    with pytest.raises(PaiError) as caught:
        protocol.submit("name: [")
    assert caught.value.status == 500 and caught.value.code is None
