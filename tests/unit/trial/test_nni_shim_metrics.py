"""Trials using ``import nni`` through the shim: parameters in, metrics out, in NNI's legacy file format."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trial_helpers import PARAMETER_RECORD, parse_metrics, trial_env

BASIC_TRIAL = """
    import json
    import nni

    params = nni.get_next_parameter()
    for epoch in range(3):
        nni.report_intermediate_result(0.25 * (epoch + 1))
    nni.report_final_result(0.875)
    print(json.dumps({
        "params": params,
        "again": nni.get_next_parameter(),
        "current": nni.get_current_parameter(),
        "current_lr": nni.get_current_parameter("lr"),
        "experiment": nni.get_experiment_id(),
        "trial": nni.get_trial_id(),
        "sequence": nni.get_sequence_id(),
        "module": nni.__file__,
    }))
"""


def test_trial_gets_parameters_and_reports_in_order(trial_dir: Path, run_trial) -> None:
    run = run_trial(BASIC_TRIAL, trial_dir)
    assert run.returncode == 0, run.stderr
    out = run.last_json_line()
    assert out["params"] == PARAMETER_RECORD["parameters"]
    assert out["again"] is None, "as in NNI, there is no second parameter set"
    assert out["current"] == PARAMETER_RECORD["parameters"]
    assert out["current_lr"] == 0.05
    assert (out["experiment"], out["trial"], out["sequence"]) == ("exp42", "Tr1aL", 5)
    assert "trialfleet/compat/nni/__init__.py" in out["module"]

    records = run.metrics()
    assert [(r["type"], r["sequence"], r["value"]) for r in records] == [
        ("PERIODICAL", 0, "0.25"),
        ("PERIODICAL", 1, "0.5"),
        ("PERIODICAL", 2, "0.75"),
        ("FINAL", 0, "0.875"),
    ]
    assert all(r["parameter_id"] == 7 and r["trial_job_id"] == "Tr1aL" for r in records)


def test_record_bytes_match_nni_legacy_format(trial_dir: Path, run_trial) -> None:
    run = run_trial("import nni; nni.get_next_parameter(); nni.report_final_result(0.5)", trial_dir)
    assert run.returncode == 0, run.stderr
    payload = (
        b'{"parameter_id": 7, "trial_job_id": "Tr1aL", "type": "FINAL", "sequence": 0, "value": "0.5"}\n'
    )
    assert run.metrics_path.read_bytes() == b"ME%06d" % len(payload) + payload


def test_dict_metric_keeps_extra_keys_and_is_double_encoded(trial_dir: Path, run_trial) -> None:
    run = run_trial(
        """
        import nni
        nni.get_next_parameter()
        nni.report_intermediate_result({"default": 0.5, "loss": 1.25, "note": "épîc"})
        nni.report_final_result({"default": 3, "per_class": [0.1, 0.2]})
        """,
        trial_dir,
    )
    assert run.returncode == 0, run.stderr
    first, final = run.metrics()
    assert json.loads(first["value"]) == {"default": 0.5, "loss": 1.25, "note": "épîc"}
    assert json.loads(final["value"]) == {"default": 3, "per_class": [0.1, 0.2]}
    assert final["type"] == "FINAL"


@pytest.mark.slow
def test_numpy_scalars_are_reported_as_plain_numbers(trial_dir: Path, run_trial) -> None:
    run = run_trial(
        """
        import numpy as np
        import nni
        nni.get_next_parameter()
        nni.report_intermediate_result(np.float32(0.25))
        nni.report_final_result({"default": np.float64(0.5), "curve": np.arange(3), "n": np.int64(4)})
        """,
        trial_dir,
    )
    assert run.returncode == 0, run.stderr
    first, final = run.metrics()
    assert first["value"] == "0.25"
    assert json.loads(final["value"]) == {"default": 0.5, "curve": [0, 1, 2], "n": 4}


BAD_METRICS_TRIAL = """
    import json
    import nni

    nni.get_next_parameter()
    cases = {
        "nan": float("nan"),
        "inf": float("inf"),
        "-inf": float("-inf"),
        "string": "0.9",
        "none": None,
        "list": [0.1, 0.2],
        "bool": True,
        "dict without default": {"accuracy": 0.9},
        "dict with nan default": {"default": float("nan")},
        "dict with string default": {"default": "high"},
        "unserialisable extra key": {"default": 1.0, "model": object()},
        "huge": {"default": 1.0, "log": "x" * 1_000_000},
    }
    messages = {}
    for name, metric in cases.items():
        try:
            nni.report_intermediate_result(metric)
        except ValueError as exc:
            messages[name] = str(exc)
    nni.report_intermediate_result(0.5)
    print(json.dumps(messages))
