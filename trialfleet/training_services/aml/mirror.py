"""The manager's side of the job's forwarder (``forwarder.py``): a window of MLflow tags → a mirror of the trial
directory, and the acknowledgement that moves the window on.

The forwarder in the job keeps a window of what the manager does not hold yet in the run's tags
(``trialfleet.files`` lists the files; ``trialfleet.slot.<k>`` holds ``<file index>:<offset>:<base64 bytes>``).
The manager writes each piece into the trial's directory on this machine at its offset, so a mirror holds exactly
the bytes the job wrote, in order, whatever was shipped or read twice, and acknowledges what it holds
(``trialfleet.ack``: the bytes of each file, by index), which lets the forwarder ship the next pieces. The usual
trial-directory reading (:class:`~.trial_files.LocalTrialFiles`) then serves it: metrics exactly once through the
cursors, the keeper's records, the trial's output and files.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from trialfleet.errors import TrialFileRefusedError
from trialfleet.training_services.trial_dir import relative_file

log = logging.getLogger(__name__)

FILES_TAG = "trialfleet.files"
ACK_TAG = "trialfleet.ack"
SLOT_PREFIX = "trialfleet.slot."


def shipped_files(tags: Mapping[str, str]) -> list[str]:
    try:
        files = json.loads(tags.get(FILES_TAG, "[]"))
    except json.JSONDecodeError:
        return []
    return [str(name) for name in files] if isinstance(files, list) else []


def pieces_by_file(tags: Mapping[str, str]) -> dict[int, list[tuple[int, bytes]]]:
    """The window's pieces of each file index, as (offset, bytes) in offset order; malformed slots are skipped."""
    found: dict[int, list[tuple[int, bytes]]] = {}
    for key, value in tags.items():
        if not key.startswith(SLOT_PREFIX):
            continue
        index, _, rest = value.partition(":")
        offset, _, payload = rest.partition(":")
        if not (index.isdigit() and offset.isdigit()):
            continue  # an empty slot ("-") or not one of ours
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            continue
        found.setdefault(int(index), []).append((int(offset), data))
    return {index: sorted(pieces) for index, pieces in found.items()}


def apply_window(trial_dir: Path, tags: Mapping[str, str]) -> tuple[int, list[int]]:
    """Write every piece not yet in the mirror at its offset: the bytes added, and what the mirror holds of each
    shipped file (the acknowledgement to give; -1 for a name it refuses)."""
    files = shipped_files(tags)
    pieces = pieces_by_file(tags)
    added = 0
    held: list[int] = []
    for index, name in enumerate(files):
        try:
            path = trial_dir / relative_file(name, trial_dir)
        except (ValueError, TrialFileRefusedError):
            log.warning("aml: the job shipped %r, which is not a file of its trial directory to mirror", name)
            held.append(-1)  # not wanted: the forwarder ships it no more
            continue
        if index in pieces:
            path.parent.mkdir(parents=True, exist_ok=True)
            added += _apply(path, pieces[index])
        held.append(path.stat().st_size if path.exists() else 0)
    return added, held


def acknowledged(tags: Mapping[str, str]) -> list[int] | None:
    try:
        value = json.loads(tags.get(ACK_TAG, "null"))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def _apply(path: Path, pieces: list[tuple[int, bytes]]) -> int:
    size = path.stat().st_size if path.exists() else 0
    added = 0
    with open(path, "ab") as f:
        for offset, data in pieces:
            end = offset + len(data)
            if end <= size or offset > size:  # already here; or a gap the next window fills
                continue
            f.write(data[size - offset :])
            f.flush()
            added += end - size
            size = end
    return added
