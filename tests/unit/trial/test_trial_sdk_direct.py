"""Trials written against ``trialfleet.trial`` directly, and trials mixing it with ``import nni``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trial_helpers import PARAMETER_RECORD, trial_env

DIRECT_TRIAL = """
    import json
    from trialfleet import trial

    params = trial.get_next_parameter()
    trial.report_intermediate_result(0.5)
    trial.report_intermediate_result({"default": 0.75, "loss": 0.1})
    trial.report_final_result(0.875)
    print(json.dumps({
        "params": params,
        "ids": [trial.get_experiment_id(), trial.get_trial_id(), trial.get_sequence_id()],
        "current": trial.get_current_parameter("optimizer"),
    }))
"""


def test_direct_api_writes_the_same_records(trial_dir: Path, run_trial) -> None:
    run = run_trial(DIRECT_TRIAL, trial_dir, env=trial_env(trial_dir, pythonpath=None))
    assert run.returncode == 0, run.stderr
    assert run.last_json_line() == {
        "params": PARAMETER_RECORD["parameters"],
        "ids": ["exp42", "Tr1aL", 5],
        "current": "sgd",
    }
    assert [(r["type"], r["sequence"], r["value"], r["parameter_id"]) for r in run.metrics()] == [
        ("PERIODICAL", 0, "0.5", 7),
        ("PERIODICAL", 1, '{"default": 0.75, "loss": 0.1}', 7),
        ("FINAL", 0, "0.875", 7),
    ]


def test_direct_api_refuses_bad_metrics(trial_dir: Path, run_trial) -> None:
    run = run_trial(
        "from trialfleet import trial\ntrial.report_final_result({'default': float('inf')})",
        trial_dir,
        env=trial_env(trial_dir, pythonpath=None),
    )
    assert run.returncode == 1
    assert "ValueError: metric['default'] must be a finite number, got inf" in run.stderr


def test_direct_api_standalone(tmp_path: Path, run_trial) -> None:
    run = run_trial(
        "from trialfleet import trial\nprint(trial.get_next_parameter())",
        tmp_path,
        env=trial_env(None, platform=None, pythonpath=None),
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "{}"
    assert "without a manager" in run.stderr


@pytest.mark.parametrize(
    "imports", ["from trialfleet import trial; import nni", "import nni; from trialfleet import trial"]
)
def test_nni_and_trialfleet_trial_share_one_state(trial_dir: Path, run_trial, imports: str) -> None:
    # With the shim on PYTHONPATH the same source file is loaded twice (as nni.trial and as
    # trialfleet.compat.nni.trial): the sequence must still be one, whichever is imported first.
    run = run_trial(
        f"""
        import sys
        {imports}
        assert sys.modules["nni.trial"] is not sys.modules["trialfleet.compat.nni.trial"]
        params = nni.get_next_parameter()
        trial.report_intermediate_result(1)
        nni.report_intermediate_result(2)
        trial.report_intermediate_result(3)
        print(trial.get_current_parameter("lr"), trial.get_next_parameter())
        """,
        trial_dir,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0.05", "None"]
    assert [(r["sequence"], r["value"]) for r in run.metrics()] == [(0, "1"), (1, "2"), (2, "3")]


def test_importing_trialfleet_trial_stays_light() -> None:
    source = (
        "import json, os, sys, time\n"
        "before = set(sys.modules)\n"
        "start = time.perf_counter()\n"
        "from trialfleet import trial\n"
        "elapsed = time.perf_counter() - start\n"
        "heavy = sorted(m for m in ('pydantic', 'fastapi', 'httpx', 'numpy', 'yaml', 'sqlite3', 'asyncio')"
        " if m in sys.modules)\n"
        "more = sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in ('trialfleet', '__future__'))\n"
        "print(json.dumps({'ms': elapsed * 1000, 'heavy': heavy, 'more': more}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", source],
        env=trial_env(None, platform=None, pythonpath=None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    print(f"from trialfleet import trial: {out['ms']:.1f} ms")
    assert out["heavy"] == []
    # beyond json and os, which every trial needs: every module is one more millisecond or so in every trial
    # (typing and pathlib were ~12 ms); collections.abc only names what os loaded, math is ~0.2 ms
    assert out["more"] == ["collections.abc", "math"]
