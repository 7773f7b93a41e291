"""Preparing a fleet: credentials, host keys, the remote layout, hostile code file names, GPUs, kept logs."""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, Host
from remote_helpers import machines, remote_context

from trialfleet.errors import PlatformError, TrialFileRefusedError
from trialfleet.status import TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.remote import RemoteTrainingService
from trialfleet.training_services.remote import machine as remote_machine
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.support import support_version

pytestmark = pytest.mark.ssh

RECORD = json.dumps(
    {"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
)
HOSTILE_NAMES = ["with space.txt", "it's.txt", 'dq"uote.txt', "semi;colon.txt", "$(touch pwned).txt",
                 "`touch pwned2`.txt", "ünïcødé ✓.txt", "-rf", "sub dir/$HOME *.txt"]  # fmt: skip
LISTING = """
import json, os
files = sorted(os.path.relpath(os.path.join(d, f)) for d, _, names in os.walk(".") for f in names)
env = {k: os.environ.get(k, "") for k in ("PYTHONPATH", "PATH", "NNI_PLATFORM", "CUDA_VISIBLE_DEVICES")}
import nni
out = {"files": files, "env": env, "nni": nni.__file__}
json.dump(out, open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "listing.json"), "w"))
print("listed", len(files))
"""


def spec(
    trial_id: str, code_dir: Path, command: str = "/usr/bin/python3 listing.py", **kw: object
) -> TrialSpec:
    return TrialSpec(trial_id, 0, command, code_dir, RECORD, **kw)  # type: ignore[arg-type]


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    (path / "listing.py").write_text(LISTING)
    return path


async def run_to_end(service: RemoteTrainingService, trial: TrialSpec) -> tuple[dict, TrialStatus]:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    seen = await poll_until(service, lambda s: trial.trial_id in s.ended)
    return dict(submitted.handle), seen.ended[trial.trial_id].status


async def test_wrong_credentials_name_the_host_and_stop_the_start(tmp_path: Path, fleet: Fleet) -> None:
    bad = fleet.hosts[0].machine(sshKeyFile=str(fleet.wrong_key))
    machine_list = machines(fleet.hosts[1:]) + machines([fleet.hosts[0]], sshKeyFile=str(fleet.wrong_key))
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts, machine_list=machine_list))
    with pytest.raises(PlatformError) as error:
        await service.start()
    await service.close()
    message = str(error.value)
    assert "1 of 3 machine(s) cannot be used" in message
    assert f"root@{bad['host']}:22: authentication failed" in message
    assert fleet.hosts[1].address not in message


async def test_partial_fleet_starts_without_the_broken_host(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    machine_list = machines([fleet.hosts[0]], sshKeyFile=str(fleet.wrong_key)) + machines(fleet.hosts[1:])
    context = remote_context(tmp_path / "e", fleet.hosts, machine_list=machine_list, allow_partial_fleet=True)
    service = RemoteTrainingService(context)
    await service.start()
    try:
        placed = [await service.submit(spec(f"t{i}", code_dir, "sleep 30")) for i in range(4)]
        hosts = sorted(p.handle["machine"] for p in placed if isinstance(p, Submitted))
        assert hosts == sorted(2 * [f"root@{h.address}:22" for h in fleet.hosts[1:]])
    finally:
        await service.close(kill_trials=True)


async def test_password_never_appears_in_errors_or_logs(
    tmp_path: Path, fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret-Pa55word"
    machine_list = machines(fleet.hosts[:1], password=secret)
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts, machine_list=machine_list))
    with caplog.at_level(logging.DEBUG), pytest.raises(PlatformError) as error:
        await service.start()
    await service.close()
    assert "authentication failed (password rejected)" in str(error.value)
    assert secret not in str(error.value) and secret not in caplog.text
    assert secret not in repr(service.machines[0].link.ssh.target)


async def test_unknown_host_key_refused_unless_accepted_then_recorded(tmp_path: Path, fleet: Fleet) -> None:
    known_hosts = tmp_path / "fresh_known_hosts"
    host = fleet.hosts[0]
    strict = machines([host], knownHosts=str(known_hosts))
    service = RemoteTrainingService(remote_context(tmp_path / "a", [host], machine_list=strict))
    with pytest.raises(PlatformError, match=r"unknown host key .*acceptNewHostKeys"):
        await service.start()
    await service.close()
    assert not known_hosts.exists()

    trusting = machines([host], knownHosts=str(known_hosts), acceptNewHostKeys=True)
    service = RemoteTrainingService(remote_context(tmp_path / "b", [host], machine_list=trusting))
    await service.start()
    await service.close()
    assert known_hosts.read_text().split()[:3] == [host.address, *host.host_key_line.split()]

    service = RemoteTrainingService(remote_context(tmp_path / "c", [host], machine_list=strict))
    await service.start()  # recorded: known from now on
    await service.close()


