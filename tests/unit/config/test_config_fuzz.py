"""Robustness: whatever a user (or a corrupted file) hands in, the only error is a ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trialfleet.config import ExperimentConfig, convert_v1_to_v2, load_config
from trialfleet.config.keys import fields_of
from trialfleet.errors import ConfigError
from trialfleet.training_services.registry import platforms

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# every key the schema knows, so that random configs reach deep into the models
KNOWN_KEYS = sorted(
    {
        e.alias
        for cls in [ExperimentConfig, *(p.config_class() for p in platforms().values())]
        for e in fields_of(cls).values()
    }
)

pytestmark = pytest.mark.slow  # hypothesis/schemathesis: the fast tier (-m 'not slow') leaves it out
KNOWN_KEYS += [
    "machineList",
    "host",
    "user",
    "port",
    "password",
    "name",
    "className",
    "platform",
    "storageType",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        ["local", "remote", "slurm", "kubeflow", "nfs", "NFS", "1h", "8gb", "0,1", "~", ".", "TPE"]
    ),
    st.binary(max_size=8),
)
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=12), st.integers(-3, 3))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=30,
)


def _valid(platform: str) -> dict[str, Any]:
    service: dict[str, Any] = {"platform": platform}
    if platform == "remote":
        service["machineList"] = [{"host": "h", "user": "u"}]
    if platform == "slurm":
        service["sharedDirectory"] = "/shared"
    return {
        "trialCommand": "python3 trial.py",
        "trialConcurrency": 1,
        "searchSpace": {"x": {"_type": "choice", "_value": [1]}},
        "tuner": {"name": "TPE"},
        "trainingService": service,
    }


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid config with some values replaced, some keys added and some removed."""
    config = _valid(draw(st.sampled_from(["local", "remote", "slurm"])))
    for _ in range(draw(st.integers(1, 4))):
        target: Any = config if draw(st.booleans()) else config.get("trainingService")
        if not isinstance(target, dict):
            break
        action = draw(st.sampled_from(["replace", "add", "remove"]))
        if action == "remove" and target:
            target.pop(draw(st.sampled_from(sorted(target, key=str))))
        else:
            key = (
                draw(st.sampled_from(sorted(target, key=str)))
                if action == "replace" and target
                else draw(keys)
            )
            target[key] = draw(values)
    return config


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _only_config_errors(data: Any, base_dir: Path) -> None:
    try:
        config = ExperimentConfig.from_dict(data, base_dir=base_dir)
    except ConfigError as error:
        assert str(error)  # renders
        return
    assert ExperimentConfig.from_json(config.to_json(include_secrets=True), check_paths=False) == config


@FUZZ
@given(data=values)
def test_arbitrary_values(base_dir: Path, data: Any) -> None:
    _only_config_errors(data, base_dir)


@FUZZ
@given(data=near_valid())
def test_near_valid_configs(base_dir: Path, data: dict[str, Any]) -> None:
    _only_config_errors(data, base_dir)


@FUZZ
@given(
    data=st.dictionaries(
        st.sampled_from(
            [
                "trainingServicePlatform",
                "trial",
                "tuner",
                "machineList",
                "paiConfig",
                "kubeflowConfig",
                "frameworkcontrollerConfig",
                "localConfig",
                "multiPhase",
                "authorName",
                "assessor",
                "advisor",
            ]
        )
        | keys,
        values,
        max_size=8,
    )
)
def test_arbitrary_v1_configs(data: dict[Any, Any]) -> None:
    try:
        convert_v1_to_v2(data)
    except ConfigError as error:
        assert str(error)


@FUZZ
@given(
    text=st.text(max_size=200)
    | st.sampled_from(["a: [1\n", "- 1\n", "a: 1\na: 2\n", "? [1]\n: 2\n", "!!python/object:os.system x"])
)
def test_arbitrary_files(base_dir: Path, text: str) -> None:
    path = base_dir / "fuzz.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_config(path)
    except ConfigError as error:
        assert error.file == str(path)
