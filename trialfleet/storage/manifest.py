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

from trialfleet.errors import StoreError
from trialfleet.storage.disk import write_error
from trialfleet.storage.manager_lock import manager_running
from trialfleet.storage.store import ExperimentStore


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
    """The entries to change, written back atomically: a failed write (a full disk) leaves the file as it was."""
    path = manifest_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_suffix(".lock"), "a+")  # noqa: SIM115 - closed below, after the replace
    except OSError as exc:
        raise write_error(exc, path.parent, "TRIALFLEET_HOME") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = _read(path)
        yield entries
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            tmp.write_text(json.dumps(entries, indent=2, sort_keys=True))
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise write_error(exc, path, "the experiments manifest") from exc


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):  # no manifest yet (or TRIALFLEET_HOME is not a directory)
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
    """All entries; an entry whose manager is gone is shown STOPPED, unless it ended DONE or in ERROR, and
    with an end time: the one its manager recorded, else its database's (a killed manager recorded none)."""
    result = _read(manifest_path())
    for entry in result.values():
        if not manager_alive(entry):
            if entry.get("status") not in ("ERROR", "DONE"):
                entry["status"] = "STOPPED"
            entry.pop("port", None)
            if not entry.get("endTime"):
                entry["endTime"] = _stored_end_ms(entry)
    return result


def _stored_end_ms(entry: dict[str, Any]) -> int | None:
    """The end time in the experiment's database, else the time of its last event; None if unreadable."""
    directory = entry.get("experimentDir")
    if not directory:
        return None
    try:
        store = ExperimentStore.for_experiment_dir(directory, readonly=True)
    except StoreError:
        return None
    try:
        ended = store.experiment().end_time or store.last_activity()
    except StoreError:
        return None
    finally:
        store.close()
    return None if ended is None else int(ended * 1000)
