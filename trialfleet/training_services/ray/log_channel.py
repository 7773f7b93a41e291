"""The manager's side of the job-log channel: a Ray job's log, replayed into a mirror of its trial directory.

``entry.py`` writes the trial directory into the job's log as framed lines (its docstring has the format). The
manager follows that log and applies each line to ``<experiment dir>/trials/<attempt>/``, which it then reads as
any local trial directory (:class:`~..trial_files.LocalTrialFiles`): the metric cursors, exactly-once and in
order, are those of every platform. Streams are appended at the offsets the lines carry (the relay's
``append_at``: bytes the mirror has already are skipped, so a log read twice changes nothing); records and
output files are written whole. A line naming a file outside the trial directory, one of the inputs the
manager wrote itself, or the keeper's private ``command.json`` (entry.py never sends it) is refused and logged.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from trialfleet.errors import TrialFileRefusedError
from trialfleet.training_services.ray.entry import unframe
from trialfleet.training_services.relay import GapError, append_at
from trialfleet.training_services.trial_dir import COMMAND_FILE, PARAMETER_FILE, relative_file

log = logging.getLogger(__name__)

_INPUTS = (PARAMETER_FILE, COMMAND_FILE)


class LogMirror:
    """One trial's mirror, fed with the text of its job's log: followed in chunks, or replayed whole."""

    def __init__(self, trial_dir: Path) -> None:
        self.trial_dir = trial_dir
        self._partial = ""  # a line the followed log has not finished yet

    def feed(self, text: str) -> None:
        """The next chunk of a followed log; a line is applied once its newline has arrived."""
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.apply(line)

    def restart(self) -> None:
        """A new follower starts at the log's beginning: forget the unfinished line of the last one."""
        self._partial = ""

    def replay(self, text: str) -> None:
        """The whole log as one read returned it (its last line may still be unfinished)."""
        for line in text.split("\n")[:-1]:
            self.apply(line)

    def apply(self, line: str) -> None:
        try:
            found = unframe(line)
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeError) as exc:
            log.warning(
                "ray: a malformed trialfleet line in the job log of %s (%s)", self.trial_dir.name, exc
            )
            return
        if found is None:
            return  # Ray's own lines ("Running entrypoint for job …")
        name, data, offset = found
        try:
            relative = relative_file(name, self.trial_dir)  # command.json: TrialFileRefusedError
            if relative in _INPUTS:
                raise ValueError(f"{name!r} is written by the manager, not the trial")
        except (ValueError, TrialFileRefusedError) as exc:
            log.warning("ray: job log of %s: refused %s", self.trial_dir.name, exc)
            return
        path = self.trial_dir / relative
        try:
            if offset is None:
                _write_whole(path, data)
            else:
                append_at(path, offset, data)
        except GapError:
            pass  # bytes before these were lost here (the mirror is newer than its log): the next replay fills it
        except OSError as exc:
            log.warning("ray: cannot mirror %s of %s: %s", relative, self.trial_dir.name, exc)


def _write_whole(path: Path, data: bytes) -> None:
    """Atomically, as the keeper writes its records: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
