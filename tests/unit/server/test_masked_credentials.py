"""A credential written into the trial command (``AWS_SECRET_ACCESS_KEY=… python3 train.py``) is masked in
the database (and its WAL), on NNI's ``/experiment``, the web UI's API and the CLI, as the remote password is;
the trials still get it (issue 44, item 6)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from tests.unit.server.conftest import API, make_config, wait_for
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.server.app import create_app

SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCY"
TRIAL = (
    "import os, nni\nnni.get_next_parameter()\nnni.report_final_result(float(os.environ['AWS_SECRET_ACCESS_KEY'] == '"
    + SECRET
    + "'))\n"
)


@pytest.mark.slow
async def test_a_credential_in_the_command_is_masked_where_shown_and_stored(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        trial_command=f"env AWS_SECRET_ACCESS_KEY={SECRET} {sys.executable} check.py",
        max_trial_number=1,
        trial_concurrency=1,
    )
    (Path(config.training_services[0].trial_code_directory) / "check.py").write_text(TRIAL)
    _, experiment_dir = create_experiment(config)
    manager = ExperimentManager(experiment_dir)
    await manager.start()
    loop_task = asyncio.create_task(manager.run())
    app = create_app(manager)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client,
    ):

        async def succeeded() -> bool:
            jobs = (await client.get(f"{API}/trial-jobs")).json()
            return bool(jobs) and jobs[0]["status"] == "SUCCEEDED"

        await wait_for(succeeded, 60)
        jobs = (await client.get(f"{API}/trial-jobs")).json()
        assert '"1.0"' in jobs[0]["finalMetricData"][0]["data"]  # the trial had the clear value
        for path in (f"{API}/experiment", "/api/v1/trialfleet/experiment"):
            text = (await client.get(path)).text
            assert SECRET not in text and "AWS_SECRET_ACCESS_KEY=******" in text, (path, text[:300])
    manager.request_stop()
    await asyncio.wait_for(loop_task, 60)
    manager.store.close()
    for stored in (experiment_dir / "db").iterdir():
        assert SECRET.encode() not in stored.read_bytes(), stored.name
    assert SECRET in (experiment_dir / "secrets.json").read_text()
