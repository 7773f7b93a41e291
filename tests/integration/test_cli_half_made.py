"""Nothing half-made, no silent death, through the real console script: directories that cannot be written are
refused before anything is created; an experiment is made whole or not at all (a disk too small for its
database); ``create``s racing for one port leave only the winner; an experiment whose start fails stays, in
ERROR, with the reason shown; a code directory over NNI's limits is refused by ``create`` itself; a disk that
fills up under a running manager (a real tmpfs) ends it in ERROR saying so, with the store intact, and
``resume`` continues once there is room; a fatal signal is the manager's last word too."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli_harness import (
    CONSOLE_SCRIPT,
    Cli,
    free_port,
    processes_mentioning,
    wait_until,
    write_experiment,
)
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore
from trialfleet.storage.manager_lock import manager_running

DISK_SIZE = "8m"  # the small disk: room for an experiment and a trial or two, quickly filled


def _mount_tmpfs(directory: Path, options: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.fail(f"these tests mount a tmpfs, which needs root: {result.stderr.strip()}")


def _unmount(directory: Path) -> None:
    if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(directory)], capture_output=True)  # a process still in it


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """An empty read-only file system."""
    directory = tmp_path / "read-only"
    _mount_tmpfs(directory, "ro,size=1m")
    yield directory
    _unmount(directory)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "small-disk"
    _mount_tmpfs(directory, f"size={DISK_SIZE},mode=0755")
    yield directory
    _unmount(directory)


def _config(tmp_path: Path, *, hold: bool, workdir: Path | None = None, extra: str = "") -> Path:
    config = write_experiment(tmp_path, hold=hold)
    text = config.read_text()
    if workdir is not None:
        text = text.replace(str(tmp_path / "experiments"), str(workdir))
    config.write_text(text + extra)
    return config


def _experiment_id(output: str) -> str:
    match = re.search(r"Experiment ID: (\w+)", output)
    assert match, output
    return match.group(1)


def _assert_nothing_made(cli: Cli, workdir: Path) -> None:
    assert not workdir.exists() or [p.name for p in workdir.iterdir()] == []
    assert cli.json("experiment", "list", "--all", "--json") == []


# ---- refused before anything is created ------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", ["home_is_a_file", "home_read_only", "working_dir_read_only", "working_dir_under_a_file"]
)
def test_an_unwritable_home_or_working_directory_is_refused_naming_it_and_why(
    tmp_path: Path, read_only_dir: Path, case: str
) -> None:
    cli = Cli.in_dir(tmp_path)
    workdir = tmp_path / "experiments"
    (tmp_path / "a-file").write_text("not a directory\n")
    named, cause = {
        "home_is_a_file": (tmp_path / "a-file", "not a directory"),
        "home_read_only": (read_only_dir / "home", "read-only file system"),
        "working_dir_read_only": (read_only_dir / "experiments", "read-only file system"),
        "working_dir_under_a_file": (tmp_path / "a-file" / "experiments", "not a directory"),
    }[case]
    if case.startswith("home"):
        cli.env["TRIALFLEET_HOME"] = str(named)
    else:
        workdir = named
    config = _config(tmp_path, hold=False, workdir=workdir)

    result = cli.run("create", "--config", str(config), "--port", str(free_port()))

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    what = "TRIALFLEET_HOME" if case.startswith("home") else "experiment working directory"
    message = " ".join(result.stderr.split())
    assert what in message and str(named) in message and cause in message, result.stderr
    _assert_nothing_made(cli, tmp_path / "experiments")
    assert not workdir.exists() or list(workdir.iterdir()) == []
    assert processes_mentioning(str(tmp_path)) == []


def test_an_experiment_is_made_whole_or_not_at_all(tmp_path: Path) -> None:
    """A working directory whose file system takes the checks but not the database: nothing is left of the
    experiment (no directory, no manifest entry, ``_latest`` unchanged). Made whole, its directory is 0700."""
    cli = Cli.in_dir(tmp_path)
    tiny = tmp_path / "tiny"
    _mount_tmpfs(tiny, "size=16k")
    try:
        (tiny / "_latest").symlink_to("an-earlier-experiment")
        config = _config(tmp_path, hold=False, workdir=tiny)
        result = cli.run("create", "--config", str(config), "--port", str(free_port()))
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert f"no space left on device ({tiny}" in " ".join(result.stderr.split()), result.stderr
        assert [p.name for p in tiny.iterdir()] == ["_latest"]
        assert os.readlink(tiny / "_latest") == "an-earlier-experiment"
        assert cli.json("experiment", "list", "--all", "--json") == []
    finally:
        _unmount(tiny)

    config = _config(tmp_path, hold=False)
    experiment_id = _experiment_id(
        cli.ok("create", "--config", str(config), "--port", str(free_port()), "--foreground")
    )
    made = tmp_path / "experiments"
    assert {p.name for p in made.iterdir()} == {"_latest", experiment_id}  # no temporary name left
    assert (made / experiment_id).stat().st_mode & 0o777 == 0o700


# ---- racing creates, failed starts ------------------------------------------------------------------------


def test_creates_racing_for_one_port_leave_only_the_winner(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = _config(tmp_path, hold=True)
    port = free_port()
    racers = [
        subprocess.Popen(
            [str(CONSOLE_SCRIPT), "create", "--config", str(config), "--port", str(port)],
            cwd=tmp_path,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [racer.communicate(timeout=120) for racer in racers]
    results = [(racer.returncode, out, err) for racer, (out, err) in zip(racers, outputs, strict=True)]
    try:
        winners = [out for code, out, _ in results if code == 0]
        assert len(winners) == 1, results
        losers = [(code, err) for code, _, err in results if code != 0]
        for code, err in losers:
            assert code == 2 and f"port {port}" in err and "already in use" in err, err
        winner = _experiment_id(winners[0])
        assert [e["id"] for e in cli.json("experiment", "list", "--all", "--json")] == [winner]
        assert {p.name for p in (tmp_path / "experiments").iterdir()} == {"_latest", winner}
    finally:
        (tmp_path / "code" / "hold").unlink()
        cli.run("stop", "--all")


BROKEN_TUNER = """\
tuner:
  className: broken_tuner.BrokenTuner
  codeDirectory: {directory}
