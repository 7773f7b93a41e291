"""Workload 4: the launch-overhead workload on 3 SSH hosts, each a network namespace with its own sshd.

The hosts come from the remote platform's test fixture (``tests/integration/remote/fleet.py``), imported
rather than copied. When they cannot be built here, the reason is returned and printed with the results.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.launch import LaunchSpec, run_launch, slot_gaps
from bench.stats import Figure, percentile
from bench.systems import TRIALS_DIR, System

FLEET_DIR = Path(__file__).resolve().parent.parent / "tests" / "integration" / "remote"
HOSTS = 3
HOST_PYTHON = "/usr/bin/python3"  # what `python3` is in an SSH session on the hosts


#: the variant name of the floor runs: the same trials, each in an SSH session of its own under its keeper (:func:`bare_ssh_run`)
BARE_SSH = "an SSH session and a keeper per trial"
#: the floor of the first trial's start (:func:`bare_first_start`)
BARE_START = (
    "a fresh Python importing pydantic, sqlite3 and asyncssh, connecting to the hosts, starting a keeper"
)

# run by bare_first_start: the libraries trialfleet's manager is built on (its config models' pydantic, its store's
# sqlite3, its SSH client), the connections to every host at once, then one session running the keeper in the
# foreground on the first host
_FIRST_START = """
import asyncio, json, shlex, sys
import sqlite3
import asyncssh
from pydantic import BaseModel
machines, options, keeper, trial_dir = json.loads(sys.argv[1])
async def main():
    connections = await asyncio.gather(*(
        asyncssh.connect(m["host"], port=m["port"], username=m["user"], client_keys=[m["sshKeyFile"]],
                         known_hosts=m["knownHosts"], **options)
        for m in machines
    ))
    await connections[0].run("python3 -I -S %s %s" % (shlex.quote(keeper), shlex.quote(trial_dir)))
    for connection in connections:
        connection.close()
