"""The probe's launch on its own: the copy of the code it makes for each trial, and what its start imports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trialfleet.testing.harness import wait_for_file
from trialfleet.training_services.support import run_as_module
from trialfleet.training_services.trial_dir import command_record, input_files
from trialfleet.trial_keeper import probe

PROBE_DIR = Path(probe.__file__).parent


def make_code_dir(root: Path) -> Path:
    code = root / "code"
    (code / "pkg" / "data").mkdir(parents=True)
    (code / "train.py").write_text("print('hello')\n")
    (code / "run.sh").write_text("#!/bin/sh\necho run\n")
    (code / "run.sh").chmod(0o750)
    (code / "pkg" / "__init__.py").write_text("")
    (code / "pkg" / "data" / "big.bin").write_bytes(os.urandom(3 << 20))  # beyond one sendfile call's chunk
    (code / "pkg" / "data" / "empty").write_bytes(b"")
    (code / "link-to-train").symlink_to("train.py")
    (code / "link-to-pkg").symlink_to("pkg")
    (code / "dangling").symlink_to("nowhere")
    (code / "locked").mkdir()
    (code / "locked" / "inside.txt").write_text("x")
    (code / "locked").chmod(0o555)  # its mode is set once its content is copied in
    os.utime(code / "train.py", ns=(1_000_000_000_123, 1_500_000_000_456))
    return code


def tree(root: Path) -> dict[str, tuple[str, int, int | str | bytes]]:
    """Every entry below ``root``: kind, permission bits, and the link's target or the file's bytes."""
    found: dict[str, tuple[str, int, int | str | bytes]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = ("link", 0, os.readlink(path))
        elif path.is_dir():
            found[name] = ("dir", info.st_mode & 0o7777, 0)
        else:
            found[name] = ("file", info.st_mode & 0o7777, path.read_bytes())
    return found


def test_copy_tree_copies_as_shutil_copytree_with_symlinks(tmp_path: Path) -> None:
    code = make_code_dir(tmp_path)
    try:
        probe.copy_tree(str(code), str(tmp_path / "ours"))
        shutil.copytree(code, tmp_path / "shutil", symlinks=True)
        ours, theirs = tree(tmp_path / "ours"), tree(tmp_path / "shutil")
        assert ours == theirs
        assert ours["link-to-pkg"] == ("link", 0, "pkg") and ours["run.sh"][1] == 0o750
        assert ours["locked"][1] == 0o555
        copied = tmp_path / "ours" / "train.py"
        assert copied.stat().st_mtime_ns == 1_500_000_000_456  # its atime moved: the tree was read
    finally:
        for directory in (code, tmp_path / "ours", tmp_path / "shutil"):
            if (directory / "locked").exists():
                (directory / "locked").chmod(0o755)


def launch_on_host(bundle: Path, request: dict[str, object], command: str = "launch") -> dict[str, object]:
    """``probe.py <command>`` (``launch``, ``launch_all``) as the manager runs it over SSH: its own interpreter, the
    request on stdin."""
    argv = run_as_module(str(bundle / "probe.py"), command)
    argv[0] = sys.executable
    done = subprocess.run(argv, input=json.dumps(request), capture_output=True, text=True, check=True)
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.slow
async def test_launch_copies_the_code_and_its_keeper_runs_the_trial_there(tmp_path: Path) -> None:
    bundle = tmp_path / "keeper"
    shutil.copytree(PROBE_DIR, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    code = make_code_dir(tmp_path)
    trial_dir = tmp_path / "trials" / "abc"
    command = command_record(["/bin/sh", "-c", "cat train.py > copied.txt"], str(trial_dir / "code"), {})
    request: dict[str, object] = {
        "trial_dir": str(trial_dir),
        "code_dir": str(code),
        "files": input_files("{}", command),
    }
    try:
        answer = launch_on_host(bundle, request)
        await wait_for_file(trial_dir / "result.json")
        result = json.loads((trial_dir / "result.json").read_text())
        assert result["exit_code"] == 0, result
        assert (trial_dir / "code" / "copied.txt").read_text() == "print('hello')\n"
        (trial_dir / "code" / "copied.txt").unlink()
        assert tree(trial_dir / "code") == tree(code)
        again = launch_on_host(bundle, request)  # a launch asked again answers with the first one's keeper
        assert again["existing"] is True and again["keeper_pid"] == answer["keeper_pid"]
    finally:
        for directory in (code, trial_dir / "code"):
            if (directory / "locked").exists():
                (directory / "locked").chmod(0o755)


async def test_launch_all_starts_each_trial_under_a_keeper_of_its_own_and_answers_a_failure_alone(
    tmp_path: Path,
) -> None:
    """The launches asked of a host at once, in one interpreter: each trial its own keeper and code copy; one that
    cannot be launched (its code directory is gone) is answered with its error, the others start all the same."""
    bundle = tmp_path / "keeper"
    shutil.copytree(PROBE_DIR, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hello')\n")

    def request(name: str, code_dir: Path = code) -> dict[str, object]:
        trial_dir = tmp_path / "trials" / name
        argv = ["/bin/sh", "-c", "echo $$ > pid.txt; cat train.py"]
        command = command_record(argv, str(trial_dir / "code"), {})
        return {"trial_dir": str(trial_dir), "code_dir": str(code_dir), "files": input_files("{}", command)}

    launches = [request("a"), request("b", tmp_path / "gone"), request("c")]
    answers = launch_on_host(bundle, {"launches": launches}, "launch_all")["launched"]
    assert isinstance(answers, list) and len(answers) == 3
    assert "FileNotFoundError" in answers[1]["error"] and "gone" in answers[1]["error"]
    first, third = answers[0]["answer"], answers[2]["answer"]
    assert first["keeper_pid"] != third["keeper_pid"] and first["existing"] is third["existing"] is False
    for name in ("a", "c"):
        trial_dir = tmp_path / "trials" / name
        await wait_for_file(trial_dir / "result.json")
        assert json.loads((trial_dir / "result.json").read_text())["exit_code"] == 0
        assert (trial_dir / "trial.stdout").read_text() == "print('hello')\n"  # its own copy of the code
    pids = {(tmp_path / "trials" / name / "code" / "pid.txt").read_text() for name in ("a", "c")}
    assert len(pids) == 2
    again = launch_on_host(bundle, {"launches": launches[:1]}, "launch_all")["launched"]
    assert again == [{"answer": dict(first, existing=True)}]  # asked again: the first launch's keeper


def test_the_launch_command_imports_nothing_heavy() -> None:
    """Each launch without reuse is an interpreter of its own: what the probe imports at start is paid per trial."""
    script = f"import sys; sys.path.insert(0, {str(PROBE_DIR)!r}); import probe; print(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    assert "probe" in loaded and "keeper" in loaded
    assert not loaded & {"base64", "shutil", "subprocess", "tarfile", "threading", "bz2", "lzma"}


def test_run_as_module_runs_the_probe_as_its_script_would_and_caches_its_compiled_form(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "keeper"
    shutil.copytree(PROBE_DIR, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    argv = run_as_module(str(bundle / "probe.py"), "poll")
    argv[0] = sys.executable
    request = json.dumps({"trials": [{"name": "t", "dir": str(tmp_path / "none")}]})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(argv, input=request, capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout)["trials"]["t"]["exists"] is False
    assert {p.name.split(".")[0] for p in (bundle / "__pycache__").iterdir()} == {"keeper", "probe"}
    usage = subprocess.run([*argv[:-1], "nonsense"], capture_output=True, text=True, env=env)
    assert usage.returncode == 2 and "usage: probe.py" in usage.stderr