async def test_changed_host_key_is_refused_even_when_accepting_new_ones(tmp_path: Path, fleet: Fleet) -> None:
    host, other = fleet.hosts[0], fleet.hosts[1]
    known_hosts = tmp_path / "stale_known_hosts"
    known_hosts.write_text(f"{host.address} {other.host_key_line}\n")
    machine_list = machines([host], knownHosts=str(known_hosts), acceptNewHostKeys=True)
    service = RemoteTrainingService(remote_context(tmp_path / "e", [host], machine_list=machine_list))
    with pytest.raises(PlatformError, match="host key does not match"):
        await service.start()
    await service.close()


async def test_layout_per_host_and_hostile_code_file_names(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    for name in HOSTILE_NAMES:
        (code_dir / name).parent.mkdir(exist_ok=True)
        (code_dir / name).write_text(name)
    (code_dir / "ignored.bin").write_text("not shipped")
    (code_dir / ".nniignore").write_text("*.bin\n")
    context = remote_context(tmp_path / "e", fleet.hosts, trial_code_directory=code_dir)
    service = RemoteTrainingService(context)
    await service.start()
    try:
        handle, status = await run_to_end(service, spec("hostile", code_dir))
    finally:
        await service.close()
    assert status is TrialStatus.SUCCEEDED
    host = fleet.host_of(handle)
    root = f"/root/trialfleet/{context.experiment_id}"
    assert handle["trial_dir"] == f"{root}/trials/hostile"
    listing = json.loads(host.local(posixpath.join(handle["trial_dir"], "listing.json")).read_text())
    assert listing["files"] == sorted([*HOSTILE_NAMES, "listing.py", ".nniignore"])
    support = f"{root}/.trialfleet/{support_version()}"
    assert listing["nni"] == f"{support}/nni-shim/nni/__init__.py"  # the uploaded shim, not the manager's
    assert listing["env"]["NNI_PLATFORM"] == "remote"
    for other in fleet.hosts:
        layout = other.local(root)
        assert (other.local(support) / "keeper" / "keeper.py").exists() and (
            layout / "code" / "listing.py"
        ).exists()
        assert (layout / "trials" / "hostile").exists() == (other is host), "each host has its own root"
    assert not list(tmp_path.rglob("pwned*"))
    assert (tmp_path / "e" / "trials" / "hostile" / "trial.stdout").read_bytes() == b"listed 11\n"


async def started_counting_sessions(
    tmp_path: Path, host: Host, code_dir: Path
) -> tuple[RemoteTrainingService, list[str]]:
    """A service on ``host`` alone, started, and the SSH sessions the host's sshd logged meanwhile."""
    log = host.dir / "sshd.log"
    before = len(log.read_text(errors="replace").splitlines())
    service = RemoteTrainingService(remote_context(tmp_path / "e", [host], trial_code_directory=code_dir))
    await service.start()
    logged = log.read_text(errors="replace").splitlines()[before:]
    return service, [line for line in logged if "Starting session" in line]


async def test_a_host_is_prepared_in_one_ssh_session_with_the_code_on_its_stdin(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """Connection, checks, support bundle, code and the keeper's version: one session, no SFTP upload."""
    host = fleet.hosts[0]
    service, sessions = await started_counting_sessions(tmp_path, host, code_dir)
    try:
        root = host.local(f"/root/trialfleet/{service.context.experiment_id}")
        assert (root / "code" / "listing.py").read_text() == LISTING
        assert service.machines[0].env["HOME"] == "/root"  # the environment a login there gives
    finally:
        await service.close()
    assert len(sessions) == 1 and "command" in sessions[0], sessions


async def test_a_code_archive_over_the_stdin_limit_is_streamed_by_sftp_and_unpacked_in_a_second_session(
    tmp_path: Path, fleet: Fleet, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_machine, "STDIN_CODE_LIMIT", 0)
    host = fleet.hosts[0]
    service, sessions = await started_counting_sessions(tmp_path, host, code_dir)
    try:
        _, status = await run_to_end(service, spec("large", code_dir))
    finally:
        await service.close()
    assert status is TrialStatus.SUCCEEDED
    root = host.local(f"/root/trialfleet/{service.context.experiment_id}")
    assert (root / "code" / "listing.py").read_text() == LISTING
    assert len(sessions) == 3 and sum("sftp" in line for line in sessions) == 1, sessions


async def test_a_host_whose_python3_has_a_real_nni_runs_trials_with_it_and_is_asked_again_on_reconnection(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """The host's first script tells whether its python3 would import a real nni (one round trip with its
    version and the support bundle); it runs again after a reconnection, where both may have changed."""
    site = tmp_path / "site"
    (site / "nni").mkdir(parents=True)
    (site / "nni" / "__init__.py").write_text("")  # no shim marker beside it: a real nni
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python3 = bindir / "python3"
    python3.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec /usr/bin/python3 "$@"\n')
    python3.chmod(0o755)
    host = fleet.hosts[0]
    machine_list = machines([host], pythonPath=str(bindir))
    service = RemoteTrainingService(remote_context(tmp_path / "e", [host], machine_list=machine_list))
    await service.start()
    try:
        (machine,) = service.machines
        assert machine.real_nni
        handle, status = await run_to_end(service, spec("real", code_dir, command="python3 listing.py"))
        assert status is TrialStatus.SUCCEEDED
        listing = json.loads(host.local(posixpath.join(handle["trial_dir"], "listing.json")).read_text())
        assert listing["nni"] == str(site / "nni" / "__init__.py")  # not the uploaded shim
        python3.write_text('#!/bin/sh\nexec /usr/bin/python3 "$@"\n')  # the real nni is gone
        host.kill_sshd()
        shutil.rmtree(host.local(machine.layout.directory))  # and so is the bundle (a root on a wiped /tmp)
        host.start_sshd()
        trial = spec("shim", code_dir, command="python3 listing.py")
        for _ in range(300):  # a launch waits for the link to come back, as the manager's offers do
            submitted = await service.submit(trial)
            if isinstance(submitted, Submitted):
                break
            assert isinstance(submitted, Deferred), submitted
            await asyncio.sleep(0.1)
        assert isinstance(submitted, Submitted), submitted
        assert not machine.real_nni
        seen = await poll_until(service, lambda s: "shim" in s.ended)
        assert seen.ended["shim"].status is TrialStatus.SUCCEEDED
        handle = dict(submitted.handle)
        listing = json.loads(host.local(posixpath.join(handle["trial_dir"], "listing.json")).read_text())
        assert listing["nni"].endswith(f"/.trialfleet/{support_version()}/nni-shim/nni/__init__.py")
    finally:
        await service.close()


async def test_logs_stay_readable_when_the_host_goes_away(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1]))
    await service.start()
    try:
        handle, status = await run_to_end(service, spec("gone", code_dir))
        assert status is TrialStatus.SUCCEEDED
        assert await service.read_trial_file("gone", handle, "stdout") == b"listed 1\n"
        await service.close(kill_trials=False)  # waits for the copy of the logs
        fleet.hosts[0].kill_sshd()
        assert await service.read_trial_file("gone", handle, "stdout") == b"listed 1\n"
        assert json.loads(await service.read_trial_file("gone", handle, "result.json"))["exit_code"] == 0
        with pytest.raises(PlatformError, match="unreachable"):
            await service.read_trial_file("gone", handle, "listing.json")
    finally:
        await service.close()


async def test_links_to_the_private_command_file_are_refused_on_a_host(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """Issue 44, items 5 and 6: privacy is the resolved file's on an SSH host too (read over SFTP): a symbolic or
    hard link the trial makes to its command.json (the environment, a relay's secret) is refused."""
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1]))
    await service.start()
    links = (
        'ln -s command.json "$NNI_OUTPUT_DIR/soft.txt" && ln "$NNI_OUTPUT_DIR/command.json" "$NNI_OUTPUT_DIR/hard.txt"'
        " && echo linked"
    )
    try:
        handle, status = await run_to_end(service, spec("links", code_dir, command=links))
        assert status is TrialStatus.SUCCEEDED
        assert await service.read_trial_file("links", handle, "stdout") == b"linked\n"
        for name, how in (("soft.txt", "leads to"), ("hard.txt", "is a hard link to")):
            with pytest.raises(TrialFileRefusedError, match=f"'{name}' {how} the keeper's private input"):
                await service.read_trial_file("links", handle, name)
    finally:
        await service.close()


