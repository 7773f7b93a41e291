"""Azure ML's pure parts: the state table, how a trial ended, the mirror of a job's trial directory, job names
and what a job is submitted with (a golden file, hostile values included).

Regenerate the golden file after an intended change with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/unit/training_services/test_aml_units.py

and review the diff.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.aml.job import (
    TrialJob,
    experiment_name,
    job_name,
    job_spec,
    trial_variables,
)
from trialfleet.training_services.aml.mirror import FILES_TAG, apply_window
from trialfleet.training_services.aml.status import AmlJob, aml_state_meaning, trial_outcome

GOLDEN = Path(__file__).resolve().parent / "golden" / "aml_job" / "hostile.json"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) `touch pwned` ;|&<> %j \\n ünï ✓\nnew line"
W, R = TrialStatus.WAITING, TrialStatus.RUNNING
INFRA, USER, CANCELED = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE, FailureKind.CANCELED


@pytest.mark.parametrize(
    ("state", "status", "kind"),
    [
        ("NotStarted", W, None),
        ("Starting", W, None),
        ("Provisioning", W, None),
        ("Preparing", W, None),
        ("Queued", W, None),
        ("Running", R, None),
        ("Finalizing", R, None),
        ("CancelRequested", R, None),
        ("Completed", TrialStatus.SUCCEEDED, None),
        ("Failed", TrialStatus.FAILED, USER),
        ("Canceled", TrialStatus.USER_CANCELED, CANCELED),
        ("NotResponding", TrialStatus.FAILED, INFRA),
        ("Paused", TrialStatus.FAILED, INFRA),
        ("Unknown", TrialStatus.UNKNOWN, None),
        (None, TrialStatus.UNKNOWN, None),
    ],
)
def test_state_table(state: str | None, status: TrialStatus, kind: FailureKind | None) -> None:
    meaning = aml_state_meaning(state)
    assert (meaning.status, meaning.failure_kind) == (status, kind)


def outcome(result: dict[str, Any] | None, status: str | None, **kw: Any) -> tuple[Any, ...] | None:
    args: dict[str, Any] = {"keeper_started": True, "cancel_status": None, "settled": True, **kw}
    ended = trial_outcome("t", result, AmlJob("j", status) if status else None, **args)
    return None if ended is None else (ended.status, ended.failure_kind, (ended.message or "").split(" (")[0])


CANCELED_RESULT = {"canceled": True, "reason": "canceled"}


@pytest.mark.parametrize(
    ("result", "status", "kw", "expected"),
    [
        (
            {"exit_code": 0, "reason": "exit code 0"},
            "Running",
            {},
            (TrialStatus.SUCCEEDED, None, "exit code 0"),
        ),
        ({"exit_code": 2, "reason": "exit code 2"}, "Failed", {}, (TrialStatus.FAILED, USER, "exit code 2")),
        (
            CANCELED_RESULT,
            "CancelRequested",
            {"cancel_status": TrialStatus.EARLY_STOPPED},
            (TrialStatus.EARLY_STOPPED, CANCELED, "canceled"),
        ),
        (CANCELED_RESULT, "Running", {}, None),
        (
            CANCELED_RESULT,
            "NotResponding",
            {},
            (TrialStatus.FAILED, INFRA, "the job's node stopped responding"),
        ),
        (CANCELED_RESULT, "Canceled", {}, (TrialStatus.USER_CANCELED, CANCELED, "canceled")),
        # another node ended the job first: the trial's command did not finish, so it is not SUCCEEDED
        (CANCELED_RESULT, "Completed", {}, (TrialStatus.FAILED, USER, "the trial's command did not finish")),
        (None, "Queued", {}, None),
        (None, "Completed", {"settled": False}, None),
        (
            None,
            "Completed",
            {},
            (TrialStatus.FAILED, INFRA, "lost: the trial keeper ended without a final record"),
        ),
        (
            None,
            "Failed",
            {"keeper_started": False},
            (TrialStatus.FAILED, INFRA, "the job ended before the trial started"),
        ),
        (
            None,
            "Canceled",
            {"cancel_status": TrialStatus.USER_CANCELED},
            (TrialStatus.USER_CANCELED, CANCELED, "canceled"),
        ),
        (None, "Canceled", {}, (TrialStatus.USER_CANCELED, CANCELED, "cancelled outside trialfleet")),
        (None, "Paused", {}, (TrialStatus.FAILED, INFRA, "Azure ML paused the job")),
        (None, None, {}, None),
    ],
)
def test_trial_outcome(
    result: dict[str, Any] | None, status: str | None, kw: dict[str, Any], expected: tuple[Any, ...] | None
) -> None:
    assert outcome(result, status, **kw) == expected


def piece(index: int, offset: int, data: bytes) -> str:
    return f"{index}:{offset}:{base64.b64encode(data).decode()}"


def test_the_mirror_applies_each_piece_once_at_its_offset(tmp_path: Path) -> None:
    tags = {FILES_TAG: json.dumps([".nni/metrics", "trial.stdout"]), "trialfleet.slot.0": piece(0, 0, b"abc")}
    assert apply_window(tmp_path, tags) == (3, [3, 0])
    tags |= {"trialfleet.slot.1": piece(0, 3, b"def"), "trialfleet.slot.2": piece(1, 0, "ü\n".encode())}
    tags["trialfleet.slot.3"] = piece(0, 9, b"jkl")  # a gap: the piece at 6 is not there yet
    assert apply_window(tmp_path, tags) == (3 + 3, [6, 3])
    assert apply_window(tmp_path, tags) == (0, [6, 3])  # read twice, written once
    assert (tmp_path / ".nni" / "metrics").read_bytes() == b"abcdef"
    tags["trialfleet.slot.0"] = piece(0, 6, b"ghi")  # the next window reuses the slots
    assert apply_window(tmp_path, tags) == (6, [12, 3])
    assert (tmp_path / ".nni" / "metrics").read_bytes() == b"abcdefghijkl"
    assert (tmp_path / "trial.stdout").read_text() == "ü\n"


def test_the_mirror_ignores_what_is_not_a_piece_of_the_trial_directory(tmp_path: Path) -> None:
    tags = {
        FILES_TAG: json.dumps(["../escape", "/etc/passwd", "ok"]),
        "trialfleet.slot.0": piece(0, 0, b"x"),
        "trialfleet.slot.1": piece(1, 0, b"x"),
        "trialfleet.slot.2": "2:0:not base64 ~~~",
        "trialfleet.slot.3": piece(9, 0, b"x"),
        "trialfleet.slot.4": "-",
        "mlflow.user": "someone",
    }
    assert apply_window(tmp_path, tags) == (0, [-1, -1, 0])  # refused names: not to be shipped again
    assert list(tmp_path.iterdir()) == []


def test_job_names() -> None:
    assert job_name("abc123", "trial", 0) == "nni_exp_abc123_trial_trial"
    assert job_name("abc123", "trial", 2) == "nni_exp_abc123_trial_trial_attempt_2"
    upper, lower = job_name("abc123", "aBc", 0), job_name("abc123", "abc", 0)
    assert upper.startswith("nni_exp_abc123_trial_abc_") and upper == upper.lower() and upper != lower
    assert experiment_name("my exp: ü", "x1") == "my_exp"
    assert experiment_name(None, "x1") == "trialfleet_x1"


def test_the_job_spec_matches_the_golden_file() -> None:
    nni = {
        "NNI_PLATFORM": "aml",
        "NNI_EXP_ID": "golden",
        "NNI_TRIAL_JOB_ID": "Tr1al",
        "NNI_TRIAL_SEQ_ID": "5",
    }
    record = json.dumps({"parameter_id": 3, "parameters": {"text": HOSTILE}})
    env = trial_variables(nni, {"HOSTILE_VALUE": HOSTILE}, record, f"python3 echo.py '{HOSTILE}'", 0)
    job = TrialJob(
        job_name("golden", "Tr1al", 0),
        "Tr1al",
        experiment_name(HOSTILE, "golden"),
        "cpu-cluster",
        "msranni/nni:latest",
        env,
        {"trialfleet.trial": "Tr1al"},
    )
    text = json.dumps(job_spec(job), indent=1, ensure_ascii=False) + "\n"
    if REGENERATE:
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"{GOLDEN} differs (TRIALFLEET_REGEN_GOLDEN=1 to update)"
    assert job_spec(job)["environment_variables"]["HOSTILE_VALUE"] == HOSTILE
    assert HOSTILE not in job_spec(job)["command"]  # every value travels in the environment


def test_the_forwarder_writes_the_command_the_keeper_speaks(tmp_path: Path, monkeypatch) -> None:
    """The forwarder (stdlib, in the job) writes command.json itself: its protocol is the keeper's."""
    import json

    from trialfleet.training_services.aml import forwarder
    from trialfleet.trial_keeper.keeper import PROTOCOL

    monkeypatch.setenv(forwarder.ENV_PREFIX + "PARAMETERS", '{"parameter_id": 0}')
    monkeypatch.setenv(forwarder.ENV_PREFIX + "COMMAND", "python3 trial.py")
    monkeypatch.chdir(tmp_path)
    forwarder.prepare(str(tmp_path / "support"), str(tmp_path / "trial"))
    assert json.loads((tmp_path / "trial" / "command.json").read_text())["protocol"] == PROTOCOL


