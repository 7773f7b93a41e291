"""The trial keeper run on its own, as remote hosts and cluster nodes run it: a process and files, nothing else."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from training_service_helpers import HANG_GUARD

from trialfleet.training_services.trial_dir import KEEPER_SCRIPT, KEEPER_VERSION
from trialfleet.trial_keeper import keeper as keeper_mod
from trialfleet.trial_keeper.keeper import PROTOCOL


def python38() -> str | None:
    """A working Python 3.8 interpreter (pyenv shims exist for versions that are not activated)."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    candidates += [found] if (found := shutil.which("python3.8")) else []
    for python in candidates:
        if subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0:
            return python
    return None


def write_command(trial_dir: Path, script: str, **options: Any) -> None:
    trial_dir.mkdir(parents=True, exist_ok=True)
    command = {"argv": ["/bin/bash", "-c", script], "cwd": str(trial_dir), "env": {}, "env_unset": []}
    command.update({"max_duration": None, "kill_grace": 5, "protocol": PROTOCOL}, **options)
    (trial_dir / "command.json").write_text(json.dumps(command))


def launch(trial_dir: Path, python: str = sys.executable) -> subprocess.Popen[bytes]:
    argv = [python, "-I", "-S", str(KEEPER_SCRIPT), str(trial_dir)]
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(path: Path) -> dict[str, Any]:
    deadline = time.monotonic() + HANG_GUARD
    while not path.exists():
        assert time.monotonic() < deadline, f"stuck: {path} never appeared"
        time.sleep(0.02)
    return json.loads(path.read_text())


def finish(keeper: subprocess.Popen[bytes], trial_dir: Path) -> dict[str, Any]:
    assert keeper.wait(HANG_GUARD) == 0
    return json.loads((trial_dir / "result.json").read_text())


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_version_matches_what_the_manager_expects() -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(KEEPER_SCRIPT), "--version"], capture_output=True, text=True
    )
    assert out.stdout.strip() == KEEPER_VERSION


def test_runs_on_python_3_8(tmp_path: Path) -> None:
    python = python38()
    if python is None:
        pytest.skip("no python3.8 on this machine to check the keeper's oldest supported Python")
    write_command(tmp_path, "echo old python; exit 7")
    result = finish(launch(tmp_path, python), tmp_path)
    assert (result["exit_code"], result["reason"]) == (7, "exit code 7")
    assert (tmp_path / "trial.stdout").read_text() == "old python\n"


