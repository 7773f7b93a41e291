#!/usr/bin/env python3
"""trialfleet's entry point in a Kubernetes container: runs the trial keeper for this replica, exits as the trial did.

Usage::

    python3 -I -S entrypoint.py <trial_dir> <keeper.py> <shim_dir> <role> <primary role> <index variables, comma-separated> once|restartable

Standalone on purpose (stdlib only, Python >= 3.8), like the keeper: it is copied to the storage and run by the
image's ``python3``. Every replica of a trial's job runs it:

* The primary replica (index 0 of the primary role) runs in the trial directory itself: its metrics, logs and
  final record are the trial's. Every other replica runs in ``<trial_dir>/replicas/<role>-<index>/``, made here
  from the role's ``command.<role>.json`` and the trial's ``parameter.cfg``; its files stay there.
* ``once`` (Kubeflow, FrameworkController): a replica that already ran in its directory — a pod its operator
  made again after a node was lost — does not run the trial a second time (exit 1). ``restartable`` (AdaptDL
  restarts every replica when it rescales a job): the records of the previous run are removed; the metric
  stream and the logs go on.
* SIGTERM, SIGINT and SIGHUP are passed on to the keeper, which ends the trial's process tree and records it
  (as PID 1 of a container this process is the one the kubelet signals).
* The exit status is the trial's, so the operator judges the replica as the trial went: its exit code, 128 + the
  signal that killed it, 143 when it was canceled (AdaptDL's mark of a preempted replica), 124 after a
  timeout, 1 when the keeper left no record.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys

#: trialfleet.compat.REAL_NNI_PROBE (a test keeps the two equal): prints yes when python3 has a real nni
REAL_NNI_PROBE = (
    "import importlib.util, os\n"
    "s = importlib.util.find_spec('nni')\n"
    "o = s.origin if s is not None else None\n"
    "print('yes' if o and not os.path.exists(os.path.join(os.path.dirname(o), '_trialfleet.py')) else 'no')\n"
)
#: trialfleet.training_services.environment.CHANNEL_VARIABLES
CHANNEL_VARIABLES = ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS")
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
RUN_RECORDS = ("launch.json", "keeper.json", "result.json")
REPLICAS = "replicas"


def replica_dir(trial_dir: str, role: str, primary: str, index: str) -> str:
    if role == primary and index in ("", "0"):
        return trial_dir
    return os.path.join(trial_dir, REPLICAS, f"{role}-{index or '0'}")


def prepare_replica(trial_dir: str, directory: str, role: str) -> None:
    """A non-primary replica's directory: the role's command and the trial's parameters."""
    os.makedirs(os.path.join(directory, ".nni"), exist_ok=True)
    shutil.copyfile(os.path.join(trial_dir, f"command.{role}.json"), os.path.join(directory, "command.json"))
    shutil.copyfile(os.path.join(trial_dir, "parameter.cfg"), os.path.join(directory, "parameter.cfg"))


def keeper_env(directory: str, shim_dir: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in CHANNEL_VARIABLES}
    env["NNI_SYS_DIR"] = env["NNI_OUTPUT_DIR"] = directory
    try:
        probe = subprocess.run(
            ["python3", "-c", REAL_NNI_PROBE],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        real_nni = probe.stdout.decode(errors="replace").strip() == "yes"
    except (OSError, subprocess.SubprocessError):
        real_nni = False  # the trial's own python3 then fails and says why
    if not real_nni:
        env["PYTHONPATH"] = shim_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def exit_status(directory: str, keeper_status: int) -> int:
    try:
        with open(os.path.join(directory, "result.json")) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return 128 - keeper_status if keeper_status < 0 else 1
    if result.get("canceled"):
        return 143
    if result.get("timed_out"):
        return 124
    if isinstance(result.get("exit_code"), int):
        return min(max(result["exit_code"], 0), 255)
    if isinstance(result.get("signal"), int):
        return 128 + result["signal"]
    return 1


def run_keeper(keeper: str, directory: str, env: dict) -> int:
    # blocked until the handlers are in place, so a cancel arriving meanwhile is passed on, not lost; the
    # keeper inherits the mask, which it sets itself first thing anyway
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    with open(os.path.join(directory, "keeper.log"), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", keeper, directory],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def forward(signo: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            process.send_signal(signo)

    for signo in FORWARDED:
        signal.signal(signo, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    return process.wait()


def main(argv: list) -> int:
    if len(argv) != 8 or argv[7] not in ("once", "restartable"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    trial_dir, keeper, shim_dir, role, primary, index_variable, mode = argv[1:]
    # the first of the variables that is set: operators of different versions label the index differently
    index = next((os.environ[name] for name in index_variable.split(",") if os.environ.get(name)), "0")
    directory = replica_dir(trial_dir, role, primary, index)
    if directory != trial_dir:
        prepare_replica(trial_dir, directory, role)
    if mode == "once" and os.path.exists(os.path.join(directory, "launch.json")):
        sys.stderr.write(f"trialfleet: this replica already ran in {directory}; it is not run twice\n")
        return 1
    for record in RUN_RECORDS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, record))
    status = run_keeper(keeper, directory, keeper_env(directory, shim_dir))
    return exit_status(directory, status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
