"""Every NNI built-in tuner and assessor name, from a config file through the real manager and the local platform
to a finished experiment; and every NNI name trialfleet does not offer, refused when the config is loaded.

Each trial is a real process running the nni shim: it reads its parameters (``TRIAL_BUDGET`` for the advisors,
checkpoint directories for PBT), reports intermediate results and a final result. Experiments are small (a few
trials of a 2-parameter space) so each case takes a few seconds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from trialfleet.config import ExperimentConfig, load_config
from trialfleet.errors import AlgorithmError
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.startup import preflight
from trialfleet.status import ExperimentStatus, TrialStatus

STEP_LIMIT = 3000  # manager loop iterations before a run is declared stuck (a failure message, not a timing)

TRIAL = textwrap.dedent(
    """
    import os, time, nni
    STEPS, PAUSE = {steps}, {pause}
    params = nni.get_next_parameter()
    steps = int(params.get("TRIAL_BUDGET", STEPS))
    start = 0.0
    if "load_checkpoint_dir" in params:  # PBT: continue from the checkpoint handed over, if there is one
        path = os.path.join(params["load_checkpoint_dir"], "state.txt")
        start = float(open(path).read()) if os.path.exists(path) else 0.0
    quality = 1.0 - (params["x"] - 0.3) ** 2 - (0.1 if params["k"] == 2 else 0.0)
    for step in range(1, steps + 1):
        nni.report_intermediate_result(quality * step / (step + 1) + start)
        time.sleep(PAUSE)
    nni.report_final_result(quality + start)
    if "save_checkpoint_dir" in params:
        os.makedirs(params["save_checkpoint_dir"], exist_ok=True)
        open(os.path.join(params["save_checkpoint_dir"], "state.txt"), "w").write(str(quality + start))
    """
)
SPACE = {"x": {"_type": "uniform", "_value": [0, 1]}, "k": {"_type": "choice", "_value": [1, 2, 3]}}
BATCH_SPACE = {"sets": {"_type": "choice", "_value": [{"x": x / 10, "k": 1} for x in range(4)]}}
QUICK_GP = {"cold_start_num": 3, "selection_num_warm_up": 500, "selection_num_starting_points": 3}

# name -> (tuner block, extra experiment fields)
TUNERS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "TPE": (
        {"name": "TPE", "classArgs": {"optimize_mode": "maximize", "tpe_args": {"n_startup_jobs": 3}}},
        {},
    ),
    "Random": ({"name": "Random", "classArgs": {"seed": 1}}, {}),
    "Anneal": ({"name": "Anneal", "classArgs": {"optimize_mode": "maximize"}}, {}),
    "Evolution": ({"name": "Evolution", "classArgs": {"population_size": 3}}, {}),
    "Batch": ({"name": "BatchTuner"}, {"searchSpace": BATCH_SPACE, "maxTrialNumber": 10}),
    "GridSearch": (
        {"name": "GridSearch"},
        {"searchSpace": {"x": SPACE["k"], "k": SPACE["k"]}, "maxTrialNumber": 20},
    ),
    "GP": ({"name": "GPTuner", "classArgs": QUICK_GP}, {}),
    "Metis": ({"name": "Metis", "classArgs": {"cold_start_num": 3, "selection_num_starting_points": 30}}, {}),
    "SMAC": ({"name": "SMAC", "classArgs": {"seed": 1}}, {}),
    "PBT": (
        {"name": "PBTTuner", "classArgs": {"population_size": 3}},
        {"trialConcurrency": 1, "maxTrialNumber": 7},
    ),
    "RegularizedEvolutionTuner": (
        {"name": "RegularizedEvolutionTuner", "classArgs": {"population_size": 3, "sample_size": 2}},
        {},
    ),
    # parallelism (2 at a time): bracket s=0, or s=1 again, may start before round 1 has ended
    "Hyperband": ({"name": "Hyperband", "classArgs": {"R": 3, "eta": 3}}, {"maxTrialNumber": 9}),
    "Hyperband-serial": (
        {"name": "Hyperband", "classArgs": {"R": 3, "eta": 3, "exec_mode": "serial"}},
        {"trialConcurrency": 1},
    ),
    "BOHB": (
        {"name": "BOHB", "classArgs": {"max_budget": 3, "min_points_in_model": 2}},
        {"trialConcurrency": 1},
    ),
}
ASSESSORS = {
    "Medianstop": {"name": "Medianstop", "classArgs": {"start_step": 2}},
    "Curvefitting": {"name": "Curvefitting", "classArgs": {"epoch_num": 10, "start_step": 4}},
}
REFUSED = {
    "TPE_legacy": "name TPE to use that one",
    "NetworkMorphism": "use TPE, Evolution or RegularizedEvolutionTuner",
    "DNGO": "use GP, Metis or SMAC",
    "PPO": "use Evolution or RegularizedEvolutionTuner",
}


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NNI_CHECKPOINT_DIRECTORY", str(tmp_path / "checkpoints"))


def write_config(tmp_path: Path, steps: int = 4, pause: float = 0.0, **fields: Any) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(TRIAL.replace("{steps}", str(steps)).replace("{pause}", str(pause)))
    config = {
        "searchSpace": SPACE,
        "trialCommand": f"{sys.executable} trial.py",
        "trialCodeDirectory": str(code),
        "trialConcurrency": 2,
        "maxTrialNumber": 6,
        "experimentWorkingDirectory": str(tmp_path / "exps"),
        "trainingService": {"platform": "local"},
        **fields,
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def run_to_done(config: ExperimentConfig) -> ExperimentManager:
    preflight(config)
    _, experiment_dir = create_experiment(config)
    manager = ExperimentManager(experiment_dir)
    await manager.start()
    try:
        for _ in range(STEP_LIMIT):
            await manager.step()
            if manager.status in (ExperimentStatus.DONE, ExperimentStatus.ERROR):
                break
            await asyncio.sleep(0.02)
        assert manager.status is ExperimentStatus.DONE, (
            manager.status,
            manager.error,
            manager.store.trial_counts(),
        )
    finally:
        manager.request_stop()
        await manager.run()
    return manager


def parameters_of(manager: ExperimentManager) -> list[dict[str, Any]]:
    return [trial.hyper_parameters for trial in manager.store.trials()]


@pytest.mark.parametrize("case", sorted(TUNERS))
async def test_tuner_runs_an_experiment_to_done(tmp_path: Path, case: str) -> None:
    tuner, fields = TUNERS[case]
    if case == "SMAC" and importlib.util.find_spec("smac") is None:
        with pytest.raises(AlgorithmError, match=r"needs the Python package\(s\) smac .*trialfleet\[tuners\]"):
            preflight(load_config(write_config(tmp_path, tuner=tuner)).config)
        pytest.fail(
            "SMAC3 is not installed (the tuners extra): its refusal is checked, the experiment did not run"
        )
    manager = await run_to_done(load_config(write_config(tmp_path, tuner=tuner, **fields)).config)
    trials = manager.store.trials()
    assert trials and all(t.status is TrialStatus.SUCCEEDED for t in trials)
    assert len(trials) == (
        4 if case == "Batch" else 9 if case == "GridSearch" else fields.get("maxTrialNumber", 6)
    )
    check_parameters(case, parameters_of(manager), fields.get("searchSpace", SPACE))


def check_parameters(case: str, proposals: list[dict[str, Any]], space: dict[str, Any]) -> None:
    if case == "Batch":
        assert proposals == space["sets"]["_value"]
        return
    for params in proposals:
        assert set(params) - {"TRIAL_BUDGET", "load_checkpoint_dir", "save_checkpoint_dir"} == set(space)
    if case.startswith("Hyperband") or case == "BOHB":
        # R = max_budget = 3, eta = 3: bracket s=1 runs 3 configurations at budget 1 and then the best of them
        # at 3; bracket s=0 runs 2 at 3. One trial at a time, that is the order.
        budgets = [p["TRIAL_BUDGET"] for p in proposals]
        assert budgets[:3] == [1, 1, 1] and set(budgets) == {1, 3}
        if case != "Hyperband":
            assert budgets == [1, 1, 1, 3, 3, 3]
        best_first = {k: max(proposals[:3], key=quality)[k] for k in space}
        assert best_first in [{k: p[k] for k in space} for p in proposals[3:] if p["TRIAL_BUDGET"] == 3]
    if case == "PBT":
        steps = [Path(p["save_checkpoint_dir"]).name for p in proposals]
        assert steps == ["0", "0", "0", "1", "1", "1", "2"]
        assert any(Path(p["load_checkpoint_dir"], "state.txt").exists() for p in proposals[3:])


def quality(params: dict[str, Any]) -> float:
    return float(1.0 - (params["x"] - 0.3) ** 2 - (0.1 if params["k"] == 2 else 0.0))


@pytest.mark.parametrize("name", sorted(ASSESSORS))
async def test_assessor_runs_and_stops_poor_trials(tmp_path: Path, name: str) -> None:
    # a grid whose trials get worse, one at a time and slow enough to be stopped: once the first has
    # completed, the poor ones are stopped early
    space = {
        "x": {"_type": "choice", "_value": [0.3, 0.35, 1.0, 1.5, 2.0]},
        "k": {"_type": "choice", "_value": [1]},
    }
    fields = {"searchSpace": space, "trialConcurrency": 1, "assessor": ASSESSORS[name]}
    path = write_config(tmp_path, steps=10, pause=0.3, tuner={"name": "GridSearch"}, **fields)
    manager = await run_to_done(load_config(path).config)
    statuses = [t.status for t in manager.store.trials()]
    assert statuses[:2] == [TrialStatus.SUCCEEDED, TrialStatus.SUCCEEDED]
    assert TrialStatus.EARLY_STOPPED in statuses[2:]


async def test_v1_advisor_section_runs_hyperband(tmp_path: Path) -> None:
    write_config(tmp_path)  # the trial code
    (tmp_path / "space.json").write_text(json.dumps(SPACE))
    v1 = {
        "authorName": "a",
        "experimentName": "v1 advisor",
        "trialConcurrency": 1,
        "maxTrialNum": 4,
        "trainingServicePlatform": "local",
        "searchSpacePath": "space.json",
        "useAnnotation": False,
        "advisor": {
            "builtinAdvisorName": "Hyperband",
            "classArgs": {"optimize_mode": "maximize", "R": 3, "eta": 3},
        },
        "trial": {"command": f"{sys.executable} trial.py", "codeDir": "code", "gpuNum": 0},
    }
    path = tmp_path / "v1.yml"
    path.write_text(yaml.safe_dump(v1))
    loaded = load_config(path)
    assert loaded.config.tuner is not None and loaded.config.tuner.name == "Hyperband"
    manager = await run_to_done(
        loaded.config.model_copy(update={"experiment_working_directory": str(tmp_path / "exps")})
    )
    assert [p["TRIAL_BUDGET"] for p in parameters_of(manager)] == [1, 1, 1, 3]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_names_not_offered_are_refused_at_config_load(tmp_path: Path, name: str) -> None:
    config = load_config(write_config(tmp_path, tuner={"name": name})).config
    with pytest.raises(
        AlgorithmError, match=rf"tuner '{name}' is an NNI built-in that trialfleet does not offer"
    ) as caught:
        preflight(config)
    assert REFUSED[name] in str(caught.value)


@pytest.mark.parametrize(
    ("tuner", "expected"),
    [
        # 3 slots for 2 members: the third slot waits for step 0 to end, from the first request on
        ({"name": "PBT", "classArgs": {"population_size": 2}}, 4),
        # once round 1 of bracket s=1 has ended, 3 slots are free for its 1 promoted configuration; bracket s=0
        # waits for that one to end
        ({"name": "BOHB", "classArgs": {"max_budget": 3}}, 6),
    ],
    ids=["PBT", "BOHB"],
)
async def test_a_waiting_tuner_goes_on_when_trials_end(
    tmp_path: Path, tuner: dict[str, Any], expected: int
) -> None:
    path = write_config(tmp_path, tuner=tuner, trialConcurrency=3, maxTrialNumber=expected)
    manager = await run_to_done(load_config(path).config)
    assert len(manager.store.trials()) == expected