def service_on_gpu_hosts(tmp_path: Path, fleet: Fleet) -> RemoteTrainingService:
    """Trials of one GPU each on hosts with 2, 1 and 0 GPUs (``nvidia-smi`` is the double in tests/doubles)."""
    doubles = str(Path(__file__).resolve().parents[2] / "doubles")
    gpu = {"uuid": "GPU-{}-{}", "name": "Fake", "memory_total": 16384, "memory_used": 0, "utilization": 0}
    for host, count in zip(fleet.hosts, (2, 1, 0), strict=True):
        host.set_gpus([{**gpu, "index": i, "uuid": f"GPU-{host.name}-{i}"} for i in range(count)])
    machine_list = machines(fleet.hosts, pythonPath=doubles)
    return RemoteTrainingService(
        remote_context(tmp_path / "e", fleet.hosts, machine_list=machine_list, trial_gpu_number=1)
    )


async def test_gpus_read_over_ssh_and_allocated_per_host(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    service = service_on_gpu_hosts(tmp_path, fleet)
    await service.start()
    try:
        command = "sleep 30"
        placed = [await service.submit(spec(f"g{i}", code_dir, command, gpu_number=1)) for i in range(4)]
        assert isinstance(placed[3], Deferred)
        assert "waiting for 1 free GPU(s)" in placed[3].reason and "no GPU found" in placed[3].reason
        chosen = sorted((p.handle["machine"], tuple(p.handle["gpus"])) for p in placed[:3])  # type: ignore[union-attr]
        h1, h2 = (f"root@{h.address}:22" for h in fleet.hosts[:2])
        assert chosen == sorted([(h1, (0,)), (h1, (1,)), (h2, (0,))])
        await service.cancel("g0")
        await poll_until(service, lambda s: "g0" in s.ended)
        again = await service.submit(spec("g4", code_dir, command, gpu_number=1))
        assert isinstance(again, Submitted) and again.handle["gpus"] == placed[0].handle["gpus"]  # type: ignore[union-attr]
    finally:
        await service.close(kill_trials=True)


async def test_launches_under_way_at_once_take_different_gpus(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """The scheduler offers a platform with ``concurrent_submits`` every waiting trial at once: each launch
    reserves its GPUs when it chooses them, before its round trips, so none is given twice."""
    service = service_on_gpu_hosts(tmp_path, fleet)
    await service.start()
    try:
        trials = [spec(f"g{i}", code_dir, "sleep 30", gpu_number=1) for i in range(4)]
        placed = await asyncio.gather(*(service.submit(trial) for trial in trials))
        deferred = [p for p in placed if isinstance(p, Deferred)]
        assert len(deferred) == 1 and "waiting for 1 free GPU(s)" in deferred[0].reason
        chosen = sorted(
            (p.handle["machine"], tuple(p.handle["gpus"])) for p in placed if isinstance(p, Submitted)
        )
        h1, h2 = (f"root@{h.address}:22" for h in fleet.hosts[:2])
        assert chosen == sorted([(h1, (0,)), (h1, (1,)), (h2, (0,))])
    finally:
        await service.close(kill_trials=True)


async def test_launches_under_way_at_once_spread_over_the_hosts_and_upload_the_code_once(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts))
    uploads: list[str] = []
    for machine in service.machines:
        upload = machine.upload_code

        async def counted(
            local_dir: Path, archive: Path, upload: Any = upload, name: str = machine.name
        ) -> str:
            uploads.append(name)
            return await upload(local_dir, archive)

        machine.upload_code = counted  # type: ignore[method-assign]
    await service.start()
    try:
        trials = [spec(f"s{i}", code_dir) for i in range(6)]
        placed = await asyncio.gather(*(service.submit(trial) for trial in trials))
        assert all(isinstance(p, Submitted) for p in placed), placed
        hosts = [p.handle["machine"] for p in placed if isinstance(p, Submitted)]
        assert sorted(Counter(hosts).values()) == [2, 2, 2]
        assert sorted(uploads) == sorted(m.name for m in service.machines)  # the spec's code, once per host
        seen = await poll_until(service, lambda s: len(s.ended) == 6)
        assert {ended.status for ended in seen.ended.values()} == {TrialStatus.SUCCEEDED}
    finally:
        await service.close(kill_trials=True)


async def test_launches_asked_at_once_of_a_host_share_one_session(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """The trials a round submits at once: one SSH session for all of them on the host (``probe launch_all``),
    then the runner's; each trial still under a keeper of its own."""
    host = fleet.hosts[0]
    service, _ = await started_counting_sessions(tmp_path, host, code_dir)
    log = host.dir / "sshd.log"
    before = len(log.read_text(errors="replace").splitlines())
    try:
        placed = await asyncio.gather(*(service.submit(spec(f"a{i}", code_dir)) for i in range(4)))
        assert all(isinstance(p, Submitted) for p in placed), placed
        keepers = {p.handle["keeper_pid"] for p in placed if isinstance(p, Submitted)}
        assert len(keepers) == 4
        seen = await poll_until(service, lambda s: len(s.ended) == 4)
        assert {ended.status for ended in seen.ended.values()} == {TrialStatus.SUCCEEDED}
    finally:
        await service.close(kill_trials=True)
    logged = log.read_text(errors="replace").splitlines()[before:]
    sessions = [line for line in logged if "Starting session" in line]
    assert len(sessions) == 2, sessions  # the launches' and the runner's


async def test_more_launches_at_once_than_sshd_allows_sessions_all_start(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    """The fleet's sshd has OpenSSH's default MaxSessions (10): twelve launches under way at once on one host, each
    asked in a turn of its own (so each a session of its own), wait for their turn instead of having a channel
    refused (which would drop the link)."""
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1]))
    await service.start()
    try:
        trials = [spec(f"m{i}", code_dir, "sleep 0.5") for i in range(12)]
        submits = []
        for trial in trials:
            submits.append(asyncio.ensure_future(service.submit(trial)))
            await asyncio.sleep(0.002)  # a session takes ~45 ms: the twelve overlap
        placed = await asyncio.gather(*submits)
        assert all(isinstance(p, Submitted) for p in placed), placed
        assert service.machines[0].link.up
        seen = await poll_until(service, lambda s: len(s.ended) == 12)
        assert {ended.status for ended in seen.ended.values()} == {TrialStatus.SUCCEEDED}
    finally:
        await service.close(kill_trials=True)


