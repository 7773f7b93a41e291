"""Network and host faults on real sshd hosts: cut links, blackholes, sshd restarts.

Trials log every metric they sent to ``sent.log`` in their trial directory, so "no metric lost or duplicated"
is checked against what was really sent, not against a count.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fleet import Fleet, Host
from remote_helpers import remote_context

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import TRIAL_PRELUDE, Seen, poll_until, wait_for_file
from trialfleet.training_services.remote import RemoteTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

pytestmark = pytest.mark.ssh

PHASED_TRIAL = TRIAL_PRELUDE + textwrap.dedent(
    """
    sent = open(os.path.join(SYS_DIR, "sent.log"), "a")
    def send(i):
        report("PERIODICAL", i, i * 10)
        sent.write(json.dumps(i * 10) + "\\n"); sent.flush()
    name = os.environ["NNI_TRIAL_JOB_ID"]
    for phase, (first, last) in enumerate([(0, 10), (10, 40), (40, 50)]):
        if phase:
            wait_for(f"{name}-go{phase}")
        for i in range(first, last):
            send(i)
        touch(f"{name}-phase{phase}")
    report("FINAL", 0, 1.5)
    """
)


def spec(trial_id: str, code_dir: Path, control: Path) -> TrialSpec:
    record = json.dumps(
        {"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
    )
    command = f"/usr/bin/python3 phased.py {shlex.quote(str(control))}"
    return TrialSpec(trial_id, 0, command, code_dir, record)


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    (path / "phased.py").write_text(PHASED_TRIAL)
    return path


@pytest.fixture
def control(tmp_path: Path) -> Path:
    path = tmp_path / "control"
    path.mkdir()
    return path


@pytest.fixture
async def service(tmp_path: Path, fleet: Fleet) -> AsyncIterator[RemoteTrainingService]:
    remote = RemoteTrainingService(remote_context(tmp_path / "experiment", fleet.hosts, grace=60))
    await remote.start()
    yield remote
    await remote.close(kill_trials=True)


async def submit(service: RemoteTrainingService, trial: TrialSpec) -> Submitted:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    return submitted


def sent_values(host: Host, handle: dict) -> list[int]:
    path = host.local(posixpath.join(handle["trial_dir"], "sent.log"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def periodical(seen: Seen, trial_id: str) -> list[int]:
    return [json.loads(m.data) for m in seen.metrics if m.trial_id == trial_id and m.type == "PERIODICAL"]


async def run_through_fault(
    service: RemoteTrainingService, fleet: Fleet, control: Path, code_dir: Path, break_host, repair_host
) -> tuple[Seen, Host, dict]:
    """Phase 0 is seen; the host breaks; phase 1 is sent while it is down; it is repaired; phase 2; the end."""
    handle = dict((await submit(service, spec("phased", code_dir, control))).handle)
    host = fleet.host_of(handle)
    machine = service._by_name[handle["machine"]]
    seen = await poll_until(service, lambda s: len(s.metrics) == 10)
    break_host(host)
    seen = await poll_until(service, lambda s: machine.link.down_since is not None, seen)
    (control / "phased-go1").touch()
    await wait_for_file(control / "phased-phase1")
    repair_host(host)
    seen = await poll_until(service, lambda s: machine.link.down_since is None, seen)
    (control / "phased-go2").touch()
    seen = await poll_until(service, lambda s: "phased" in s.ended, seen)
    return seen, host, handle


async def test_link_cut_mid_trial_then_restored_delivers_each_metric_once_in_order(
    service: RemoteTrainingService, fleet: Fleet, control: Path, code_dir: Path
) -> None:
    seen, host, handle = await run_through_fault(
        service, fleet, control, code_dir, Host.link_down, Host.link_up
    )
    assert seen.ended["phased"].status is TrialStatus.SUCCEEDED
    assert periodical(seen, "phased") == sent_values(host, handle) == [i * 10 for i in range(50)]
    assert [m.type for m in seen.metrics].count("FINAL") == 1
    assert seen.problems == []


async def test_sshd_killed_and_restarted_trial_is_reattached(
    service: RemoteTrainingService, fleet: Fleet, control: Path, code_dir: Path
) -> None:
    seen, host, handle = await run_through_fault(
        service, fleet, control, code_dir, Host.kill_sshd, Host.start_sshd
    )
    assert seen.ended["phased"].status is TrialStatus.SUCCEEDED
    assert periodical(seen, "phased") == sent_values(host, handle) == [i * 10 for i in range(50)]


async def test_blackholed_host_fails_its_trials_after_the_grace_period_others_finish(
    tmp_path: Path, fleet: Fleet, control: Path, code_dir: Path
) -> None:
    service = RemoteTrainingService(remote_context(tmp_path / "experiment", fleet.hosts, grace=3))
    await service.start()
    try:
        handles = {}
        for trial_id in ("a", "b", "c"):
            handles[trial_id] = dict((await submit(service, spec(trial_id, code_dir, control))).handle)
        assert len({h["machine"] for h in handles.values()}) == 3, "trials are spread over the 3 hosts"
        seen = await poll_until(service, lambda s: len(s.metrics) == 30)
        doomed = fleet.host_of(handles["a"])
        doomed.blackhole()
        machine = service._by_name[handles["a"]["machine"]]
        seen = await poll_until(service, lambda s: machine.link.down_since is not None, seen)
        placed = await submit(service, spec("d", code_dir, control))
        assert placed.handle["machine"] != machine.name, "a host that is down takes no trial"
        for trial_id in "abcd":
            for phase in (1, 2):
                (control / f"{trial_id}-go{phase}").touch()
        seen = await poll_until(service, lambda s: len(s.ended) == 4, seen)
    finally:
        await service.close(kill_trials=True)
    lost = seen.ended["a"]
    assert (lost.status, lost.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert lost.message is not None
    assert lost.message.startswith(f"lost: host {machine.name} unreachable for "), lost.message
    for trial_id in "bcd":
        assert seen.ended[trial_id].status is TrialStatus.SUCCEEDED
    assert periodical(seen, "b") == list(range(0, 500, 10))


async def test_submit_is_idempotent_for_a_manager_that_restarted(
    tmp_path: Path, fleet: Fleet, control: Path, code_dir: Path
) -> None:
    """A manager killed between launching a trial and recording its handle submits it again: same trial."""
    context = remote_context(tmp_path / "experiment", fleet.hosts)
    first = RemoteTrainingService(context)
    await first.start()
    handle = dict((await submit(first, spec("again", code_dir, control))).handle)
    await first.close(kill_trials=False)
    second = RemoteTrainingService(context)
    await second.start()
    try:
        for _ in range(2):  # the second offer, within the same service, is answered the same way
            assert dict((await submit(second, spec("again", code_dir, control))).handle) == handle
        for phase in (1, 2):
            (control / f"again-go{phase}").touch()
        seen = await poll_until(second, lambda s: "again" in s.ended)
    finally:
        await second.close(kill_trials=True)
    assert seen.ended["again"].status is TrialStatus.SUCCEEDED
    assert periodical(seen, "again") == sent_values(fleet.host_of(handle), handle)  # one run, not two
