"""The emulators' container runner: mounts at container paths, a clean environment, the whole tree stopped."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.emulators.container import Container, Mount, container_env, remove_created_mountpoints


def wait_exit(container: Container) -> int:
    deadline = time.monotonic() + 30
    while (code := container.poll()) is None:
        assert time.monotonic() < deadline, "the container's command never ended"
        time.sleep(0.02)
    return code


def test_mounts_appear_at_container_paths_only_inside(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    storage.mkdir()
    (storage / "code.txt").write_text("from the storage\n")
    target = f"/mnt/trialfleet-test-{os.getpid()}/data"
    script = (
        f"cat {target}/code.txt; echo written > {target}/out.txt; echo $NNI_X; env | grep -c MANAGER_ONLY"
    )
    os.environ["MANAGER_ONLY"] = "1"
    try:
        container = Container(
            ["bash", "-c", script],
            env=container_env({"NNI_X": "injected"}),
            stdout=tmp_path / "log",
            mounts=[Mount(storage, target)],
        )
        container.start()
        assert wait_exit(container) == 1  # grep -c found nothing: the manager's environment does not leak in
    finally:
        del os.environ["MANAGER_ONLY"]
    assert (tmp_path / "log").read_text() == "from the storage\ninjected\n0\n"
    assert (storage / "out.txt").read_text() == "written\n"
    assert not Path(target, "code.txt").exists()  # the bind mount lives in the container's namespace only
    remove_created_mountpoints()
    assert not Path(target).parent.exists()


def test_stop_ends_the_whole_tree_and_reports_the_signal(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; trap '' TERM; sleep 300"
    container = Container(["bash", "-c", script], env=container_env({}), stdout=tmp_path / "log")
    container.start()
    deadline = time.monotonic() + 30
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    background = int(pids.read_text())
    assert container.stop(grace=0.5) == 128 + 9  # the shell ignored SIGTERM: SIGKILL after the grace
    deadline = time.monotonic() + 10
    while Path(f"/proc/{background}").exists():
        stat = Path(f"/proc/{background}/stat").read_text()
        if stat[stat.rindex(")") + 2] == "Z":
            break
        assert time.monotonic() < deadline, "the background sleep survived"
        time.sleep(0.02)


def test_stop_also_ends_what_left_the_session(tmp_path: Path) -> None:
    """A daemon that called setsid dies with its container, as with the end of the container's PID namespace."""
    pids = tmp_path / "pids"
    script = f"setsid sleep 300 & echo $! > {pids}; sleep 300"
    container = Container(["bash", "-c", script], env=container_env({}), stdout=tmp_path / "log")
    container.start()
    deadline = time.monotonic() + 30
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    daemon = int(pids.read_text())
    while _session(daemon) != daemon:  # setsid has run
        assert time.monotonic() < deadline, "the daemon never left the container's session"
        time.sleep(0.02)
    container.stop(grace=0.5)
    deadline = time.monotonic() + 10
    try:
        while _session(daemon) == daemon:
            assert time.monotonic() < deadline, "the daemon outside the container's session survived its stop"
            time.sleep(0.02)
    finally:
        if _session(daemon) == daemon:  # a failing run must not leave it behind
            os.kill(daemon, signal.SIGKILL)


def _session(pid: int) -> int | None:
    """The session of a live process; None once it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[3])


def test_exit_code_of_a_failing_command(tmp_path: Path) -> None:
    container = Container(["bash", "-c", "exit 3"], env=container_env({}), stdout=tmp_path / "log")
    container.start()
    assert wait_exit(container) == 3


def test_commands_that_cannot_run_exit_as_with_a_runtime(tmp_path: Path) -> None:
    missing = Container(["no-such-command-anywhere"], env=container_env({}), stdout=tmp_path / "missing.log")
    missing.start()
    assert wait_exit(missing) == 127
    assert "executable file not found in $PATH" in (tmp_path / "missing.log").read_text()
    text = tmp_path / "not-a-program"
    text.write_text("just words\n")
    text.chmod(0o755)
    unrunnable = Container([str(text)], env=container_env({}), stdout=tmp_path / "format.log")
    unrunnable.start()
    assert wait_exit(unrunnable) == 126
