"""The ``trialfleet`` console script. A command that starts a detached manager (``create``, ``resume``,
``view``) has its manager's process started first of all, before the command line's own imports (typer and
the config models: ~0.1 s), so the two interpreters start on two cores at once; a ``create`` tells it its config
file, whose platforms it imports meanwhile. Then :func:`trialfleet.cli.main.main` runs the command. Nothing here
imports more than the standard library.
"""

from __future__ import annotations

import sys


def main() -> int:
    from trialfleet.manager.standby import StandbyManager, config_argument, standby_wanted

    args = sys.argv[1:]
    standby = StandbyManager.start(config_argument(args)) if standby_wanted(args) else None
    from trialfleet.cli.main import main as run

    try:
        return run(standby=standby)
    finally:
        from trialfleet.process_end import leave

        leave()