asyncio.run(main())
"""


def run_remote(
    system: System, workdir: Path, spec: LaunchSpec, reps: int, *, floor: bool = False
) -> tuple[dict[str, list[dict[str, float]]], str | None]:
    """The runs under ``""`` (and with ``floor`` the floor runs under :data:`BARE_SSH`, taking turns with them), or
    no runs and why the fleet could not be used."""
    return run_remote_variants(system, workdir, spec, reps, {"": {}}, floor=floor)


def run_remote_variants(
    system: System,
    workdir: Path,
    spec: LaunchSpec,
    reps: int,
    variants: dict[str, dict[str, Any]],
    *,
    floor: bool = False,
) -> tuple[dict[str, list[dict[str, float]]], str | None]:
    """Per variant (extra keys of the ``trainingService`` block), its runs on one fleet, the variants taking
    turns in each repetition so that the machine's drifting load touches them alike; or why there are none.
    With ``floor``, each repetition also runs :func:`bare_ssh_run` on the same hosts (under :data:`BARE_SSH`)."""
    sys.path.insert(0, str(FLEET_DIR))
    try:
        from fleet import Fleet, missing_components
    except ImportError as exc:
        return {}, f"the fleet helper cannot be imported from {FLEET_DIR}: {exc}"
    missing = missing_components()
    if missing:
        return {}, f"missing for the SSH fleet: {', '.join(missing)}"
    bare = bare_remote_trial(reps=5).median
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    if floor:
        runs[BARE_SSH] = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as base:
        fleet = Fleet(Path(base), HOSTS)
        try:
            fleet.up()
            machines = [host.machine() for host in fleet.hosts]
            for _ in range(reps):
                for name, extra in variants.items():
                    service = {"platform": "remote", "machineList": machines, **extra}
                    run = run_launch(system, workdir, spec, bare, training_service=service, python="python3")
                    runs[name].append(run)
                if floor:
                    runs[BARE_SSH].append({**bare_ssh_run(machines, spec), **bare_first_start(machines)})
        except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
            return {}, f"the remote run failed: {type(exc).__name__}: {exc}"
        finally:
            fleet.down()
    return runs, None


def bare_remote_trial(reps: int) -> Figure:
    """The trial alone under the hosts' interpreter, ``import nni`` being trialfleet's shim."""
    from bench.machine import time_command
    from trialfleet.compat import SHIM_PATH

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SHIM_PATH)}
    with tempfile.TemporaryDirectory() as scratch:
        return time_command([HOST_PYTHON, str(TRIALS_DIR / "trial_nni.py")], reps, env=env, cwd=Path(scratch))


def bare_ssh_run(machines: list[dict[str, Any]], spec: LaunchSpec) -> dict[str, float]:
    """The floor of the remote gap on this machine: the same trials, at the same concurrency on the same hosts,
    each in an SSH session of its own (what ``reuseMode: false`` means) that runs trialfleet's keeper in the
    foreground, which runs the trial command as in the system's runs (the hosts' python3, the shim on its path).
    What is left out is the rest of trialfleet: manager, store, probe, runner and uploads. One asyncssh connection
    per host in this process; a slot asks for the next session as soon as the last one's ended.

    A trial's start is the keeper's record of starting its command (``keeper.json``), its end the keeper's record
    of its end: the gap, defined as the system's (see :func:`bench.launch.analyse`), then holds what a launch
    without reuse cannot drop, the session and the keeper's start, as the system's does (a trial counts as
    started there once its launch has answered). ``gap_from_request_median_s`` counts the start from the moment the
    session is asked for instead, as this floor did before 2026-12-01: that leaves the launch out of the gap."""
    with tempfile.TemporaryDirectory(prefix="bench-bare-ssh-") as scratch:  # the hosts share this file system
        dirs = [_bare_trial_dir(Path(scratch) / f"t{i}") for i in range(spec.trials)]
        return asyncio.run(_bare_ssh(machines, spec, dirs))


def bare_first_start(machines: list[dict[str, Any]]) -> dict[str, float]:
    """The floor of ``create`` → first trial RUNNING on this fleet: a fresh interpreter (started as the command
    is) that imports the libraries trialfleet's manager is built on (pydantic, sqlite3, asyncssh and asyncio),
    connects to every host at once as the manager does, and runs trialfleet's keeper in an SSH session on the
    first host; the trial's start is the keeper's record of starting its command. Left out: the CLI, the config's
    models and checks, the store, the manager, and the preparing session each host gets (the keeper is already on
    the hosts' shared file system here)."""
    from trialfleet.training_services.ssh import cipher_options
    from trialfleet.training_services.trial_dir import KEEPER_SCRIPT

    with tempfile.TemporaryDirectory(prefix="bench-bare-start-") as scratch:
        trial_dir = _bare_trial_dir(Path(scratch) / "t0")
        args = json.dumps([machines, cipher_options(), str(KEEPER_SCRIPT), str(trial_dir)])
        began = time.time()
        subprocess.run(
            [sys.executable, "-c", _FIRST_START, args], check=True, capture_output=True, timeout=120
        )
        started = json.loads((trial_dir / "keeper.json").read_text())["start_time"]
    return {"first_running_s": started - began}


def _bare_trial_dir(trial_dir: Path) -> Path:
    from trialfleet.compat import SHIM_PATH
    from trialfleet.training_services.trial_dir import command_record

    trial_dir.mkdir()
    argv = ["python3", str(TRIALS_DIR / "trial_nni.py")]
    command = command_record(argv, str(trial_dir), {"PYTHONPATH": str(SHIM_PATH)})
    (trial_dir / "command.json").write_text(json.dumps(command))
    return trial_dir


async def _bare_ssh(machines: list[dict[str, Any]], spec: LaunchSpec, dirs: list[Path]) -> dict[str, float]:
    import asyncssh

    from trialfleet.training_services.ssh import cipher_options
    from trialfleet.training_services.trial_dir import KEEPER_SCRIPT

    connections = [
        await asyncssh.connect(
            m["host"],
            port=m["port"],
            username=m["user"],
            client_keys=[m["sshKeyFile"]],
            known_hosts=m["knownHosts"],
            **cipher_options(),  # the transport costs what trialfleet's does
        )
        for m in machines
    ]
    starts: list[float] = []
    left = iter(dirs)

    async def slot(index: int) -> None:
        connection = connections[index % len(connections)]
        for trial_dir in left:
            starts.append(time.time())
            await connection.run(
                f"python3 -I -S {shlex.quote(str(KEEPER_SCRIPT))} {shlex.quote(str(trial_dir))}"
            )

    try:
        await asyncio.gather(*(slot(i) for i in range(spec.concurrency)))
    finally:
        for connection in connections:
            connection.close()
            await connection.wait_closed()
    results = [json.loads((d / "result.json").read_text()) for d in dirs]
    ended = [r for r in results if r.get("exit_code") == 0]
    ends = sorted(r["end_time"] for r in ended)
    started = sorted(json.loads((d / "keeper.json").read_text())["start_time"] for d in dirs)
    starts.sort()
    return {
        "trials": float(len(ended)),
        "gap_median_s": percentile(slot_gaps(started, ends, spec.concurrency), 50),
        "gap_from_request_median_s": percentile(slot_gaps(starts, ends, spec.concurrency), 50),
        "wall_s": ends[-1] - starts[0],
    }
