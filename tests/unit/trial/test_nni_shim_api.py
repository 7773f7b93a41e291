"""The rest of the ``nni`` surface trial code and custom tuners use: utils, serializer, mutables, tuner bridge."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trial_helpers import trial_env

from trialfleet.compat import SHIM_PATH
from trialfleet.compat.nni import (
    choice,
    dump,
    load,
    loguniform,
    normal,
    qloguniform,
    qnormal,
    quniform,
    trace,
    uniform,
)
from trialfleet.compat.nni.utils import extract_scalar_history, extract_scalar_reward, merge_parameter

MNIST_STYLE_TRIAL = """
    import argparse, json
    import nni
    from nni.utils import merge_parameter

    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    args = merge_parameter(parser.parse_args([]), nni.get_next_parameter())
    print(json.dumps(vars(args)))
"""


def test_merge_parameter_into_argparse_namespace_in_a_trial(trial_dir: Path, run_trial) -> None:
    run = run_trial(MNIST_STYLE_TRIAL, trial_dir)
    assert run.returncode == 0, run.stderr
    assert run.last_json_line() == {"lr": 0.05, "optimizer": "sgd", "layers": 3, "epochs": 10}


def test_merge_parameter_type_mismatch_fails_the_trial_like_nni(trial_dir: Path, run_trial) -> None:
    record = json.loads((trial_dir / "parameter.cfg").read_text())
    record["parameters"]["layers"] = 3.0
    (trial_dir / "parameter.cfg").write_text(json.dumps(record))
    run = run_trial(MNIST_STYLE_TRIAL, trial_dir)
    assert run.returncode == 1
    assert (
        "TypeError: Expected 'layers' in override parameters to have type '<class 'int'>', "
        "but found '<class 'float'>'." in run.stderr
    )


def test_merge_parameter_dict_and_namespace_rules() -> None:
    base = {"lr": 0.1, "name": None, "depth": 2}
    assert merge_parameter(base, {"lr": 0.2, "name": "x"}) is base
    assert base == {"lr": 0.2, "name": "x", "depth": 2}
    assert merge_parameter(base, None) is base
    with pytest.raises(ValueError, match=r"^Key 'width' not found in base parameters\.$"):
        merge_parameter(base, {"width": 3})
    with pytest.raises(TypeError) as info:
        merge_parameter({"depth": 2}, {"depth": 2.0})
    assert str(info.value) == (
        "Expected 'depth' in override parameters to have type '<class 'int'>', but found '<class 'float'>'."
    )
    namespace = argparse.Namespace(lr=0.1, flag=None)
    merge_parameter(namespace, {"flag": True})
    assert namespace.flag is True
    with pytest.raises(ValueError, match="Key 'nope' not found"):
        merge_parameter(namespace, {"nope": 1})
    with pytest.raises(TypeError, match="Expected 'lr'"):
        merge_parameter(namespace, {"lr": "0.1"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.5, 0.5), (3, 3), ({"default": 0.25, "loss": 2}, 0.25), ({"default": 7}, 7)],
)
def test_extract_scalar_reward_accepts_numbers_and_default_dicts(value: object, expected: float) -> None:
    assert extract_scalar_reward(value) == expected


@pytest.mark.parametrize("value", ["0.5", None, [0.5], {"loss": 1.0}, {"default": "1"}])
def test_extract_scalar_reward_rejects_everything_else(value: object) -> None:
    with pytest.raises(RuntimeError, match="Incorrect final result"):
        extract_scalar_reward(value)


def test_extract_scalar_reward_with_other_key_and_history() -> None:
    assert extract_scalar_reward({"acc": 0.9, "default": 0.1}, scalar_key="acc") == 0.9
    assert extract_scalar_history([1, {"default": 2.5}]) == [1, 2.5]


def test_dump_and_load_are_plain_json(tmp_path: Path) -> None:
    data = {"a": [1, 2.5, "x"], "b": None}
    text = dump(data)
    assert text == json.dumps(data)
    assert load(text) == data
    buffer = io.StringIO()
    dump(data, buffer, pickle_size_limit=10)
    assert load(fp=io.StringIO(buffer.getvalue())) == data
    path = tmp_path / "state.json"
    dump(data, str(path))
    assert load(fp=str(path)) == data
    with pytest.raises(TypeError, match="fp="):
        load(io.StringIO(text))  # type: ignore[arg-type]


def test_trace_is_the_identity_decorator() -> None:
    def model(width: int) -> int:
        return width * 2

    assert trace(model) is model
    assert trace()(model) is model
    assert trace(kw_only=False)(model) is model


def test_shortcut_mutables_build_search_space_entries() -> None:
    assert choice("opt", ["sgd", "adam"]) == {"_type": "choice", "_value": ["sgd", "adam"]}
    assert uniform("x", 0, 1) == {"_type": "uniform", "_value": [0, 1]}
    assert quniform("x", 0, 10, 2) == {"_type": "quniform", "_value": [0, 10, 2]}
    assert loguniform("lr", 1e-4, 1e-1) == {"_type": "loguniform", "_value": [1e-4, 1e-1]}
    assert qloguniform("lr", 1e-4, 1e-1, 1e-4) == {"_type": "qloguniform", "_value": [1e-4, 1e-1, 1e-4]}
    assert normal("w", 0, 1) == {"_type": "normal", "_value": [0, 1]}
    assert qnormal("w", 0, 1, 0.1) == {"_type": "qnormal", "_value": [0, 1, 0.1]}
    with pytest.raises(ValueError, match="low must be strictly smaller than high"):
        uniform("x", 1, 1)
    with pytest.raises(ValueError, match="strictly greater than 0"):
        loguniform("lr", 0, 1)
    with pytest.raises(ValueError, match="Standard deviation"):
        normal("w", 0, 0)


def _run_manager_snippet(source: str) -> subprocess.CompletedProcess[str]:
    env = trial_env(None, platform=None, pythonpath=None)
    return subprocess.run(
        [sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=120
    )


TUNER_BRIDGE = """
import json
from trialfleet.compat import ensure_nni_importable, SHIM_PATH
put_on_path = ensure_nni_importable()

