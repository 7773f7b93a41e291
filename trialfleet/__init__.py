"""trialfleet: NNI-compatible AutoML experiments on local processes, SSH fleets and clusters.

``from trialfleet import Experiment, ExperimentConfig``. Names are loaded on first use, so ``import trialfleet``
(and the CLI's start-up) stays cheap; NNI's config class names (``LocalConfig`` …) are found here too, which is
how the ``nni.experiment`` shim offers them. ``from trialfleet import <submodule>`` loads only that submodule.
"""

from __future__ import annotations

# No module is imported here: a trial's ``from trialfleet import trial`` starts with this file (``typing``
# alone would add ~3 ms to every trial).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from trialfleet.config import ExperimentConfig
    from trialfleet.experiment import Experiment, RunMode

__all__ = ["Experiment", "ExperimentConfig", "RunMode", "__version__"]

_LAZY = {
    "Experiment": "trialfleet.experiment",
    "RunMode": "trialfleet.experiment",
    "ExperimentConfig": "trialfleet.config",
}


#: NNI's names of the platforms' config models → their platform package
_PLATFORM_CONFIGS = {
    "LocalConfig": "local",
    "RemoteConfig": "remote",
    "RemoteMachineConfig": "remote",
    "SlurmConfig": "slurm",
    "RayConfig": "ray",
    "OpenpaiConfig": "openpai",
    "AmlConfig": "aml",
    "DlcConfig": "dlc",
    "DltsConfig": "dlts",
    "KubeflowConfig": "kubernetes",
    "KubeflowRoleConfig": "kubernetes",
    "FrameworkControllerConfig": "kubernetes",
    "FrameworkControllerRoleConfig": "kubernetes",
    "AdlConfig": "kubernetes",
    "K8sNfsConfig": "kubernetes",
    "K8sAzureStorageConfig": "kubernetes",
    "K8sStorageConfig": "kubernetes",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trialfleet")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    # also asked for a submodule not imported yet (``from trialfleet import trial``): that answer loads nothing
    if name == "__version__":
        value: Any = _version()
    elif name in _PLATFORM_CONFIGS:
        import importlib

        package = f"trialfleet.training_services.{_PLATFORM_CONFIGS[name]}.config"
        value = getattr(importlib.import_module(package), name)
    elif name in _LAZY or name.endswith("Config"):
        import importlib

        module = importlib.import_module(_LAZY.get(name, "trialfleet.config"))
        if name not in _LAZY and name not in module.__all__:
            raise AttributeError(f"module 'trialfleet' has no attribute {name!r}")
        value = getattr(module, name)  # NNI's config class names; only they load the config package
    else:
        raise AttributeError(f"module 'trialfleet' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
