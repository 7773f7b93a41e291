"""An experiment's secrets (SSH passwords, passphrases) never reach its database: they are masked there and kept
in a user-only secrets.json, from which the manager gets them back; a database that still holds them in clear
(written before the split) is cleaned when a manager opens it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from trialfleet.config import load_config
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.storage import ExperimentStore, secrets
from trialfleet.storage.store import DB_RELATIVE_PATH

CONFIG = """\
searchSpace: {x: {_type: choice, _value: [1]}}
trialCommand: python3 trial.py
trialConcurrency: 1
trialCodeDirectory: .
tuner: {name: Random}
experimentWorkingDirectory: WORKDIR
trainingService:
  platform: remote
  machineList:
    - {host: 10.0.0.1, user: alice, password: "hunter/2~"}
    - {host: 10.0.0.2, user: bob, sshKeyFile: KEYFILE, sshPassphrase: open-sesame}
"""


def _remote_config(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("not really a key\n")
    path = tmp_path / "config.yml"
    path.write_text(CONFIG.replace("WORKDIR", str(tmp_path / "exps")).replace("KEYFILE", str(key)))
    return path


def _database_text(experiment_dir: Path) -> str:
    conn = sqlite3.connect(experiment_dir / DB_RELATIVE_PATH)
    try:
        return "\n".join(line for line in conn.iterdump())
    finally:
        conn.close()


def test_secrets_are_masked_in_the_database_and_kept_for_the_owner_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    config = load_config(_remote_config(tmp_path)).config
    _, experiment_dir = create_experiment(config)
    dump = _database_text(experiment_dir)
    assert "hunter/2~" not in dump and "open-sesame" not in dump and "******" in dump
    kept = experiment_dir / secrets.SECRETS_FILE
    assert kept.stat().st_mode & 0o777 == 0o600
    assert json.loads(kept.read_text()) == {
        "/trainingService/machineList/0/password": "hunter/2~",
        "/trainingService/machineList/1/sshPassphrase": "open-sesame",
    }
    manager = ExperimentManager(experiment_dir)
    machines = manager.config.training_services[0].machine_list  # type: ignore[union-attr]
    assert machines[0].password.get_secret_value() == "hunter/2~"
    assert machines[1].ssh_passphrase.get_secret_value() == "open-sesame"
    assert "hunter" not in json.dumps(manager.config.to_json())  # what REST serves


def test_a_database_holding_secrets_in_clear_is_cleaned_when_opened(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    config = load_config(_remote_config(tmp_path)).config
    _, experiment_dir = create_experiment(config)
    (experiment_dir / secrets.SECRETS_FILE).unlink()
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    store.update_experiment(config=config.to_json(include_secrets=True))  # as versions before the split did
    store.close()
    assert "hunter/2~" in _database_text(experiment_dir)

    manager = ExperimentManager(experiment_dir)
    assert manager.config.training_services[0].machine_list[0].password.get_secret_value() == "hunter/2~"  # type: ignore[union-attr]
    assert "hunter/2~" not in _database_text(experiment_dir)
    assert "hunter/2~" in (experiment_dir / secrets.SECRETS_FILE).read_text()


def test_merging_skips_secrets_whose_key_is_gone() -> None:
    stored = {"a": {"b/c": "******", "list": ["******", "plain"]}}
    kept = {"/a/b~1c": "one", "/a/list/0": "two", "/a/list/5": "gone", "/z/y": "gone too"}
    assert secrets.merged(stored, kept) == {"a": {"b/c": "one", "list": ["two", "plain"]}}