async def test_keeper_version_mismatch_is_a_clear_error(
    tmp_path: Path, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_machine, "KEEPER_VERSION", "trialfleet-keeper 9.9 protocol 9")
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1]))
    with pytest.raises(PlatformError, match=r"trial keeper version mismatch: .* says 'trialfleet-keeper 1"):
        await service.start()
    await service.close()


async def test_a_root_that_cannot_be_made_is_a_clear_error(tmp_path: Path, fleet: Fleet) -> None:
    (tmp_path / "a file").write_text("")  # the hosts see this machine's /tmp
    root = str(tmp_path / "a file" / "trialfleet")
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1]), root=root)
    with pytest.raises(PlatformError, match=r"creating the root failed \(.*Not a directory"):
        await service.start()
    await service.close()


async def test_every_failing_host_is_listed_with_its_reason(tmp_path: Path, fleet: Fleet) -> None:
    """One error for the whole fleet: a rejected key on one host, an old python and a full disk on others."""
    old_python, full_disk = tmp_path / "old-python", tmp_path / "full-disk"
    for directory, version, free in ((old_python, "[3, 6, 9]", 10**12), (full_disk, "[3, 11, 2]", 4096)):
        directory.mkdir()
        script = directory / "python3"  # the host's python3 as the checks see it: what it reports
        report = f'{{"version": {version}, "root": "/root/x", "free": {free}}}'
        script.write_text(f"#!/bin/sh\necho '{report}'\n")
        script.chmod(0o755)
    machine_list = (
        machines([fleet.hosts[0]], sshKeyFile=str(fleet.wrong_key))
        + machines([fleet.hosts[1]], pythonPath=str(old_python))
        + machines([fleet.hosts[2]], pythonPath=str(full_disk))
    )
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts, machine_list=machine_list))
    with pytest.raises(PlatformError) as error:
        await service.start()
    await service.close()
    lines = str(error.value).splitlines()
    assert lines[0] == "remote: 3 of 3 machine(s) cannot be used:"
    h1, h2, h3 = (f"  - root@{h.address}:22: " for h in fleet.hosts)
    assert lines[1].startswith(h1 + "authentication failed")
    assert lines[2] == h2 + "python3 is 3.6.9; trials need Python >= 3.8 (set pythonPath)"
    assert lines[3].startswith(h3 + "only 0 MB free under /root/x, need at least ")