def test_command_json_stays_in_the_job(tmp_path: Path, monkeypatch) -> None:
    """command.json holds environment values: the forwarder does not ship it, the mirror would not write it."""
    from trialfleet.training_services.aml import forwarder

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    monkeypatch.setenv("MLFLOW_RUN_ID", "run")
    (tmp_path / "command.json").write_text('{"env": {"SECRET": "x"}}')
    (tmp_path / "trial.stdout").write_text("hello\n")
    shipper = forwarder.Shipper(str(tmp_path))
    assert shipper.scan() == {"trial.stdout": 6}
    assert shipper.files == ["trial.stdout"]
    (tmp_path / "soft.txt").symlink_to("command.json")  # links the trial makes to it (issue 44, item 5)
    os.link(tmp_path / "command.json", tmp_path / "hard.txt")
    assert shipper.scan() == {"trial.stdout": 6}  # neither link is shipped
    assert shipper.files == ["trial.stdout"]
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shipped = {FILES_TAG: json.dumps(["command.json"]), "trialfleet.slot.0": piece(0, 0, b"{}")}
    assert apply_window(mirror, shipped) == (0, [-1])
    assert list(mirror.iterdir()) == []


def test_the_window_keeps_the_metric_stream_first_and_the_result_last(tmp_path: Path, monkeypatch) -> None:
    """Within Azure's 50 tags of 1,000 characters: a log over the cap reaches the manager up to the cap, the
    metric stream whole and first, result.json only in the window that holds the rest of everything before it (one
    look of the manager less for a small trial directory), else once that is acknowledged."""
    from trialfleet.training_services.aml import forwarder

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    monkeypatch.setenv("MLFLOW_RUN_ID", "run")
    (tmp_path / ".nni").mkdir()
    (tmp_path / ".nni" / "metrics").write_bytes(b"m" * (forwarder.PIECE + 1))
    (tmp_path / "trial.stdout").write_bytes(b"o" * (forwarder.FILE_CAP + 5))
    (tmp_path / "result.json").write_text("{}")
    shipper = forwarder.Shipper(str(tmp_path))
    sizes = shipper.scan()
    assert list(sizes) == [".nni/metrics", "trial.stdout", "result.json"]
    assert sizes["trial.stdout"] == forwarder.FILE_CAP
    window = shipper.pending(sizes)
    assert len(window) == forwarder.SLOTS
    assert window[:2] == [(0, 0, forwarder.PIECE), (0, forwarder.PIECE, 1)]
    assert all(index != 2 for index, _, _ in window)
    shipper.acked = [forwarder.PIECE + 1, forwarder.FILE_CAP]
    assert shipper.pending(sizes) == [(2, 0, 2)]
    # the rest fits this window: result.json goes with it
    shipper.acked = [forwarder.PIECE + 1, forwarder.FILE_CAP - 3]
    assert shipper.pending(sizes) == [(1, forwarder.FILE_CAP - 3, 3), (2, 0, 2)]
    shipper.slots = 1  # it does not: result.json waits
    assert shipper.pending(sizes) == [(1, forwarder.FILE_CAP - 3, 3)]


