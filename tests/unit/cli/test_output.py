"""What the CLI prints of users' text (config keys, errors, a trial's stderr) comes out as written: rich would take
``[remote]`` or ``[/tmp]`` for markup, dropping the one and refusing the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from trialfleet.cli import foreground, output
from trialfleet.status import ExperimentStatus, TrialStatus

BRACKETED = "pip install 'trialfleet[remote]'; key trainingService[0].machineList[1]; [/tmp] [bold]x"


@pytest.fixture(autouse=True)
def fresh_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_console", None)


def test_warnings_and_successes_keep_their_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    output.warning(BRACKETED)
    output.success(BRACKETED)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"WARNING: {BRACKETED}", BRACKETED]


def test_table_cells_keep_their_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_table(None, ["parameters"], [['{"layer": "[conv]"}'], ["[/x]"]])
    out = capsys.readouterr().out
    assert '{"layer": "[conv]"}' in out and "[/x]" in out


def test_styles_are_still_applied(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    output.warning(BRACKETED)
    out = capsys.readouterr().out
    assert "\x1b[33mWARNING:\x1b[0m" in out and BRACKETED in out


@dataclass
class _Experiment:
    error: str
    id: str = "abc12345"
    status: ExperimentStatus = ExperimentStatus.ERROR
    exec_duration: float = 3.0


@dataclass
class _Store:
    error: str
    stderr_tail: str
    events_data: list[Any] = field(default_factory=list)

    def experiment(self) -> _Experiment:
        return _Experiment(self.error)

    def trials(self, **_: Any) -> list[Any]:
        return []

    def trial_counts(self) -> dict[TrialStatus, int]:
        return {TrialStatus.FAILED: 1}

    def events(self, **_: Any) -> list[Any]:
        @dataclass
        class Event:
            data: dict[str, str]

        return [Event({"trialId": "t1", "message": "exit code 1", "stderrTail": self.stderr_tail})]


def test_the_experiments_error_and_the_first_failures_stderr_are_printed_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stderr = "Traceback: [/usr/lib/python3] IndexError: [red] list index out of range"
    foreground._print_best(_Store(BRACKETED, stderr), maximize=True)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert BRACKETED in out
    assert "no trial succeeded." in out and stderr in out


def test_the_live_panel_shows_the_first_failures_stderr_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    stderr = "KeyError: [remote] in [/etc/hosts]"
    output.console().print(foreground._panel(_Store("", stderr), maximize=True))  # type: ignore[arg-type]
    assert stderr in capsys.readouterr().out


def test_a_ruled_config_is_never_folded(capsys: pytest.CaptureFixture[str]) -> None:
    """The converted form of a v1 config is YAML to copy into a file: a value folded at the console's width
    (200 columns when piped) would no longer parse."""
    line = "trialCommand: python3 train.py" + " --x=1" * 80
    output.yellow_ruled(f"{line}\nfoo: bar\n")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == line and lines[2] == "foo: bar"


def test_the_live_panel_says_why_trials_wait(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(tmp_path)
    store.init_experiment("exp1", {"trialConcurrency": 2}, now=100.0)
    record = {"parameter_id": None, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
    reason = "waiting for resources in virtual cluster vc_a (gpu 4 of 4 in use)"
    for trial_id in ("aaaaa", "bbbbb", "ccccc"):
        store.add_trial(trial_id, record, now=101.0)
        store.mark_submitted(trial_id, {"job": trial_id}, f"openpai:{trial_id}", now=102.0, running=False)
    for trial_id in ("aaaaa", "bbbbb"):
        store.set_waiting_reason(trial_id, reason, now=103.0)
    output.console().print(foreground._panel(store, maximize=True))
    out = " ".join(capsys.readouterr().out.split())
    assert f"waiting (2 of 3): {reason}" in out