def test_records_the_trial_and_its_exit(tmp_path: Path) -> None:
    write_command(tmp_path, "echo out; echo err >&2; exit 3")
    keeper = launch(tmp_path)
    result = finish(keeper, tmp_path)
    assert {k: result[k] for k in ("exit_code", "signal", "reason", "canceled", "timed_out", "protocol")} == {
        "exit_code": 3,
        "signal": None,
        "reason": "exit code 3",
        "canceled": False,
        "timed_out": False,
        "protocol": PROTOCOL,
    }
    record = json.loads((tmp_path / "keeper.json").read_text())
    assert record["keeper_pid"] == keeper.pid and record["pgid"] == record["pid"] != keeper.pid
    assert record["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert isinstance(record["start_ticks"], int) and isinstance(record["keeper_start_ticks"], int)
    assert record["start_time"] <= result["end_time"]
    assert (tmp_path / "trial.stdout").read_text() == "out\n" and (
        tmp_path / "trial.stderr"
    ).read_text() == "err\n"
    assert not list(tmp_path.glob("*.tmp*"))


def test_output_goes_straight_to_the_files(tmp_path: Path) -> None:
    (tmp_path / "trial.stdout").write_text("earlier\n")
    write_command(
        tmp_path,
        f"echo $$ > {tmp_path}/pid; echo later; while [ ! -e {tmp_path}/release ]; do sleep 0.02; done",
    )
    keeper = launch(tmp_path)
    deadline = time.monotonic() + HANG_GUARD
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    pid = int((tmp_path / "pid").read_text())
    assert os.readlink(f"/proc/{pid}/fd/1") == str(tmp_path / "trial.stdout")
    assert os.readlink(f"/proc/{pid}/fd/2") == str(tmp_path / "trial.stderr")
    (tmp_path / "release").touch()
    finish(keeper, tmp_path)
    assert (tmp_path / "trial.stdout").read_text() == "earlier\nlater\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_cancel_signals(tmp_path: Path, sig: signal.Signals) -> None:
    write_command(tmp_path, "sleep 600")
    keeper = launch(tmp_path)
    trial = wait_for(tmp_path / "keeper.json")
    keeper.send_signal(sig)
    result = finish(keeper, tmp_path)
    assert (result["canceled"], result["reason"], result["signal"]) == (True, "canceled", signal.SIGTERM)
    assert not alive(trial["pid"])


@pytest.mark.slow
def test_a_trial_killed_with_its_keeper_is_canceled_whichever_signal_came_first(tmp_path: Path) -> None:
    """scancel or a pod's deletion signals every process: the trial may die, and be reaped, before the keeper's
    own SIGTERM arrives. A cancel that comes before the record is written makes the record a cancel."""
    late_cancel = "keeper=$PPID; (trap '' TERM; sleep 0.3; kill -TERM $keeper) & kill -TERM $$"
    write_command(tmp_path, late_cancel)
    result = finish(launch(tmp_path), tmp_path)
    assert (result["canceled"], result["reason"], result["signal"]) == (True, "canceled", signal.SIGTERM)


@pytest.mark.slow
def test_a_trial_that_succeeds_just_before_a_cancel_stays_succeeded(tmp_path: Path) -> None:
    write_command(tmp_path, "keeper=$PPID; (trap '' TERM; sleep 0.3; kill -TERM $keeper) & exit 0")
    result = finish(launch(tmp_path), tmp_path)
    assert (result["canceled"], result["reason"], result["exit_code"]) == (False, "exit code 0", 0)


@pytest.mark.slow
def test_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    ignore_term = (
        "import pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "pathlib.Path('ready').touch(); time.sleep(600)"
    )
    write_command(tmp_path, f"{shlex.quote(sys.executable)} -c {shlex.quote(ignore_term)}", kill_grace=0.2)
    keeper = launch(tmp_path)
    deadline = time.monotonic() + HANG_GUARD
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline, "stuck: the trial never got ready"
        time.sleep(0.02)
    keeper.send_signal(signal.SIGTERM)
    result = finish(keeper, tmp_path)
    assert (result["canceled"], result["signal"]) == (True, signal.SIGKILL), result


@pytest.mark.slow
def test_timeout_ends_the_tree(tmp_path: Path) -> None:
    write_command(tmp_path, f"setsid sleep 600 & echo $! > {tmp_path}/bg; sleep 600", max_duration=0.3)
    result = finish(launch(tmp_path), tmp_path)
    assert (result["timed_out"], result["canceled"], result["reason"]) == (True, False, "timeout after 0.3s")
    assert not alive(int((tmp_path / "bg").read_text()))


def test_stragglers_are_ended_after_a_normal_exit(tmp_path: Path) -> None:
    write_command(tmp_path, f"setsid sleep 600 & echo $! > {tmp_path}/bg; (sleep 600 &); exit 0")
    result = finish(launch(tmp_path), tmp_path)
    assert result["exit_code"] == 0
    assert not alive(int((tmp_path / "bg").read_text()))


def test_keeper_outlives_its_launcher(tmp_path: Path) -> None:
    write_command(tmp_path, f"while [ ! -e {tmp_path}/release ]; do sleep 0.02; done; exit 0")
    # the launcher (a shell) starts the keeper in the background and exits at once, as SSH sessions do
    script = '"$0" -I -S "$1" "$2" </dev/null >/dev/null 2>&1 & echo $!'
    launcher = subprocess.run(
        ["/bin/bash", "-c", script, sys.executable, str(KEEPER_SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    keeper_pid = int(launcher.stdout)
    wait_for(tmp_path / "keeper.json")
    assert alive(keeper_pid)
    (tmp_path / "release").touch()
    assert wait_for(tmp_path / "result.json")["exit_code"] == 0


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    write_command(tmp_path, "true", cwd=str(tmp_path / "missing"))
    result = finish(launch(tmp_path), tmp_path)
    assert result["reason"].startswith("could not start:") and result["exit_code"] is None
    assert not (tmp_path / "keeper.json").exists()
    assert "could not start the trial command" in (tmp_path / "trial.stderr").read_text()


def test_an_unknown_protocol_is_a_keeper_error(tmp_path: Path) -> None:
    write_command(tmp_path, "true", protocol=99)
    keeper = launch(tmp_path)
    assert keeper.wait(HANG_GUARD) == 1
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["reason"].startswith("keeper error:") and "protocol 99" in result["reason"]


DAEMON = (
    "python3 -c 'import os, time\nif os.fork() == 0:\n    os.setsid()\n"
    '    open("daemon.tmp", "w").write(str(os.getpid()))\n    os.rename("daemon.tmp", "daemon.json")\n'
    "    time.sleep(600)' & "
)  # renamed into place: the test reads daemon.json as soon as it exists


@pytest.mark.slow
def test_a_daemon_dies_with_its_trial_after_the_keeper_was_killed(tmp_path: Path) -> None:
    """A setsid'd grandchild whose keeper was SIGKILLed is parented to init: only its cgroup (where the keeper
    may make one) and its marker still tie it to the trial."""
    write_command(tmp_path, DAEMON + "sleep 600")
    keeper_process = launch(tmp_path)
    record = wait_for(tmp_path / "keeper.json")
    daemon = wait_for(tmp_path / "daemon.json")
    members = keeper_mod.trial_tree(
        record["pid"], (), record["start_ticks"], record["marker"], record["cgroup"]
    )
    assert daemon in members and record["pid"] in members
    os.kill(keeper_process.pid, signal.SIGKILL)
    keeper_process.wait(HANG_GUARD)
    keeper_mod.end_without_keeper(str(tmp_path), canceled=True, grace=5)
    assert not any(alive(pid) for pid in members)
    assert json.loads((tmp_path / "result.json").read_text())["written_by"] == "manager"
    if record["cgroup"]:
        assert not Path(record["cgroup"]).exists(), "the trial's cgroup is removed with it"


def test_what_the_command_forks_at_once_is_in_the_trial_s_cgroup(tmp_path: Path) -> None:
    """The keeper moves the command into its cgroup once it runs; processes forked meanwhile are moved too."""
    probe = keeper_mod.make_cgroup("probe-" + os.urandom(4).hex())
    if probe is None:
        pytest.fail("this test needs a cgroup v2 the test user may create (the CI machine has one, as root)")
    keeper_mod.remove_cgroup(probe)
    write_command(tmp_path, "sleep 600 & sleep 600 & (sleep 600 &); sleep 600")
    keeper_process = launch(tmp_path)
    record = wait_for(tmp_path / "keeper.json")
    try:
        deadline = time.monotonic() + HANG_GUARD
        while True:  # the keeper.json is written before the move
            session = {pid for pid in keeper_mod.trial_tree(record["pid"]) if alive(pid)}
            if len(session) == 4 and session <= keeper_mod.cgroup_members(record["cgroup"]):
                break
            assert time.monotonic() < deadline, (session, keeper_mod.cgroup_members(record["cgroup"]))
            time.sleep(0.05)
    finally:
        keeper_process.send_signal(signal.SIGTERM)
    assert finish(keeper_process, tmp_path)["canceled"]
    assert not Path(record["cgroup"]).exists()


def test_the_marker_finds_a_process_outside_every_tree(tmp_path: Path) -> None:
    marker = os.urandom(8).hex()
    env = {**os.environ, keeper_mod.MARKER_VARIABLE: marker}
    stranger = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    try:
        assert keeper_mod.trial_tree(0, marker=marker) == {stranger.pid}
        assert keeper_mod.trial_tree(0, marker="another") == set()
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.slow
def test_the_trial_gets_the_keepers_environment_changed_as_told(tmp_path: Path) -> None:
    env = "import json, os; print(json.dumps(dict(os.environ)))"
    write_command(
        tmp_path,
        f"{sys.executable} -c {shlex.quote(env)}",
        env={"NNI_TRIAL_JOB_ID": "t1", "HOME": "/elsewhere"},
        env_unset=["KEEPER_ONLY"],
    )
    os.environ["KEEPER_ONLY"] = "x"
    try:
        finish(launch(tmp_path), tmp_path)
    finally:
        del os.environ["KEEPER_ONLY"]
    seen = json.loads((tmp_path / "trial.stdout").read_text())
    assert seen["NNI_TRIAL_JOB_ID"] == "t1" and seen["HOME"] == "/elsewhere" and "KEEPER_ONLY" not in seen
    assert seen["PATH"] == os.environ["PATH"]  # inherited
    assert seen[keeper_mod.MARKER_VARIABLE] == wait_for(tmp_path / "keeper.json")["marker"]


@pytest.mark.slow
def test_the_trial_starts_as_popen_would_start_it_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    """Spawned, not forked: the keeper's blocked signals and ignored SIGPIPE are not the trial's, nor is a
    descriptor the keeper was started with, and the trial leads its own group in the keeper's session."""

    def spawned(trial_dir: Path, argv: list[str]) -> int:
        write_command(trial_dir, "unused", argv=argv)
        extra_read, extra_write = os.pipe()  # inheritable in the keeper, as an SSH session might leave one
        try:
            keeper = subprocess.Popen(
                [sys.executable, "-I", "-S", str(KEEPER_SCRIPT), str(trial_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(extra_read, extra_write),
            )
            result = finish(keeper, trial_dir)
        finally:
            os.close(extra_read)
            os.close(extra_write)
        assert result["exit_code"] == 0, (trial_dir / "trial.stderr").read_text()
        return keeper.pid

    # the program's own status as exec'd (a shell blocks signals of its own while it runs its commands)
    spawned(tmp_path / "status", ["/bin/cat", "/proc/self/status"])
    masks = dict(line.split(":") for line in (tmp_path / "status/trial.stdout").read_text().splitlines())
    assert int(masks["SigBlk"], 16) == 0
    assert not int(masks["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1))
    look = "ls /proc/$$/fd; ps -o pgid=,sid= -p $$"
    keeper_pid = spawned(tmp_path / "ids", ["/bin/bash", "-c", look])
    fds, pgid, sid = (tmp_path / "ids/trial.stdout").read_text().rsplit(maxsplit=2)
    assert sorted(fds.split()) == ["0", "1", "2"]
    record = json.loads((tmp_path / "ids/keeper.json").read_text())
    assert int(pgid) == record["pid"] and int(sid) == keeper_pid


@pytest.mark.slow
def test_the_program_is_looked_up_in_the_commands_own_path(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "mytool").write_text("#!/bin/sh\necho found in $0\n")
    (tools / "mytool").chmod(0o755)
    trial = tmp_path / "trial"
    write_command(trial, "unused", argv=["mytool"], env={"PATH": f"{tools}:/usr/bin:/bin"})
    assert finish(launch(trial), trial)["exit_code"] == 0
    assert (trial / "trial.stdout").read_text() == f"found in {tools}/mytool\n"
    missing = tmp_path / "missing"
    write_command(missing, "unused", argv=["no-such-tool"])
    result = finish(launch(missing), missing)
    assert result["reason"] == "could not start: [Errno 2] No such file or directory: 'no-such-tool'"


def test_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "keeper.json")
    assert keeper_mod.read_record(str(tmp_path / "keeper.json")) is None
    with pytest.raises(keeper_mod.NotRegularFile, match="FIFO"):
        keeper_mod.open_regular(str(tmp_path / "keeper.json"))


def test_live_descendants_come_from_the_children_files(tmp_path: Path) -> None:
    """What a subreaper keeper moves into its cgroup, without scanning every process: children, grandchildren,
    no zombie, nobody else's."""
    child = subprocess.Popen(["/bin/bash", "-c", f"sleep 600 & echo $! > {tmp_path}/grandchild; wait"])
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not (tmp_path / "grandchild").exists() or not (tmp_path / "grandchild").read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        while alive(zombie.pid):  # it exited, unreaped
            assert time.monotonic() < deadline
            time.sleep(0.02)
        grandchild = int((tmp_path / "grandchild").read_text())
        mine = keeper_mod.live_descendants(os.getpid())
        assert mine is not None and {child.pid, grandchild} <= mine
        assert zombie.pid not in mine and os.getppid() not in mine and os.getpid() not in mine
        assert keeper_mod.live_descendants(child.pid) == {grandchild}
    finally:
        child.kill()
        child.wait()
        zombie.wait()
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "grandchild").read_text()), signal.SIGKILL)
