"""Optional extras: which module each one brings, whether it is here, and the ``pip install`` that fits.

How trialfleet was installed decides the command: from a clone (``pip install .`` or ``-e .``) the extra is
installed from that folder (``pip install '.[remote]'``), from an index or a wheel by name
(``pip install 'trialfleet[remote]'``). pip records a folder install in the distribution's
``direct_url.json`` (PEP 610); a source tree run without installing it is found by its ``pyproject.toml``.
"""

from __future__ import annotations

import json
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import unquote, urlparse

# the module an extra brings that trialfleet imports (each is imported only when its platform is used)
EXTRA_MODULES: dict[str, str] = {
    "remote": "asyncssh",
    "slurm": "asyncssh",
    "kubernetes": "kubernetes",
    "aml": "azure.ai.ml",
    "ray": "ray",
    "tensorboard": "tensorboard",
    "tuners": "scipy",
    "gpu": "pynvml",
}


def missing_module(extra: str) -> str | None:
    """The module of ``extra`` that cannot be imported here, None when it can (found, not imported)."""
    module = EXTRA_MODULES[extra]
    try:
        found = find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        found = False
    return None if found else module


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` the way this trialfleet was installed."""
    folder = _source_folder()
    if folder is None:
        return f"pip install 'trialfleet[{extra}]'"
    here = Path.cwd().resolve()
    where = f"./{folder.relative_to(here).as_posix()}" if folder.is_relative_to(here) else str(folder)
    return f"pip install '{where.removesuffix('/.')}[{extra}]'"


def _source_folder() -> Path | None:
    """The clone trialfleet was installed from (or runs from), None for an install from an index or a wheel."""
    tree = Path(__file__).resolve().parent.parent
    in_tree = (tree / "pyproject.toml").is_file()
    try:
        dist = metadata.distribution("trialfleet")
    except metadata.PackageNotFoundError:
        return tree if in_tree else None
    recorded = dist.read_text("direct_url.json")
    if recorded:
        direct = json.loads(recorded)
        url = urlparse(direct.get("url", ""))
        return Path(unquote(url.path)).resolve() if "dir_info" in direct and url.scheme == "file" else None
    # no record: from an index, unless its metadata is the egg-info of the source tree run from (PYTHONPATH)
    return tree if in_tree and Path(str(dist.locate_file(""))).resolve() == tree else None
