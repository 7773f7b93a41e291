"""The manager's side of the job's forwarder (``forwarder.py``): MLflow tags → a mirror of the trial directory.

The forwarder in the job ships what each file of its trial directory gained as tags of the job's MLflow run
(``trialfleet.files`` lists the files; ``trialfleet.<file>.<chunk>`` holds ``<offset>:<base64 bytes>``). The
manager writes them into the trial's directory on this machine, each chunk at its offset, so a mirror holds
exactly the bytes the job wrote, in order, whatever was shipped or read twice. The usual trial-directory
reading (:class:`~.trial_files.LocalTrialFiles`) then serves it: metrics exactly once through the cursors, the
keeper's records, the trial's output and files.
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


def chunks_by_file(tags: Mapping[str, str]) -> dict[str, list[tuple[int, bytes]]]:
    """The shipped chunks of each file, as (offset, bytes), in chunk order; malformed tags are skipped."""
    try:
        files = json.loads(tags.get(FILES_TAG, "[]"))
    except json.JSONDecodeError:
        return {}
    found: dict[str, list[tuple[int, int, bytes]]] = {}
    for key, value in tags.items():
        parts = key.split(".")
        if len(parts) != 3 or parts[0] != "trialfleet" or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        index, number = int(parts[1]), int(parts[2])
        offset, _, payload = value.partition(":")
        if index >= len(files) or not offset.isdigit():
            continue
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            continue
        found.setdefault(files[index], []).append((number, int(offset), data))
    return {name: [(offset, data) for _, offset, data in sorted(chunks)] for name, chunks in found.items()}


def apply_chunks(trial_dir: Path, tags: Mapping[str, str]) -> int:
    """Write every chunk not yet in the mirror at its offset; the number of bytes added."""
    added = 0
    for name, chunks in chunks_by_file(tags).items():
        try:
            path = trial_dir / relative_file(name, trial_dir)
        except (ValueError, TrialFileRefusedError):
            log.warning("aml: the job shipped %r, which is not a file of its trial directory to mirror", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        added += _apply(path, chunks)
    return added


def _apply(path: Path, chunks: list[tuple[int, bytes]]) -> int:
    size = path.stat().st_size if path.exists() else 0
    added = 0
    with open(path, "ab") as f:
        for offset, data in chunks:
            end = offset + len(data)
            if end <= size or offset > size:  # already here; or a gap the next look fills
                continue
            f.write(data[size - offset :])
            f.flush()
            added += end - size
            size = end
    return added
