"""The experiments manifest: one JSON file listing every experiment on this machine, wherever its
working directory is (``experiment list``, the web UI's experiments page, id resolution).

Location: ``$TRIALFLEET_HOME/experiments.json`` (default ``~/.trialfleet``). Writers take an exclusive
``flock`` and replace the file atomically, so concurrent managers and CLIs never lose an entry.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trialfleet.storage.manager_lock import manager_running


def trialfleet_home() -> Path:
    return Path(os.environ.get("TRIALFLEET_HOME") or Path.home() / ".trialfleet")


def manifest_path() -> Path:
    return trialfleet_home() / "experiments.json"


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _locked() -> Iterator[dict[str, dict[str, Any]]]:
    path = manifest_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = _read(path)
        yield entries
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entries, indent=2, sort_keys=True))
        os.replace(tmp, path)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def upsert(experiment_id: str, **fields: Any) -> None:
    with _locked() as entries:
        entries.setdefault(experiment_id, {"id": experiment_id}).update(fields)


def remove(experiment_id: str) -> None:
    with _locked() as entries:
        entries.pop(experiment_id, None)


def manager_alive(entry: dict[str, Any]) -> bool:
    """Whether the entry's manager runs: its experiment's lock is held (a pid may be a zombie or reused)."""
    directory = entry.get("experimentDir")
    if directory:
        return manager_running(Path(directory))
    return pid_alive(entry.get("pid"))


def entries() -> dict[str, dict[str, Any]]:
    """All entries; an entry whose manager is gone is shown STOPPED, unless it ended DONE or in ERROR."""
    result = _read(manifest_path())
    for entry in result.values():
        if not manager_alive(entry):
            if entry.get("status") not in ("ERROR", "DONE"):
                entry["status"] = "STOPPED"
            entry.pop("port", None)
    return result
