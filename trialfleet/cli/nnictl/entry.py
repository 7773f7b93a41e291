"""The ``nnictl`` console script.

Both trialfleet and NNI install a ``bin/nnictl``, and pip lets the one installed last overwrite the other's. So
whichever file is there, this entry point gives NNI's users what they installed NNI for: when the ``nni``
distribution is installed in this environment, ``nnictl`` runs NNI's own nnictl, saying so on stderr; trialfleet's
is then ``python -m trialfleet.cli.nnictl ...`` (or ``TRIALFLEET_NNICTL=trialfleet nnictl ...`` while this file is
the one in ``bin/``). Without NNI, it is
trialfleet's, with NNI's layout unless ``TRIALFLEET_LAYOUT`` says otherwise. Imports only the standard library
before it knows which, and starts a launching command's manager process first (as ``trialfleet`` does).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

CHOICE_ENV = "TRIALFLEET_NNICTL"


def real_nni_version() -> str | None:
    """The version of NNI's own distribution when it is installed here with its nnictl, else None."""
    from importlib import metadata, util

    try:
        version = metadata.version("nni")
    except metadata.PackageNotFoundError:
        return None
    try:
        found = util.find_spec("nni.tools.nnictl.nnictl") is not None
    except (ImportError, ValueError):
        found = False
    return version if found else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(CHOICE_ENV, "").strip().lower() != "trialfleet":
        version = real_nni_version()
        if version is not None:
            return _run_nni(version, args)
    os.environ.setdefault("TRIALFLEET_LAYOUT", "nni")
    try:
        return run(args)
    finally:
        from trialfleet.process_end import leave

        leave()


def _run_nni(version: str, args: list[str]) -> int:
    sys.stderr.write(
        f"nnictl: NNI {version} is installed in this environment, so this is NNI's own nnictl; trialfleet's is "
        "'python -m trialfleet.cli.nnictl ...'\n"
    )
    from nni.tools.nnictl.nnictl import parse_args

    sys.argv = ["nnictl", *args]
    parse_args()
    return 0


def run(args: list[str]) -> int:
    """trialfleet's nnictl: parse as nnictl parses, then run the command."""
    from trialfleet.manager.standby import StandbyManager, config_argument, standby_wanted

    standby = StandbyManager.start(config_argument(args)) if standby_wanted(args) else None
    try:
        from trialfleet.cli.nnictl.commands import dispatch

        return dispatch(args, standby)
    finally:
        if standby is not None:
            standby.close()  # not handed an experiment: killed