"""


def test_an_experiment_whose_start_fails_stays_in_error_with_the_reason_shown(tmp_path: Path) -> None:
    """The port is free, but the manager cannot start the experiment (its custom tuner cannot be imported)."""
    cli = Cli.in_dir(tmp_path)
    tuner_dir = tmp_path / "tuner"
    tuner_dir.mkdir()
    (tuner_dir / "broken_tuner.py").write_text("import a_module_nobody_installed\n")
    config = _config(tmp_path, hold=False)
    text = re.sub(r"tuner:\n(  .*\n)+", BROKEN_TUNER.format(directory=tuner_dir), config.read_text())
    config.write_text(text)
    result = cli.run("create", "--config", str(config), "--port", str(free_port()))
    try:
        assert result.returncode == 1, result.stderr
        assert "a_module_nobody_installed" in result.stderr and "Traceback" not in result.stderr
        experiment_id = _experiment_id(result.stdout)
        assert f"experiment {experiment_id} failed" in result.stderr
        (entry,) = cli.json("experiment", "list", "--all", "--json")
        assert (entry["id"], entry["status"]) == (experiment_id, "ERROR")
        status = cli.json("experiment", "status", experiment_id)
        assert status["status"] == "ERROR" and "a_module_nobody_installed" in status["errors"][0]
        assert (tmp_path / "experiments" / experiment_id / "db").is_dir()
    finally:
        cli.run("stop", "--all")
    assert cli.json("experiment", "list", "--all", "--json")[0]["status"] == "ERROR"  # a stop hides nothing


# ---- NNI's limits on a shipped code directory, checked by create itself -----------------------------------


def _platform_block(platform: str, tmp_path: Path) -> str:
    """A ``trainingService`` that ships the code directory; nothing it names is reached before the refusal."""
    return {
        "remote": "  platform: remote\n  machineList:\n    - host: 127.0.0.1\n      port: 9\n"
        "      user: nobody\n      password: not-used\n",
        "slurm": f"  platform: slurm\n  sharedDirectory: {tmp_path / 'shared'}\n",
        "dlts": "  platform: dlts\n  dashboard: http://127.0.0.1:9/\n  email: nobody@example.com\n"
        "  password: not-used\n  team: nobody\n",
        "aml": "  platform: aml\n  subscriptionId: not-used\n  resourceGroup: nobody\n"
        "  workspaceName: nobody\n  computeTarget: nobody\n",
    }[platform]


@pytest.mark.parametrize("platform", ["remote", "slurm", "dlts", "aml"])
def test_a_code_directory_over_nnis_limits_is_refused_by_create(tmp_path: Path, platform: str) -> None:
    cli = Cli.in_dir(tmp_path)
    config = _config(tmp_path, hold=False)
    for index in range(2000):  # with trial.py: 2001 files
        (tmp_path / "code" / f"f{index:04d}.txt").write_text("x")
    config.write_text(config.read_text().replace("  platform: local\n", _platform_block(platform, tmp_path)))

    try:
        result = cli.run("create", "--config", str(config), "--port", str(free_port()))

        assert result.returncode == 2, (result.stdout, result.stderr)
        message = " ".join(result.stderr.split())
        limit = "is too big to upload: 2001 files (limit 2000)"
        assert f"trial code directory {tmp_path / 'code'} {limit}" in message
        assert ".nniignore" in message and "Traceback" not in result.stderr
        _assert_nothing_made(cli, tmp_path / "experiments")
        assert processes_mentioning(str(tmp_path)) == []
    finally:
        cli.run("stop", "--all")  # a manager started despite the limit


# ---- a full disk, a fatal signal: the manager says why it stops -------------------------------------------


def _fill(path: Path) -> None:
    """Write ``path`` until the device is full."""
    with open(path, "wb", buffering=0) as out:
        for size in (1 << 20, 4096, 1):
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc


def _metrics(store: ExperimentStore) -> set[tuple[int, str, int, str]]:
    return {(m.id, m.trial_id, m.sequence, m.data) for m in store.metrics(every_attempt=True)}


def _on_small_disk(tmp_path: Path, small_disk: Path) -> tuple[Cli, str, Path]:
    """An experiment created on the small disk, its trials held running: the CLI, its id and directory."""
    cli = Cli.in_dir(tmp_path)
    cli.env["TRIALFLEET_HOME"] = str(small_disk / "home")
    config = _config(tmp_path, hold=True, workdir=small_disk / "experiments")
    experiment_id = _experiment_id(cli.ok("create", "--config", str(config), "--port", str(free_port())))
    return cli, experiment_id, small_disk / "experiments" / experiment_id


def test_a_full_disk_ends_the_manager_in_error_saying_why_and_resume_continues(
    tmp_path: Path, small_disk: Path
) -> None:
    cli, experiment_id, experiment_dir = _on_small_disk(tmp_path, small_disk)
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    filler = small_disk / "filler"
    try:
        wait_until(lambda: store.metric_count() >= 12, "the four running trials' first metrics")
        stored = _metrics(store)
        _fill(filler)

        wait_until(lambda: not manager_running(experiment_dir), "the manager to stop on the full disk")
        experiment = store.experiment()
        assert experiment.status is ExperimentStatus.ERROR, experiment
        assert experiment.error is not None and experiment.error.startswith(
            f"no space left on device ({small_disk}"
        )
        log = (experiment_dir / "log" / "manager.log").read_text()
        assert f"the manager stops: {experiment.error}" in log
        (entry,) = cli.json("experiment", "list", "--all", "--json")
        assert entry["status"] == "ERROR"
        assert cli.json("experiment", "status", experiment_id)["errors"] == [experiment.error]
        assert store.integrity_check() == "ok"
        assert stored <= _metrics(store)

        filler.unlink()
        resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))
        assert "4 running trial(s) re-adopted" in resumed  # left running by the manager that stopped
        (tmp_path / "code" / "hold").unlink()
        wait_until(
            lambda: store.experiment().status is ExperimentStatus.DONE, "the resumed experiment to end"
        )
        assert store.experiment().error is None
        assert store.integrity_check() == "ok"
        assert stored <= _metrics(store)
        assert len(store.final_metrics([t.id for t in store.trials()])) == 6
    finally:
        filler.unlink(missing_ok=True)
        (tmp_path / "code" / "hold").unlink(missing_ok=True)
        cli.run("stop", "--all")
        store.close()
    assert processes_mentioning(str(experiment_dir)) == []


def test_a_fatal_signal_is_the_managers_last_word(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    experiment_id = _experiment_id(
        cli.ok("create", "--config", str(_config(tmp_path, hold=True)), "--port", str(port))
    )
    experiment_dir = tmp_path / "experiments" / experiment_id
    try:
        wait_until(
            lambda: (
                [j["status"] for j in cli.json("trial", "ls", experiment_id, "--json")].count("RUNNING") == 4
            ),
            "four running trials",
        )
        (entry,) = cli.json("experiment", "list", "--json")
        os.kill(int(entry["pid"]), signal.SIGUSR1)
        wait_until(lambda: not manager_running(experiment_dir), "the manager to end")

        status = cli.json("experiment", "status", experiment_id)
        assert status == {"status": "ERROR", "errors": ["the manager received SIGUSR1"]}
        assert cli.json("experiment", "list", "--all", "--json")[0]["status"] == "ERROR"
        log = (experiment_dir / "log" / "manager.log").read_text()
        assert "the manager stops: the manager received SIGUSR1" in log
        # on the same port: the trials it left running do not hold the listening socket create handed over
        assert "4 running trial(s) re-adopted" in cli.ok("resume", experiment_id, "--port", str(port))
    finally:
        (tmp_path / "code" / "hold").unlink()
        cli.run("stop", "--all")


def test_trials_ending_on_a_full_disk_keep_their_end_and_name_enospc(
    tmp_path: Path, small_disk: Path
) -> None:
    """Issue 44, item 7: trials that ran to their end while the disk was full were reported `lost: the trial
    keeper disappeared` (their keepers could not write result.json), `trial ls` said `disk I/O error` (the
    database's -shm file could not grow) and `view` that the manager 'recorded no reason'."""
    cli, experiment_id, experiment_dir = _on_small_disk(tmp_path, small_disk)
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    fillers = [small_disk / "filler", small_disk / "filler2"]
    try:
        wait_until(lambda: store.metric_count() >= 12, "the four running trials' first metrics")
        stored = _metrics(store)
        running = [t.id for t in store.trials()]
        store.close()
        _fill(fillers[0])
        wait_until(lambda: not manager_running(experiment_dir), "the manager to stop on the full disk")
        _fill(fillers[1])  # what the manager gave back as it stopped
        (tmp_path / "code" / "hold").unlink()  # the trials end, on a full disk
        wait_until(
            lambda: not processes_mentioning(str(experiment_dir)), "the trials and their keepers to end"
        )

        listed = cli.run("trial", "ls", experiment_id)
        assert listed.returncode == 0, listed.stderr
        assert all(trial_id in listed.stdout for trial_id in running), listed.stdout
        viewed = cli.run("view", experiment_id, "--port", str(free_port()))
        assert "recorded no reason" not in viewed.stderr
        assert viewed.returncode == 0 or "no space left on device" in viewed.stderr, viewed.stderr
        cli.run("stop", "--all")

        for filler in fillers:
            filler.unlink()
        cli.ok("resume", experiment_id, "--port", str(free_port()))
        store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
        wait_until(
            lambda: store.trial(running[0]).status.is_terminal, "the resumed manager to read their ends"
        )
        for trial_id in running:
            trial = store.trial(trial_id)
            assert trial.message is not None and "lost" not in trial.message, trial
            assert "no space left on device (ENOSPC)" in trial.message, trial
        assert stored <= _metrics(store)
    finally:
        for filler in fillers:
            filler.unlink(missing_ok=True)
        (tmp_path / "code" / "hold").unlink(missing_ok=True)
        cli.run("stop", "--all")
        store.close()
    assert processes_mentioning(str(experiment_dir)) == []
