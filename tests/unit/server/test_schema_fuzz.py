"""Every route of the OpenAPI schema, fuzzed by schemathesis in-process against a manager running real trials:
no 5xx, and every answer (status, content type, body) conforms to the schema the server publishes.

``DELETE /experiment`` stops the manager, so it runs last, once; until then no probe sends DELETE to a
path that does not declare it (schemathesis probes undeclared methods with every method it knows).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from tests.unit.server.conftest import API, make_config, populate
from tests.unit.server.live_manager import manager_in_thread, on_loop
from trialfleet.manager.launcher import create_experiment
from trialfleet.server.app import create_app
from trialfleet.storage import ExperimentStore

pytestmark = pytest.mark.slow  # hypothesis/schemathesis: the fast tier (-m 'not slow') leaves it out

EXAMPLES = int(os.environ.get("TRIALFLEET_FUZZ_EXAMPLES", "50"))


@pytest.fixture(scope="module", autouse=True)
def trialfleet_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALFLEET_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def api_schema(trialfleet_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The schema of a manager whose store holds finished, failed, running and waiting trials, while its
    own trials (held by a ``hold`` file) keep running."""
    tmp = tmp_path_factory.mktemp("fuzzed")
    config = make_config(tmp, max_trial_number=6)
    (Path(config.training_services[0].trial_code_directory) / "hold").touch()
    _, experiment_dir = create_experiment(config)
    trial_dir = experiment_dir / "trials" / "sA"
    trial_dir.mkdir(parents=True)
    (trial_dir / "trial.stdout").write_text("hello stdout\n")
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    populate(store, trial_dir)
    store.close()
    with manager_in_thread(experiment_dir) as (manager, loop):
        app = on_loop(create_app(manager), loop)
        schema = schemathesis.openapi.from_asgi(f"{API}/openapi.json", app)
        coverage = schema.config.phases.coverage
        coverage.unexpected_methods = coverage.unexpected_methods - {"delete"}
        yield schema


schema = schemathesis.pytest.from_fixture("api_schema")

#: valid by the schema, yet refused for a reason a schema cannot state (every other route, the web UI's
#: ``sort`` and ``key`` included, must accept whatever its schema allows)
STATEFUL_VALIDITY = {
    f"PUT {API}/experiment": "params must hold the key update_type names",
    f"POST {API}/tensorboard": "trials must name started trials of the experiment",
    f"POST {API}/trial-jobs": "parameters must be in the search space, and maxTrialNumber not yet reached",
}


@schema.exclude(method="DELETE", path=f"{API}/experiment").parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_every_route_conforms(case: Any) -> None:
    excluded = [positive_data_acceptance] if case.operation.label in STATEFUL_VALIDITY else []
    case.call_and_validate(excluded_checks=excluded)


def test_stop_route_conforms_and_the_rest_still_answers(api_schema: Any) -> None:
    stop = api_schema[f"{API}/experiment"]["DELETE"]
    stop.Case().call_and_validate()
    status = api_schema[f"{API}/check-status"]["GET"]
    status.Case().call_and_validate()
