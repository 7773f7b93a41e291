"""``platform: ray``: one Ray job per trial attempt, on a Ray cluster reached through its Jobs API."""

from __future__ import annotations

import posixpath
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from trialfleet.config.base import JsonMapping, KeyPath, Secret, SizeMB, raise_problems
from trialfleet.config.service import TrainingServiceConfig

#: resources that have a key of their own; Ray refuses them in ``entrypoint_resources`` too
_BUILTIN_RESOURCES = {"CPU": "trialCpuNumber", "GPU": "trialGpuNumber", "memory": "trialMemorySize"}
#: runtime_env keys trialfleet sets itself
_RESERVED_RUNTIME_ENV = {
    "working_dir": "trialCodeDirectory is the job's working_dir (uploaded once per content)",
    "excludes": "the code directory is uploaded as NNI does: exclude files in .nniignore",
}


class RayConfig(TrainingServiceConfig):
    """``platform: ray``.

    ``address`` is the head's dashboard (the Jobs API, ``http://<head>:8265``), as ``RAY_API_SERVER_ADDRESS``
    or ``ray job submit --address`` take it. ``runtime_env`` is passed to every job as written (pip, conda,
    env_vars, py_modules …). The resources are what each trial's job reserves on the node Ray places it on.
    """

    platform: Literal["ray"] = "ray"
    """`ray`."""
    address: str
    """The head's dashboard (Jobs API), `http://<head>:8265`; a Ray Client address (`ray://`) is refused."""
    token: Secret | None = None  # sent as "Authorization: Bearer <token>" (Ray's token authentication)
    """Sent as `Authorization: Bearer <token>`, for a cluster with Ray's token authentication."""
    headers: dict[str, str] = Field(
        default_factory=dict
    )  # more HTTP headers, for a proxy in front of the head
    """More HTTP headers for every request (a proxy in front of the head)."""
    runtime_env: JsonMapping | None = None
    """Ray's `runtime_env`, passed to every job as written (`pip`, `conda`, `env_vars`, …); `working_dir` and
    `excludes` are refused."""
    trial_cpu_number: float = Field(default=1.0, ge=0)  # a float default: an int warns when dumped
    """CPUs each trial's job reserves (fractions allowed)."""
    trial_memory_size: SizeMB | None = Field(default=None, gt=0)
    """Memory each trial's job reserves."""
    trial_resources: dict[str, float] = Field(default_factory=dict)  # custom resources, e.g. {"ssd": 1}
    """Custom Ray resources each trial's job reserves, e.g. `{slot: 1}`."""
    node_directory: str | None = None  # where trial directories go on the nodes; default <tmp>/trialfleet-ray
    """Where trial directories go on the nodes (absolute); default `<tmp>/trialfleet-ray`."""

    nni_model: ClassVar[bool] = False  # NNI has no Ray platform
    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": "trials report through their Ray job's log, so they never connect to the manager",
    }

    @field_validator("address")
    @classmethod
    def _dashboard_address(cls, address: str) -> str:
        parts = urlsplit(address)
        if parts.scheme == "ray":
            raise ValueError(
                f"{address!r} is a Ray Client address; give the head's dashboard (Jobs API) address, "
                "e.g. http://<head>:8265"
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"expected the head's dashboard address, e.g. http://<head>:8265, got {address!r}"
            )
        return address.rstrip("/")

    @field_validator("node_directory")
    @classmethod
    def _absolute(cls, path: str | None) -> str | None:
        if path is not None and not posixpath.isabs(path):
            raise ValueError(f"must be an absolute path on the nodes, got {path!r}")
        return path

    @model_validator(mode="after")
    def _check_ray(self) -> RayConfig:
        problems: list[tuple[KeyPath, str]] = [
            (("trialResources", name), f"set {key} instead of a custom resource named {name!r}")
            for name, key in _BUILTIN_RESOURCES.items()
            if name in self.trial_resources
        ]
        problems += [
            (("trialResources", name), f"expected a positive amount, got {amount}")
            for name, amount in self.trial_resources.items()
            if not amount > 0
        ]
        problems += [
            (("runtimeEnv", key), why)
            for key, why in _RESERVED_RUNTIME_ENV.items()
            if key in (self.runtime_env or {})
        ]
        if self.token is not None and any(name.lower() == "authorization" for name in self.headers):
            problems.append((("headers",), "sets Authorization while token is set; keep one of them"))
        raise_problems(problems)
        return self

    def http_headers(self) -> dict[str, str]:
        """What every request to the head carries."""
        headers = dict(self.headers)
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.get_secret_value()}"
        return headers
