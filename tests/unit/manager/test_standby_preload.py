"""A standby manager, while it waits for its experiment, imports the platforms of the config being created and
what their start imports (``preload_modules``: asyncssh for a remote fleet), and the built-in algorithms it names
with their libraries (Optuna for TPE), and nothing it was not told of: a remote experiment's manager does not
import the local platform any more, nor a local one asyncssh, nor a Random search Optuna. Each case is a fresh
interpreter, as a standby is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOCAL = "trialfleet.training_services.local.service"
REMOTE = "trialfleet.training_services.remote.service"
TPE = "trialfleet.tuning.tuners.optuna_samplers"
RANDOM = "trialfleet.tuning.tuners.random_search"
MEDIANSTOP = "trialfleet.tuning.assessors.medianstop"
WATCHED = (LOCAL, REMOTE, "asyncssh", TPE, RANDOM, MEDIANSTOP, "optuna", "custom_tuner")


def imported_by_preload(config: str | None, *, orders_came: bool = False) -> list[str]:
    """What ``preload`` imports in a fresh interpreter started in the config's directory (a module there is
    importable); ``orders_came``: its orders socket is readable already."""
    script = (
        "import json, socket, sys\n"
        "from trialfleet.manager.process import preload\n"
        f"before = {{m for m in {WATCHED!r} if m in sys.modules}}\n"
        "cli, standby = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        f"if {orders_came!r}: cli.send(b'{{}}')\n"
        "preload(sys.argv[1] if len(sys.argv) > 1 else None, standby.fileno())\n"
        f"print(json.dumps(sorted(m for m in {WATCHED!r} if m in sys.modules and m not in before)))\n"
    )
    argv = [sys.executable, "-c", script] + ([config] if config is not None else [])
    cwd = Path(config).parent if config is not None else None
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120, cwd=cwd)
    return list(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("service", "imported"),
    [
        ("{platform: remote, machineList: [{host: h}]}", ["asyncssh", REMOTE]),
        ("{platform: local}", [LOCAL]),
        ("[{platform: local}, {platform: remote, machineList: [{host: h}]}]", ["asyncssh", LOCAL, REMOTE]),
        ("{platform: no-such-platform}", []),  # left for the start to report
    ],
)
@pytest.mark.slow
def test_the_platforms_of_the_config_and_what_they_preload(
    tmp_path: Path, service: str, imported: list[str]
) -> None:
    config = tmp_path / "config.yml"
    config.write_text(f"trialCommand: x\ntrialConcurrency: 1\ntrainingService: {service}\n")
    assert imported_by_preload(str(config)) == imported


@pytest.mark.slow
def test_without_a_config_the_local_platform(tmp_path: Path) -> None:
    assert imported_by_preload(None) == [LOCAL]  # resume and view: the platform nearly every experiment uses
    assert imported_by_preload(str(tmp_path / "missing.yml")) == []


@pytest.mark.parametrize(
    ("algorithms", "imported"),
    [
        ("tuner: {name: TPE}", ["optuna", LOCAL, TPE]),
        ("tuner: {name: random}", [LOCAL, RANDOM]),  # names match as NNI's do, whatever their case
        ("tuner: {name: Random}\nassessor: {name: Medianstop}", [LOCAL, MEDIANSTOP, RANDOM]),
        ("advisor: {name: BOHB}", ["optuna", LOCAL]),  # BOHB's own module is tuners.bohb
        ("tuner: {name: NoSuchTuner}", [LOCAL]),  # left for the start to report
        ("tuner: {className: custom_tuner.Mine, codeDirectory: .}", [LOCAL]),  # the user's code: the start's
    ],
)
@pytest.mark.slow
def test_the_algorithms_of_the_config_and_their_libraries(
    tmp_path: Path, algorithms: str, imported: list[str]
) -> None:
    (tmp_path / "custom_tuner.py").write_text("raise SystemExit('imported by the standby')\n")
    config = tmp_path / "config.yml"
    config.write_text(
        f"trialCommand: x\ntrialConcurrency: 1\n{algorithms}\ntrainingService: {{platform: local}}\n"
    )
    assert imported_by_preload(str(config)) == imported


@pytest.mark.slow
def test_once_the_orders_came_the_algorithms_are_left_to_the_start(tmp_path: Path) -> None:
    """The start imports them in the driver's thread while the platforms prepare (SSH handshakes, a spawner)."""
    config = tmp_path / "config.yml"
    config.write_text(
        "trialCommand: x\ntrialConcurrency: 1\ntuner: {name: TPE}\ntrainingService: {platform: local}\n"
    )
    assert imported_by_preload(str(config), orders_came=True) == [LOCAL]
    assert imported_by_preload(str(config)) == ["optuna", LOCAL, TPE]