def test_an_attempts_inputs_reach_its_worker_within_azures_tag_limits(tmp_path: Path, monkeypatch) -> None:
    """Reuse mode: the manager cuts the attempt's inputs into tags of its run; the worker's relay (stdlib, in the
    job) joins them and writes the trial directory the keeper reads, hostile values intact."""
    from trialfleet.training_services.aml import reuse, worker_relay
    from trialfleet.trial_keeper.keeper import PROTOCOL

    record = json.dumps({"parameter_id": 3, "parameters": {"text": HOSTILE * 40}})
    env = {"NNI_TRIAL_JOB_ID": "Tr1al", "HOSTILE_VALUE": HOSTILE}
    tags = reuse.input_tags(record, f"python3 echo.py '{HOSTILE}'", env, None)
    assert all(len(k) <= 100 and len(v) <= 1000 for k, v in tags.items())
    assert len(tags) <= reuse.MAX_PIECES + 1
    pieces = int(tags[reuse.INPUTS_TAG])
    assert pieces > 1  # the parameters took several tags
    assert worker_relay.read_inputs({k: v for k, v in tags.items() if k != f"{reuse.INPUT_PREFIX}1"}) is None
    inputs = worker_relay.read_inputs(tags)
    monkeypatch.chdir(tmp_path)
    worker_relay.write_inputs(str(tmp_path / "trial"), inputs)
    assert (tmp_path / "trial" / "parameter.cfg").read_text() == record
    command = json.loads((tmp_path / "trial" / "command.json").read_text())
    assert command["protocol"] == PROTOCOL
    assert command["argv"] == ["/bin/bash", "-c", f"python3 echo.py '{HOSTILE}'"]
    assert command["env"]["HOSTILE_VALUE"] == HOSTILE
    assert command["env"]["NNI_SYS_DIR"] == str(tmp_path / "trial")
    with pytest.raises(ValueError, match="more than an MLflow run carries"):
        reuse.input_tags("x" * reuse.MAX_PIECES * reuse.PIECE, "true", {}, None)


