"""The secrets of an experiment's config (SSH passwords and passphrases, platform tokens, what looks like a
credential in a trial command or an environment: :mod:`trialfleet.config.credentials`) are kept out of its
database, which the REST API, the web UI, ``experiment export`` and support bundles read.

The database holds the config with each secret masked (``******``); ``<experiment dir>/secrets.json``, readable by
its owner only (0600), holds them by JSON pointer for the manager, which needs them to reconnect on resume.
A database written before this split is cleaned the first time the manager opens it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialfleet.config.base import SECRET_MASK
from trialfleet.errors import StoreError

if TYPE_CHECKING:
    from trialfleet.config import ExperimentConfig
    from trialfleet.storage.store import ExperimentStore

SECRETS_FILE = "secrets.json"


def stored_form(config: ExperimentConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """The config as the database keeps it (secrets masked), and the secrets by JSON pointer."""
    masked = config.to_json()
    return masked, dict(_secrets(config.to_json(include_secrets=True), masked))


def save(experiment_dir: Path, secrets: Mapping[str, str]) -> None:
    """Write ``secrets.json`` for the owner only (replaced atomically); none: no file."""
    path = Path(experiment_dir) / SECRETS_FILE
    if not secrets:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{SECRETS_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(secrets), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(experiment_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((Path(experiment_dir) / SECRETS_FILE).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the experiment's secrets in {experiment_dir}: {exc}") from exc
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def merged(stored: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
    """The stored config with its masked secrets filled in."""
    config = json.loads(json.dumps(stored))
    for pointer, value in secrets.items():
        *parents, last = [_unescape(part) for part in pointer.split("/")[1:]]
        node = config
        try:
            for part in parents:
                node = node[int(part) if isinstance(node, list) else part]
            key = int(last) if isinstance(node, list) else last
            if isinstance(node[key], str) and SECRET_MASK in node[key]:  # a secret, or a command masked in part
                node[key] = value
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # the key was updated away
    return config


def manager_config(store: ExperimentStore, experiment_dir: Path) -> ExperimentConfig:
    """The config a manager runs with, secrets included; secrets a database still holds in clear (written
    before the split) are moved to ``secrets.json`` first, unless the store is read-only."""
    from trialfleet.config import ExperimentConfig

    stored = store.experiment().config
    config = ExperimentConfig.from_json(merged(stored, load(experiment_dir)))
    masked, secrets = stored_form(config)
    if masked != stored and not store.readonly:
        save(experiment_dir, secrets)
        store.update_experiment(config=masked)
    return config


def _secrets(full: Any, masked: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(full, dict) and isinstance(masked, dict):
        for key, value in full.items():
            yield from _secrets(value, masked.get(key), f"{pointer}/{_escape(key)}")
    elif isinstance(full, list) and isinstance(masked, list):
        for index, (value, shown) in enumerate(zip(full, masked, strict=False)):
            yield from _secrets(value, shown, f"{pointer}/{index}")
    elif isinstance(masked, str) and isinstance(full, str) and masked != full and SECRET_MASK in masked:
        yield pointer, full


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")
