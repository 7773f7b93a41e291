"""The relay (NNI's REST channel): a real keeper sends its trial's files to a real relay over HTTP; the mirror
is byte for byte the trial directory, and the metrics read from it arrive exactly once, in order — also when
the relay goes away mid-trial and comes back having lost a tail."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from trialfleet.training_services.metric_channels import MetricReader
from trialfleet.training_services.relay import Relay
from trialfleet.training_services.trial_dir import (
    KEEPER_SCRIPT,
    command_record,
    input_files,
    write_trial_inputs,
)

TRIAL = """
import json, os, sys, time
sys_dir = os.environ["NNI_SYS_DIR"]
out = open(os.path.join(sys_dir, ".nni", "metrics"), "ab", buffering=0)
def report(i):
    payload = (json.dumps({"parameter_id": 0, "type": "PERIODICAL", "sequence": i, "value": json.dumps(i)}) + "\\n").encode()
    out.write(b"ME%06d" % len(payload) + payload)
for i in range(int(sys.argv[1])):
    report(i)
    print("step", i, flush=True)
    if os.path.exists(sys.argv[2]):
        while not os.path.exists(sys.argv[2] + ".go"):
            time.sleep(0.02)
"""
HANG_GUARD = 60.0


def launch_keeper(
    tmp_path: Path, relay: Relay, count: int, pause: Path
) -> tuple[Path, subprocess.Popen[bytes]]:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(TRIAL)
    trial_dir = tmp_path / "worker" / "t1"
    env = {"NNI_SYS_DIR": str(trial_dir), "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "trial.py", str(count), str(pause)]
    settings = relay.keeper_settings("t1", "127.0.0.1", patience=HANG_GUARD)
    write_trial_inputs(trial_dir, input_files("{}", command_record(argv, str(code), env, relay=settings)))
    keeper = subprocess.Popen([sys.executable, "-I", "-S", str(KEEPER_SCRIPT), str(trial_dir)])
    return trial_dir, keeper


async def wait_exit(keeper: subprocess.Popen[bytes]) -> int:
    for _ in range(int(HANG_GUARD / 0.05)):
        if keeper.poll() is not None:
            return keeper.returncode
        await asyncio.sleep(0.05)
    keeper.kill()
    raise AssertionError("the keeper did not end")


def mirrored(trial_dir: Path, mirror: Path) -> None:
    for name in (".nni/metrics", "trial.stdout", "trial.stderr"):
        copy = (mirror / name).read_bytes() if (mirror / name).exists() else b""  # an empty one is not sent
        assert copy == (trial_dir / name).read_bytes(), name
    for name in ("keeper.json", "result.json"):
        assert json.loads((mirror / name).read_text()) == json.loads((trial_dir / name).read_text()), name


@pytest.mark.slow
async def test_a_trials_files_reach_the_mirror_and_read_as_a_local_trial(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    relay = Relay(tmp_path / "experiment", host="127.0.0.1")
    await relay.start()
    try:
        trial_dir, keeper = launch_keeper(tmp_path, relay, 3000, tmp_path / "no-pause")
        assert await wait_exit(keeper) == 0
    finally:
        await relay.close()
    mirror = tmp_path / "experiment" / "trials" / "t1"
    mirrored(trial_dir, mirror)
    assert json.loads((mirror / "result.json").read_text())["exit_code"] == 0
    metrics, problems = MetricReader("t1", mirror, {}).read(final=True)
    assert [m.sequence for m in metrics] == list(range(3000)) and problems == []
    assert (tmp_path / "experiment" / "relay-secret").stat().st_mode & 0o777 == 0o600


LINKING_TRIAL = """
import os
os.remove("trial.stderr"); os.symlink("command.json", "trial.stderr")
os.remove("trial.stdout"); os.link("command.json", "trial.stdout")
"""


async def test_a_stream_the_trial_links_to_command_json_is_not_sent(tmp_path: Path) -> None:
    """Issue 44, item 5 for relayed trials: a stream the trial replaces with a link to its command.json (which
    holds the relay's secret) is not sent through the relay, where the file routes would serve it."""
    (tmp_path / "experiment").mkdir()
    relay = Relay(tmp_path / "experiment", host="127.0.0.1")
    await relay.start()
    try:
        trial_dir = tmp_path / "worker" / "t1"
        settings = relay.keeper_settings("t1", "127.0.0.1", patience=HANG_GUARD)
        argv = [sys.executable, "-c", LINKING_TRIAL]
        record = command_record(argv, str(trial_dir), {"PATH": "/usr/bin:/bin"}, relay=settings)
        write_trial_inputs(trial_dir, input_files("{}", record))
        keeper = subprocess.Popen([sys.executable, "-I", "-S", str(KEEPER_SCRIPT), str(trial_dir)])
        assert await wait_exit(keeper) == 0
    finally:
        await relay.close()
    secret = json.loads((trial_dir / "command.json").read_text())["relay"]["secret"]
    mirror = tmp_path / "experiment" / "trials" / "t1"
    assert json.loads((mirror / "result.json").read_text())["exit_code"] == 0
    copies = [copy for copy in mirror.rglob("*") if copy.is_file()]
    assert copies
    for copy in copies:
        assert secret.encode() not in copy.read_bytes(), copy


@pytest.mark.slow
async def test_a_relay_that_lost_a_tail_gets_it_again_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    pause = tmp_path / "pause"
    pause.touch()  # the trial stops after its first metric until pause.go appears
    relay = Relay(tmp_path / "experiment", host="127.0.0.1")
    await relay.start()
    trial_dir, keeper = launch_keeper(tmp_path, relay, 500, pause)
    mirror = tmp_path / "experiment" / "trials" / "t1"
    for _ in range(int(HANG_GUARD / 0.05)):
        if (mirror / "keeper.json").exists() and (mirror / ".nni" / "metrics").exists():
            break
        await asyncio.sleep(0.05)
    await relay.close()  # the manager goes away, and its copy loses what it had of the stream
    (mirror / ".nni" / "metrics").write_bytes(b"")
    (Path(str(pause) + ".go")).touch()
    await asyncio.sleep(0.5)  # the keeper's requests fail meanwhile
    again = Relay(tmp_path / "experiment", host="127.0.0.1", port=relay.port)
    await again.start()
    try:
        assert await wait_exit(keeper) == 0
    finally:
        await again.close()
    mirrored(trial_dir, mirror)
    metrics, _ = MetricReader("t1", mirror, {}).read(final=True)
    assert [m.sequence for m in metrics] == list(range(500))


@pytest.mark.slow
async def test_requests_are_checked(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    relay = Relay(tmp_path / "experiment", host="127.0.0.1")
    await relay.start()
    url = relay.url("127.0.0.1")
    good = {"Authorization": f"Bearer {relay.secret}"}
    try:
        async with httpx.AsyncClient() as http:
            wrong = await http.put(
                f"{url}/t1/trial.stdout?offset=0", content=b"x", headers={"Authorization": "Bearer no"}
            )
            assert wrong.status_code == 401
            assert (await http.put(f"{url}/t1/trial.stdout?offset=0", content=b"x")).status_code == 401
            assert (
                await http.put(f"{url}/t1/command.json?offset=0", content=b"x", headers=good)
            ).status_code == 404
            assert (
                await http.put(f"{url}/..%2Fx/trial.stdout?offset=0", content=b"x", headers=good)
            ).status_code == 404
            first = await http.put(f"{url}/t1/trial.stdout?offset=0", content=b"abc", headers=good)
            assert first.json() == {"size": 3}
            again = await http.put(f"{url}/t1/trial.stdout?offset=1", content=b"bcde", headers=good)
            assert again.json() == {"size": 5}  # what it had is not written twice
            gap = await http.put(f"{url}/t1/trial.stdout?offset=9", content=b"z", headers=good)
            assert (gap.status_code, gap.json()) == (409, {"size": 5})
            bad = await http.put(f"{url}/t1/result.json?record=1", content=b"[1]", headers=good)
            assert bad.status_code == 400
    finally:
        await relay.close()
    assert (tmp_path / "experiment" / "trials" / "t1" / "trial.stdout").read_bytes() == b"abcde"


@pytest.mark.parametrize("secret_mode", [0o600])
def test_the_secret_is_kept_between_managers(tmp_path: Path, secret_mode: int) -> None:
    first = Relay(tmp_path, host="127.0.0.1").secret
    assert Relay(tmp_path, host="127.0.0.1").secret == first
    assert (tmp_path / "relay-secret").stat().st_mode & 0o777 == secret_mode