def test_the_worker_relay_and_the_manager_name_the_same_tags() -> None:
    from trialfleet.training_services.aml import reuse, worker_relay

    for name in ("MAILBOX_TAG", "ENDED_TAG", "INPUTS_TAG", "INPUT_PREFIX"):
        assert getattr(worker_relay, name) == getattr(reuse, name), name
    # an attempt's run: its window, the file list and acknowledgement, its inputs, the parent and the attempt
    assert worker_relay.CHILD_SLOTS + 2 + reuse.MAX_PIECES + 1 + 2 <= 50


def test_a_worker_job_runs_the_relay_and_is_named_after_its_worker() -> None:
    from trialfleet.training_services.aml.job import worker_command, worker_job_name

    assert worker_job_name("exp1", "w18c2ab") == "nni_exp_exp1_worker_w18c2ab"
    other = worker_job_name("Exp1", "w18c2ab")  # Azure ML keeps lower-case names
    assert other == other.lower() and other.startswith("nni_")
    assert worker_command(90) == "python3 -I -S .trialfleet/worker_relay.py .trialfleet 90"


def test_a_full_workers_mailbox_fits_one_tag_value() -> None:
    """A worker is given at most MAX_WORKER_TRIALS trials at once; with each of them cancelled too, its mailbox
    (attempts and their runs' uuids) stays within one MLflow tag value."""
    import uuid

    from trialfleet.training_services.aml import reuse

    attempts = [f"abcdefghij.{n + 10}" for n in range(reuse.MAX_WORKER_TRIALS)]
    box = {"give": {a: str(uuid.uuid4()) for a in attempts}, "cancel": attempts, "stop": 1}
    assert len(json.dumps(box, separators=(",", ":"))) <= reuse.MAILBOX_LIMIT
