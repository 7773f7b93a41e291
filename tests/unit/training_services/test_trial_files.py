"""The manager's reading of trial directories: metric stream framing, metric validation, final records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.events import TrialMetric, TrialProblem
from trialfleet.training_services.metric_channels import (
    MetricReader,
    decode_metric,
    parse_metric_stream,
    scan_stdout_metrics,
)
from trialfleet.training_services.trial_dir import (
    command_record,
    ended_from_result,
    input_files,
    read_local_file,
    relative_file,
    write_trial_inputs,
)


def record(sequence: int = 0, value: object = 0.5, kind: str = "PERIODICAL", raw: str | None = None) -> str:
    dumped = json.dumps(value) if raw is None else raw
    return json.dumps(
        {"parameter_id": 3, "trial_job_id": "t", "type": kind, "sequence": sequence, "value": dumped}
    )


def frame(text: str) -> bytes:
    data = (text + "\n").encode()
    return b"ME%06d" % len(data) + data


# ---- framing -------------------------------------------------------------------------------------


@given(
    payloads=st.lists(st.text(min_size=0, max_size=40), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
@pytest.mark.slow
def test_incremental_parsing_matches_whole_parsing(payloads: list[str], cuts: list[int]) -> None:
    stream = b"".join(frame(json.dumps(p)) for p in payloads)
    whole, end, problems = parse_metric_stream(stream, 0)
    assert (end, problems) == (len(stream), [])
    assert [r.payload.decode() for r in whole] == [json.dumps(p) + "\n" for p in payloads]
    received, consumed = [], 0
    for available in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
        # as the reader does: from the cursor up to wherever the writer got
        records, consumed, problems = parse_metric_stream(stream[consumed:available], consumed)
        assert problems == []
        received += records
    assert (received, consumed) == (whole, len(stream))


@pytest.mark.parametrize(
    ("data", "final", "records", "consumed", "problem"),
    [
        (frame("a"), False, 1, 10, None),
        (frame("a")[:5], False, 0, 0, None),  # a header still being written
        (frame("a")[:9], False, 0, 0, None),  # a payload still being written
        (frame("a")[:9], True, 0, 9, "truncated record"),
        (b"garbage" + frame("a"), False, 1, 17, "not a record header"),
        (b"ME00000x" + frame("a"), False, 1, 18, "not a record header"),
        (b"ME000003abcd" + frame("a"), False, 1, 22, "does not end at a newline"),
        (b"junk without any header", False, 0, 23, "not a record header"),
        (b"junk then M", False, 0, 10, "not a record header"),  # "M" may start the next header
        (b"junk then ME0001", False, 0, 10, "not a record header"),
    ],
)
def test_framing(data: bytes, final: bool, records: int, consumed: int, problem: str | None) -> None:
    parsed, end, problems = parse_metric_stream(data, 100, final=final)
    assert (len(parsed), end) == (records, 100 + consumed)
    assert [problem in p.message for p in problems] == ([True] if problem else [])


def test_one_problem_per_corrupt_stretch() -> None:
    data = b"x" * 10_000 + b"MEME ME12" + frame("a")
    parsed, _, problems = parse_metric_stream(data, 0)
    assert len(parsed) == 1 and len(problems) == 1 and "10009 byte(s) skipped" in problems[0].message


# ---- stdout --------------------------------------------------------------------------------------


def test_stdout_lines() -> None:
    line = f"NNISDK_MEb'{record()}'".encode()
    data = b"epoch 1\n" + line + b"\r\n" + b"progress\r" + line + b"\nunfinished NNISDK_MEb'{"
    records, end, problems = scan_stdout_metrics(data, 50)
    assert [r.payload.decode() for r in records] == [record(), record()]
    assert end == 50 + data.rindex(b"\n") + 1 and problems == []
    records, end, problems = scan_stdout_metrics(data, 50, final=True)
    assert len(records) == 2 and end == 50 + len(data) and "unterminated" in problems[0].message


def test_stdout_partial_line_does_not_grow_forever() -> None:
    bar = b"\r" + b"#" * 1_100_000
    records, end, _ = scan_stdout_metrics(bar, 0)
    assert (records, end) == ([], len(bar))
    pending = f"NNISDK_MEb'{record()}".encode()
    records, end, _ = scan_stdout_metrics(bar + pending, 0)
    assert end == len(bar)  # everything before the metric that is still being printed


# ---- metric records ------------------------------------------------------------------------------

CURSOR = {"metrics": 10, "stdout": 0}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (record(4, 0.5), ("PERIODICAL", 4, "0.5")),
        (record(0, {"default": 2, "loss": None}, kind="FINAL"), ("FINAL", 0, '{"default": 2, "loss": null}')),
        (record(1, 3, kind="INTERMEDIATE"), ("PERIODICAL", 1, "3")),
        (json.dumps({"type": "REQUEST_PARAMETER", "sequence": 0, "parameter_index": 0}), None),
        # a key beside "default" that standard JSON cannot hold is stored as null (issue 44, item 11)
        (
            record(raw='{"default": 0.5, "x": Infinity, "y": [NaN]}', kind="FINAL"),
            ("FINAL", 0, '{"default": 0.5, "x": null, "y": [null]}'),
        ),
        (record(raw="NaN"), "not a finite number"),
        (record(raw="-Infinity"), "not a finite number"),
        (record(value={"default": float("nan")}), "not a finite number"),
        (record(raw="{oops"), "value is not JSON"),
        (record(value="0.5"), "numeric 'default'"),
        (record(value=True), "numeric 'default'"),
        (record(value={"accuracy": 1}), "numeric 'default'"),
        (record(kind="BOGUS"), "unknown metric type 'BOGUS'"),
        (record(sequence="1"), "sequence '1' is not an integer"),  # type: ignore[arg-type]
        (json.dumps({"type": "FINAL", "sequence": 0, "value": 1}), "must be a JSON string"),
        (json.dumps({"type": "FINAL", "sequence": 0, "parameter_id": "x", "value": "1"}), "parameter_id 'x'"),
        ("[1, 2]", "not a JSON object"),
        ("not json", "record is not JSON"),
        (record(value={"default": 1, "pad": "x" * 1_000_000}), "over the 1000000 byte limit"),
    ],
)
def test_decode_metric(payload: str, expected: object) -> None:
    decoded = decode_metric("t", payload.encode(), CURSOR, 1.0)
    if expected is None:
        assert decoded is None
    elif isinstance(expected, tuple):
        assert isinstance(decoded, TrialMetric)
        assert (decoded.type, decoded.sequence, decoded.data, decoded.parameter_id) == (*expected, 3)
        assert decoded.cursor == CURSOR
    else:
        assert isinstance(decoded, TrialProblem) and str(expected) in decoded.message, decoded
        assert decoded.cursor == CURSOR


# ---- the local reader ----------------------------------------------------------------------------


def test_reader_reads_only_new_bytes_and_resumes_from_a_cursor(tmp_path: Path) -> None:
    (tmp_path / ".nni").mkdir()
    metrics = tmp_path / ".nni" / "metrics"
    first, second = frame(record(0)), frame(record(1))
    metrics.write_bytes(first + second[:7])
    reader = MetricReader("t", tmp_path, {})
    got, problems = reader.read()
    assert [m.sequence for m in got] == [0] and problems == []
    assert got[0].cursor == {"metrics": len(first), "stdout": 0}
    with metrics.open("ab") as f:
        f.write(second[7:])
    (tmp_path / "trial.stdout").write_bytes(f"hello\nNNISDK_MEb'{record(2)}'\n".encode())
    got, _ = reader.read()
    assert [m.sequence for m in got] == [1, 2]
    resumed = MetricReader("t", tmp_path, got[0].cursor)
    assert [m.sequence for m in resumed.read()[0]] == [2]


def test_a_terminated_long_stdout_line_is_not_called_unterminated(tmp_path: Path) -> None:
    """Issue 44, item 11: a metric line longer than a read (8 MiB), ended by its quote and newline, is over the
    byte limit, not unterminated; a short one after it is read."""
    (tmp_path / ".nni").mkdir()
    long_line = b"NNISDK_MEb'" + b"x" * (9 * 1024 * 1024) + b"'\n"
    (tmp_path / "trial.stdout").write_bytes(long_line + f"NNISDK_MEb'{record(1)}'\n".encode())
    got, problems = MetricReader("t", tmp_path, {}).read(final=True)
    assert [m.sequence for m in got] == [1]
    assert problems and all("unterminated" not in p.message for p in problems), problems
    assert "byte limit" in problems[0].message


def test_reader_reports_a_truncated_record_once_the_trial_ended(tmp_path: Path) -> None:
    (tmp_path / ".nni").mkdir()
    (tmp_path / ".nni" / "metrics").write_bytes(frame(record(0)) + frame(record(1))[:20])
    reader = MetricReader("t", tmp_path, {})
    assert len(reader.read()[0]) == 1
    got, problems = reader.read(final=True)
    assert got == [] and "truncated record" in problems[0].message
    assert reader.read(final=True) == ([], [])


def test_reader_without_any_file(tmp_path: Path) -> None:
    assert MetricReader("t", tmp_path / "missing", {}).read(final=True) == ([], [])


# ---- final records -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "cancel_status", "expected"),
    [
        ({"exit_code": 0, "reason": "exit code 0"}, None, (TrialStatus.SUCCEEDED, None, "exit code 0")),
        (
            {"exit_code": 2, "reason": "exit code 2"},
            None,
            (TrialStatus.FAILED, FailureKind.USER_CODE, "exit code 2"),
        ),
        (
            {"signal": 9, "reason": "killed by signal 9"},
            None,
            (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE, "killed by signal 9"),
        ),
        (
            {"signal": 11, "reason": "killed by signal 11"},
            None,
            (TrialStatus.FAILED, FailureKind.USER_CODE, "killed by signal 11"),
        ),
        (
            {"signal": 15, "canceled": True, "reason": "canceled"},
            None,
            (TrialStatus.USER_CANCELED, FailureKind.CANCELED, "canceled"),
        ),
        (
            {"canceled": True, "reason": "canceled"},
            TrialStatus.EARLY_STOPPED,
            (TrialStatus.EARLY_STOPPED, FailureKind.CANCELED, "canceled"),
        ),
        (
            {"canceled": True, "reason": "canceled"},
            TrialStatus.SYS_CANCELED,
            (TrialStatus.SYS_CANCELED, FailureKind.CANCELED, "canceled"),
        ),
        (
            {"signal": 15, "timed_out": True, "reason": "timeout after 5s"},
            None,
            (TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT, "timeout after 5s"),
        ),
        (
            {"reason": "could not start: no such directory"},
            None,
            (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE, "could not start: no such directory"),
        ),
        # the trial ended on its own before a cancel reached it: its real outcome stands
        (
            {"exit_code": 0, "reason": "exit code 0"},
            TrialStatus.USER_CANCELED,
            (TrialStatus.SUCCEEDED, None, "exit code 0"),
        ),
    ],
)
def test_ended_from_result(result: dict, cancel_status: TrialStatus | None, expected: tuple) -> None:
    ended = ended_from_result("t", {"end_time": 5.0, **result}, cancel_status)
    assert (ended.status, ended.failure_kind, ended.message) == expected
    assert (ended.timestamp, ended.exit_code) == (5.0, result.get("exit_code"))


def test_trial_inputs(tmp_path: Path) -> None:
    trial_dir = tmp_path / "trials" / "abc"
    trial_dir.mkdir(parents=True)
    for stale in ("result.json", "keeper.json", "trial.stdout"):
        (trial_dir / stale).write_text("old")
    env = {"A": "b c"}
    command = command_record(["x", "y z"], "/c", env, env_unset=["SDK_PROCESS"])
    write_trial_inputs(trial_dir, input_files('{"parameter_id": 1}', command))
    assert (trial_dir / "parameter.cfg").read_text() == '{"parameter_id": 1}'
    assert (trial_dir / ".nni").is_dir()
    assert sorted(p.name for p in trial_dir.iterdir()) == [".nni", "command.json", "parameter.cfg"]
    command = json.loads((trial_dir / "command.json").read_text())
    assert command == {
        "argv": ["x", "y z"],
        "cwd": "/c",
        "env": env,
        "env_unset": ["SDK_PROCESS"],
        "max_duration": None,
        "kill_grace": 5.0,
        "protocol": 2,
    }
    assert (trial_dir / "command.json").stat().st_mode & 0o777 == 0o600  # it holds the spec's variables


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", "", ".", ".."])
def test_names_that_leave_the_trial_directory_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a file of the trial directory"):
        relative_file(name, "/trials/t")


def test_aliases_and_links_inside_the_trial_directory(tmp_path: Path) -> None:
    trial_dir = tmp_path / "t"
    trial_dir.mkdir()
    (trial_dir / "trial.stdout").write_text("out")
    (trial_dir / "escape").symlink_to(tmp_path)
    (tmp_path / "secret").write_text("s")
    assert relative_file("stdout") == "trial.stdout" and relative_file("sub//x/./y") == "sub/x/y"
    assert read_local_file(trial_dir, "stdout") == b"out"
    with pytest.raises(ValueError, match="leads outside the trial directory"):
        read_local_file(trial_dir, "escape/secret")
    with pytest.raises(FileNotFoundError):
        read_local_file(trial_dir, "missing")


def test_a_result_record_the_trial_overwrote_is_read_defensively() -> None:
    hostile = {"exit_code": 2**80, "signal": "9", "end_time": 1e308, "reason": "x" * 10_000}
    ended = ended_from_result("t", hostile)
    assert (ended.status, ended.exit_code, ended.failure_kind) == (
        TrialStatus.FAILED,
        None,
        FailureKind.INFRASTRUCTURE,
    )
    assert len(ended.message or "") == 500 and ended.timestamp < 1e11


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"type": "FINAL", "sequence": 0, "value": str(10**400)}, "too large for a number"),
        (
            {"type": "FINAL", "sequence": 2**63, "value": "1"},
            "sequence 9223372036854775808 is not an integer",
        ),
        ({"type": "FINAL", "sequence": -1, "value": "1"}, "sequence -1 is not an integer from 0"),
        ({"type": "FINAL", "parameter_id": 2**64, "value": "1"}, "parameter_id 18446744073709551616"),
        (
            {
                "type": "FINAL",
                "value": json.dumps(
                    {"default": 1, "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}
                ),
            },
            "nested more than 32",
        ),
    ],
)
def test_hostile_metric_records_are_problems(record: dict[str, object], problem: str) -> None:
    decoded = decode_metric("t", json.dumps(record).encode(), {}, 0.0)
    assert isinstance(decoded, TrialProblem) and problem in decoded.message


def test_a_record_nested_past_the_parser_is_a_problem() -> None:
    decoded = decode_metric("t", b"[" * 100_000 + b"]" * 100_000, {}, 0.0)
    assert isinstance(decoded, TrialProblem) and "nested too deeply" in decoded.message


@pytest.mark.parametrize(
    "name", ["command.json", "./command.json", "command.worker.json", "replicas/worker-1/command.json"]
)
def test_the_keepers_commands_are_never_served_at_any_depth(name: str) -> None:
    from trialfleet.errors import TrialFileRefusedError

    with pytest.raises(TrialFileRefusedError):
        relative_file(name, "/trials/t")


@pytest.mark.parametrize("name", ["commands.json", "command.json.txt", "my_command.json", "out/command.log"])
def test_files_named_like_a_command_are_served(name: str) -> None:
    assert relative_file(name, "/trials/t") == name
