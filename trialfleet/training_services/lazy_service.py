"""A platform package's service class, imported only when asked for (``from …slurm import SlurmTrainingService``).

Every config load imports the platform packages for their config models; the services and their clients
(asyncssh, httpx, the Azure SDK) are left until a platform is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def service_attribute(package: str, name: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from ``package.service`` on first use."""

    def __getattr__(attribute: str) -> Any:
        if attribute == name:
            return getattr(importlib.import_module(f"{package}.service"), name)
        raise AttributeError(attribute)

    return __getattr__