from nni.tuner import Tuner
from nni.assessor import Assessor, AssessResult
from nni.utils import OptimizeMode
import nni
import trialfleet.tuning.base as base
import trialfleet.tuning.utils as tuning_utils

class MyTuner(Tuner):
    def generate_parameters(self, parameter_id, **kwargs):
        raise nni.NoMoreTrialError("done")

try:
    MyTuner().generate_parameters(0)
    caught = False
except base.NoMoreTrialError:
    caught = True
print(json.dumps({
    "put_on_path": put_on_path,
    "shim": nni.__file__.startswith(str(SHIM_PATH)),
    "same": [Tuner is base.Tuner, Assessor is base.Assessor, AssessResult is base.AssessResult,
             OptimizeMode is tuning_utils.OptimizeMode, nni.NoMoreTrialError is base.NoMoreTrialError],
    "caught": caught,
}))
"""


def test_custom_tuner_imports_resolve_to_trialfleet_classes() -> None:
    proc = _run_manager_snippet(TUNER_BRIDGE)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"put_on_path": True, "shim": True, "same": [True] * 5, "caught": True}


def test_nni_experiment_is_trialfleets() -> None:
    proc = _run_manager_snippet(
        "from trialfleet.compat import ensure_nni_importable; ensure_nni_importable()\n"
        "import nni, trialfleet\n"
        "from nni.experiment import Experiment\n"
        "print(nni.Experiment is trialfleet.Experiment is Experiment)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_shim_runs_without_trialfleet_installed(tmp_path: Path, trial_dir: Path, run_trial) -> None:
    # A worker gets only the nni/ directory; -S drops site-packages, so trialfleet is not importable.
    worker_path = tmp_path / "worker-shim"
    shutil.copytree(SHIM_PATH / "nni", worker_path / "nni", ignore=shutil.ignore_patterns("__pycache__"))
    env = trial_env(trial_dir, pythonpath=str(worker_path))
    run = run_trial(
        """
        import json, sys, nni
        from nni.utils import merge_parameter
        params = merge_parameter({"lr": 0.1, "optimizer": "x", "layers": 1}, nni.get_next_parameter())
        nni.report_final_result(params["lr"])
        try:
            import nni.tuner
            error = None
        except ImportError as exc:
            error = str(exc)
        print(json.dumps({"error": error, "trialfleet": "trialfleet" in sys.modules}))
        """,
        trial_dir,
        env=env,
        python_args=("-S",),
    )
    assert run.returncode == 0, run.stderr
    out = run.last_json_line()
    assert out["trialfleet"] is False
    assert "trialfleet's compatibility shim" in out["error"]
    assert [r["value"] for r in run.metrics()] == ["0.05"]
