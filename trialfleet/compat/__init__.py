"""Compatibility with NNI code: the ``nni`` shim package and where to put it on the Python path.

``SHIM_PATH`` is this directory; its only importable child is the ``nni`` package (nothing else may
live here, or it would shadow a module a trial imports). A trial gets ``SHIM_PATH`` on its
PYTHONPATH only when the real ``nni`` is not installed for the trial's interpreter: real NNI 3.0
then speaks the same file protocol itself (``docs/trial-directory.md``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping

TYPE_CHECKING = False  # typing is not imported for it: every trial imports this package
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "REAL_NNI_CHECK",
    "REAL_NNI_PROBE",
    "SHIM_PATH",
    "ensure_nni_importable",
    "real_nni_installed",
    "trial_pythonpath_env",
]

SHIM_PATH: Path  # this directory (module attribute made on first use: see __getattr__)
_SHIM_DIR = os.path.dirname(os.path.realpath(__file__))

# A module that only the shim has: an ``nni`` package with it next to __init__.py is ours (or a
# copy of ours uploaded to a worker), not a real NNI distribution.
_SHIM_MARKER = "_trialfleet.py"

# Run with ``python -c`` by an interpreter (locally, or on a worker over SSH); prints "yes" when
# that interpreter would import a real nni. find_spec locates the package without importing it.
_REAL_NNI_FOUND = f"o and not os.path.exists(os.path.join(os.path.dirname(o), {_SHIM_MARKER!r}))"
REAL_NNI_PROBE = (
    "import importlib.util, os\n"
    "s = importlib.util.find_spec('nni')\n"
    "o = s.origin if s is not None else None\n"
    f"print('yes' if {_REAL_NNI_FOUND} else 'no')\n"
)
# The same, as a function ``real_nni()`` for a script of its own to call
REAL_NNI_CHECK = (
    "def real_nni():\n"
    "    import importlib.util, os\n"
    "    s = importlib.util.find_spec('nni')\n"
    "    o = s.origin if s is not None else None\n"
    f"    return bool({_REAL_NNI_FOUND})\n"
)
_PROBE_TIMEOUT_SECONDS = 30


def real_nni_installed(python: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``python`` (default: this process) would import a real NNI rather than the shim.

    Nothing is imported: this process searches its import path with the shim's directory left
    out; another interpreter is asked with a tiny subprocess (cached per interpreter path).
    """
    if python is None:
        return _real_nni_in_this_process()
    return _probe_interpreter(os.fspath(python), os.environ.get("PYTHONPATH", ""))


def trial_pythonpath_env(
    existing_env: Mapping[str, str],
    *,
    python: str | os.PathLike[str] | None = None,
    shim_dir: str | os.PathLike[str] | None = None,
    real_nni: bool | None = None,
) -> dict[str, str]:
    """The PYTHONPATH to add to a trial's environment so that ``import nni`` works.

    Returns ``{}`` when the trial's interpreter has the real nni (``real_nni``, or probed with
    ``python``), else ``{"PYTHONPATH": <shim dir>:<existing PYTHONPATH>}``. ``shim_dir`` is where the
    shim lives for the trial (a worker's upload directory); it defaults to ``SHIM_PATH``.
    """
    if real_nni is None:
        real_nni = real_nni_installed(python)
    if real_nni:
        return {}
    shim = os.fspath(shim_dir) if shim_dir is not None else _SHIM_DIR
    # An empty entry would put the trial's working directory on the path, so none is kept.
    rest = [part for part in existing_env.get("PYTHONPATH", "").split(os.pathsep) if part and part != shim]
    return {"PYTHONPATH": os.pathsep.join([shim, *rest])}


def ensure_nni_importable() -> bool:
    """Make ``import nni`` work in this (manager) process; True when the shim was put on sys.path.

    Custom tuners do ``from nni.tuner import Tuner``; without a real nni they get the shim, whose
    ``nni.tuner`` re-exports trialfleet's classes.
    """
    if _real_nni_in_this_process():
        return False
    shim = _SHIM_DIR
    if shim not in sys.path:
        sys.path.insert(0, shim)
    return True


def _real_nni_in_this_process() -> bool:
    loaded = sys.modules.get("nni")
    if loaded is not None:
        return _is_real_origin(getattr(loaded, "__file__", None))
    from importlib.machinery import PathFinder

    search_path = [entry for entry in sys.path if not _is_shim_dir(entry)]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        is_path_finder = finder is PathFinder or isinstance(finder, PathFinder)
        spec = find_spec("nni", search_path if is_path_finder else None)
        if spec is not None:
            return _is_real_origin(spec.origin)
    return False


def _is_real_origin(origin: str | None) -> bool:
    # A namespace package (no __init__.py, origin None) is a stray "nni" directory, not NNI.
    if not origin or not origin.endswith("__init__.py"):
        return False
    return not os.path.exists(os.path.join(os.path.dirname(origin), _SHIM_MARKER))


def _is_shim_dir(entry: str) -> bool:
    return os.path.realpath(entry or os.curdir) == _SHIM_DIR


@functools.cache
def _probe_interpreter(python: str, pythonpath: str) -> bool:
    import logging
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in pythonpath.split(os.pathsep) if part and not _is_shim_dir(part)
    )
    try:
        result = subprocess.run(
            [python, "-c", REAL_NNI_PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_SECONDS,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        # The trial will fail to start with this interpreter anyway, and say why; the shim on its
        # path does no harm meanwhile.
        logging.getLogger(__name__).warning("cannot ask %s whether nni is installed: %s", python, exc)
        return False
    return result.stdout.strip() == "yes"


def __getattr__(name: str) -> Path:
    # pathlib (~4 ms) is loaded only for whoever asks for SHIM_PATH: not by every trial's ``from trialfleet
    # import trial``, which imports this package on the way
    if name == "SHIM_PATH":
        from pathlib import Path

        shim = globals()["SHIM_PATH"] = Path(_SHIM_DIR)
        return shim
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
