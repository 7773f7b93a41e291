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


def entries() -> dict[str, dict[str, Any]]:
    """All entries; an entry whose manager process is gone is shown STOPPED (or its final status)."""
    result = _read(manifest_path())
    for entry in result.values():
        if not pid_alive(entry.get("pid")):
            if entry.get("status") != "ERROR":
                entry["status"] = "STOPPED"
            entry.pop("port", None)
    return result