"""


def test_invalid_metrics_raise_value_error_in_the_trial(trial_dir: Path, run_trial) -> None:
    run = run_trial(BAD_METRICS_TRIAL, trial_dir)
    assert run.returncode == 0, run.stderr
    messages = run.last_json_line()
    assert set(messages) == {
        "nan",
        "inf",
        "-inf",
        "string",
        "none",
        "list",
        "bool",
        "dict without default",
        "dict with nan default",
        "dict with string default",
        "unserialisable extra key",
        "huge",
    }
    rule = "a metric must be a finite number or a dict with a finite numeric 'default'"
    assert messages["nan"] == f"{rule}, got nan"
    assert messages["-inf"] == f"{rule}, got -inf"
    assert messages["bool"] == f"{rule}, got bool: True"
    assert "got str: '0.9'" in messages["string"]
    assert "'default' key" in messages["dict without default"]
    assert "metric['default'] must be a finite number" in messages["dict with string default"]
    assert "not JSON-serialisable" in messages["unserialisable extra key"]
    assert messages["huge"].startswith("Metric too long")
    # Nothing of the refused metrics reached the file, and the sequence did not advance for them.
    assert [(r["sequence"], r["value"]) for r in run.metrics()] == [(0, "0.5")]


def test_uncaught_invalid_metric_fails_the_trial_with_a_clear_message(trial_dir: Path, run_trial) -> None:
    run = run_trial("import nni; nni.get_next_parameter(); nni.report_final_result(float('nan'))", trial_dir)
    assert run.returncode == 1
    assert "ValueError: a metric must be a finite number" in run.stderr
    assert not run.metrics_path.exists() or run.metrics_path.read_bytes() == b""


@pytest.mark.parametrize("platform", [None, "unittest"])
def test_standalone_returns_empty_parameters_and_writes_nothing(
    tmp_path: Path, trial_dir: Path, run_trial, platform: str | None
) -> None:
    env = trial_env(trial_dir, platform=platform)
    run = run_trial(
        """
        import json, nni
        params = nni.get_next_parameter()
        nni.report_intermediate_result(0.5)
        nni.report_final_result({"default": 0.75})
        print(json.dumps({"params": params, "trial": nni.get_trial_id()}))
        """,
        trial_dir,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert run.last_json_line() == {"params": {}, "trial": "Tr1aL"}
    assert "RuntimeWarning" in run.stderr and "without a manager" in run.stderr
    assert "Intermediate result: 0.5  (Index 0)" in run.stdout
    assert 'Final result: {"default": 0.75}' in run.stdout
    assert not (trial_dir / ".nni").exists()
    assert sorted(p.name for p in tmp_path.rglob(".nni")) == []


def test_standalone_ids_default_to_standalone(tmp_path: Path, run_trial) -> None:
    run = run_trial(
        """
        import json, nni
        print(json.dumps([nni.get_experiment_id(), nni.get_trial_id(), nni.get_sequence_id()]))
        """,
        tmp_path,
        env=trial_env(None, platform=None),
    )
    assert run.returncode == 0, run.stderr
    assert run.last_json_line() == ["STANDALONE", "STANDALONE", 0]


@pytest.mark.slow
def test_ten_thousand_intermediate_results_land_intact(trial_dir: Path, run_trial) -> None:
    run = run_trial(
        """
        import time, nni
        nni.get_next_parameter()
        start = time.perf_counter()
        for i in range(10_000):
            nni.report_intermediate_result({"default": i / 7, "epoch": i})
        print(f"10000 intermediate results written in {time.perf_counter() - start:.3f} s")
        """,
        trial_dir,
    )
    assert run.returncode == 0, run.stderr
    print(run.stdout.strip())
    records = run.metrics()
    assert len(records) == 10_000
    assert [r["sequence"] for r in records] == list(range(10_000))
    assert [json.loads(r["value"])["epoch"] for r in records] == list(range(10_000))


@pytest.mark.slow
def test_concurrent_writers_never_interleave_records(trial_dir: Path, run_trial) -> None:
    # Forked workers (data loaders...) inherit the descriptor: each record is still one append.
    run = run_trial(
        """
        import os, nni
        nni.get_next_parameter()
        nni.report_intermediate_result(-1)
        children = []
        for worker in range(4):
            pid = os.fork()
            if pid == 0:
                for i in range(2000):
                    nni.report_intermediate_result({"default": i, "worker": worker, "pad": "p" * (i % 300)})
                os._exit(0)
            children.append(pid)
        assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
        """,
        trial_dir,
    )
    assert run.returncode == 0, run.stderr
    records = run.metrics()[1:]
    assert len(records) == 8000
    for worker in range(4):
        mine = [json.loads(r["value"]) for r in records if json.loads(r["value"])["worker"] == worker]
        assert [m["default"] for m in mine] == list(range(2000))


def test_report_before_get_next_parameter_still_carries_the_parameter_id(trial_dir: Path, run_trial) -> None:
    run = run_trial("import nni; nni.report_final_result(1.5); print(nni.get_next_parameter())", trial_dir)
    assert run.returncode == 0, run.stderr
    assert [(r["parameter_id"], r["value"]) for r in run.metrics()] == [(7, "1.5")]
    assert "'optimizer': 'sgd'" in run.stdout


@pytest.mark.slow
def test_waits_for_a_late_parameter_file(trial_dir: Path, tmp_path: Path) -> None:
    (trial_dir / "parameter.cfg").unlink()
    script = tmp_path / "late.py"
    script.write_text("import nni; print(nni.get_next_parameter()['optimizer'])")
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        env=trial_env(trial_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    (trial_dir / "parameter.cfg").write_text(json.dumps(PARAMETER_RECORD))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert stdout.strip() == "sgd"


@pytest.mark.slow
def test_missing_parameter_file_fails_with_a_clear_error(trial_dir: Path, run_trial) -> None:
    (trial_dir / "parameter.cfg").unlink()
    run = run_trial("import nni; nni.get_next_parameter()", trial_dir)
    assert run.returncode == 1
    assert "FileNotFoundError" in run.stderr
    assert f"{trial_dir / 'parameter.cfg'} is missing or empty after waiting" in run.stderr


def test_malformed_parameter_file_names_the_file(trial_dir: Path, run_trial) -> None:
    (trial_dir / "parameter.cfg").write_text('{"lr": 0.1}')
    run = run_trial("import nni; nni.get_next_parameter()", trial_dir)
    assert run.returncode == 1
    assert "must hold an NNI parameter record" in run.stderr and "parameter.cfg" in run.stderr


def test_platform_without_trial_directory_is_a_clear_error(tmp_path: Path, run_trial) -> None:
    env = trial_env(None, platform="local")
    run = run_trial("import nni; nni.get_next_parameter()", tmp_path, env=env)
    assert run.returncode == 1
    assert "NNI_SYS_DIR is not set" in run.stderr


def test_parser_rejects_a_truncated_record() -> None:
    payload = b'{"parameter_id": 1, "trial_job_id": "t", "type": "FINAL", "sequence": 0, "value": "1"}\n'
    good = b"ME%06d" % len(payload) + payload
    assert len(parse_metrics(good * 2)) == 2
    with pytest.raises(AssertionError, match="truncated"):
        parse_metrics(good + good[:-5])
