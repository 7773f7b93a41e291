"""Where an experiment's files go: trialfleet's names, or NNI's for users whose scripts read them.

With ``TRIALFLEET_LAYOUT=nni`` in the environment of ``create`` (and of the Python API), and by default under
``nnictl``, experiments go to NNI's ``~/nni-experiments/<id>/`` unless the config sets
``experimentWorkingDirectory``, the manager logs to ``log/nnimanager.log`` (with NNI's lines: ``Trial job <id>
status changed from RUNNING to SUCCEEDED``, ``Experiment done.``, stamped and named as NNI's manager wrote them)
and the tuner and assessor to ``log/dispatcher.log``, as NNI's did. An experiment keeps the layout it was created
with when it is resumed or viewed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

LAYOUT_ENV = "TRIALFLEET_LAYOUT"
NNI_MANAGER_LOG = "nnimanager.log"
DISPATCHER_LOG = "dispatcher.log"
MANAGER_LOG = "manager.log"
#: where a detached manager's own stdout and stderr go (NNI's names): what it prints before its log is set up
MANAGER_STDOUT_LOG = "nnictl_stdout.log"
MANAGER_STDERR_LOG = "nnictl_stderr.log"


def nni_layout() -> bool:
    return os.environ.get(LAYOUT_ENV, "").strip().lower() == "nni"


def default_working_directory() -> Path:
    return Path("~/nni-experiments" if nni_layout() else "~/trialfleet-experiments")


@dataclass(frozen=True)
class LogFiles:
    manager: Path
    dispatcher: Path | None  # None: the tuner's lines go to the manager's log


def log_files(experiment_dir: Path) -> LogFiles:
    """The experiment's log files: NNI's names when it was made with NNI's layout."""
    log = Path(experiment_dir) / "log"
    if (log / NNI_MANAGER_LOG).exists() or (nni_layout() and not (log / MANAGER_LOG).exists()):
        return LogFiles(log / NNI_MANAGER_LOG, log / DISPATCHER_LOG)
    return LogFiles(log / MANAGER_LOG, None)


class NniLogFormat(logging.Formatter):
    """NNI's layout: nnimanager.log's lines as NNI's manager wrote them, ``[2026-12-04 13:50:58] INFO
    (NNIManager) Experiment done.``, for the scripts that read it."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(levelname)s (%(name)s) %(message)s", "%Y-%m-%d %H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        if record.name == "trialfleet.manager":
            record = logging.makeLogRecord({**record.__dict__, "name": "NNIManager"})
        return super().format(record)
