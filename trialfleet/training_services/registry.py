"""Platform name → its config model and its training service: built-ins and plugins, found the same way.

A built-in platform is a package below ``trialfleet.training_services``; a third-party one registers its service
class under the ``trialfleet.training_services`` entry-point group (``name = "module:Class"``), and the class
names its config model in ``config_class``. ``platform: <name>`` in a config is then validated with that model
and run with that class. Modules are imported only when their platform is used, so the config of
``platform: local`` never loads asyncssh or a plugin.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from trialfleet.errors import PlatformNotAvailableError
from trialfleet.extras import install_hint, missing_module

if TYPE_CHECKING:
    from trialfleet.config.service import TrainingServiceConfig

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "trialfleet.training_services"
_PACKAGE = "trialfleet.training_services"


@dataclass(frozen=True)
class PlatformEntry:
    """One platform: where its config model and its service class are (``module:Class``)."""

    name: str
    config: str | None  # None for a plugin: its service class names it
    service: str | None  # None: the config is accepted (NNI's configs load) but nothing runs it yet
    source: str  # "built-in", or the plugin's distribution and version
    extra: str | None = None  # the optional extra whose client the service needs (``pip install …[extra]``)

    def config_class(self) -> type[TrainingServiceConfig]:
        if self.config is not None:
            cls: type[TrainingServiceConfig] = _load(self.config, self)
            return cls
        config: type[TrainingServiceConfig] = self.service_class().config_class
        return config

    def service_class(self) -> Any:
        """The service class (``base.get_training_service_class`` checks that it is a ``TrainingService``: the
        registry sits below the seam, which validates configs with it)."""
        if self.service is None:
            raise PlatformNotAvailableError(
                f"platform {self.name!r} is not available yet in this trialfleet version; "
                f"available: {', '.join(available_platforms())}"
            )
        return _load(self.service, self)

    @property
    def available(self) -> bool:
        return self.service is not None

    def describe(self) -> dict[str, Any]:
        """What ``trialfleet platforms`` shows: whether it runs, where it comes from, what would not load."""
        status, problem = "available" if self.available else "config only (not available yet)", None
        try:
            self.config_class()
            if self.available:
                self.service_class()
        except PlatformNotAvailableError as exc:
            status, problem = "cannot be loaded", str(exc)
        missing = missing_module(self.extra) if self.extra and problem is None else None
        if missing is not None:
            status, problem = f"needs {missing}", install_hint(self.extra)  # type: ignore[arg-type]
        return {
            "name": self.name,
            "status": status,
            "source": self.source,
            "service": self.service,
            "problem": problem,
        }


def _builtin(
    name: str, package: str, config: str, service: str | None, extra: str | None = None
) -> PlatformEntry:
    module = f"{_PACKAGE}.{package}"
    return PlatformEntry(
        name,
        f"{module}.config:{config}",
        f"{module}.service:{service}" if service else None,
        "built-in",
        extra,
    )


BUILTIN_PLATFORMS: dict[str, PlatformEntry] = {
    p.name: p
    for p in (
        _builtin("local", "local", "LocalConfig", "LocalTrainingService"),
        _builtin("remote", "remote", "RemoteConfig", "RemoteTrainingService", "remote"),
        _builtin("slurm", "slurm", "SlurmConfig", "SlurmTrainingService"),
        _builtin("ray", "ray", "RayConfig", "RayTrainingService", "ray"),
        _builtin("openpai", "openpai", "OpenpaiConfig", "OpenpaiTrainingService"),
        _builtin("kubeflow", "kubernetes", "KubeflowConfig", "KubeflowTrainingService", "kubernetes"),
        _builtin(
            "frameworkcontroller",
            "kubernetes",
            "FrameworkControllerConfig",
            "FrameworkControllerTrainingService",
            "kubernetes",
        ),
        _builtin("adl", "kubernetes", "AdlConfig", "AdlTrainingService", "kubernetes"),
        _builtin("dlts", "dlts", "DltsConfig", "DltsTrainingService"),
        _builtin("aml", "aml", "AmlConfig", "AmlTrainingService", "aml"),
        _builtin("dlc", "dlc", "DlcConfig", None),
    )
}


@functools.cache
def _plugins() -> dict[str, PlatformEntry]:
    found: dict[str, PlatformEntry] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        source = f"{dist.name} {dist.version}" if dist is not None else "plugin"
        if ep.name in BUILTIN_PLATFORMS:
            log.warning(
                "plugin %s registers platform %r, a built-in name; the built-in is used", source, ep.name
            )
            continue
        found[ep.name] = PlatformEntry(ep.name, None, ep.value, source)
    return found


def platforms() -> dict[str, PlatformEntry]:
    """Every platform this installation knows, built-ins first, by name."""
    return {**BUILTIN_PLATFORMS, **_plugins()}


def available_platforms() -> list[str]:
    """The names that can run an experiment."""
    return sorted(name for name, platform in platforms().items() if platform.available)


def get_platform(name: str) -> PlatformEntry:
    # a built-in name is never a plugin's: the installed distributions' entry points (~20 ms to read) are read
    # only for another name
    platform = BUILTIN_PLATFORMS.get(name) or _plugins().get(name)
    if platform is None:
        close = difflib.get_close_matches(name.lower(), platforms(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PlatformNotAvailableError(
            f"unknown platform {name!r}{hint}; expected one of {', '.join(sorted(platforms()))}"
        )
    return platform


def _load(target: str, platform: PlatformEntry) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise PlatformNotAvailableError(
            f"platform {platform.name!r} ({platform.source}) cannot be loaded from {target}: {exc}"
        ) from exc
