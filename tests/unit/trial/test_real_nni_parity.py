"""The shim against the real NNI 3.0: same trial, same bytes in ``.nni/metrics``.

Needs an interpreter with ``nni==3.0`` installed, named by ``TRIALFLEET_REAL_NNI_PYTHON`` (e.g. a venv
made with ``python -m venv --system-site-packages $V && $V/bin/pip install nni==3.0``); without it
these tests are skipped with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from trial_helpers import PARAMETER_RECORD, parse_metrics, trial_env

from trialfleet.compat import real_nni_installed, trial_pythonpath_env

REAL_NNI_PYTHON = os.environ.get("TRIALFLEET_REAL_NNI_PYTHON", "")

pytestmark = pytest.mark.skipif(
    not REAL_NNI_PYTHON, reason="TRIALFLEET_REAL_NNI_PYTHON (an interpreter with nni==3.0) is not set"
)

TRIAL = """
    import nni
    print("params", nni.get_next_parameter())
    for i in range(3):
        nni.report_intermediate_result(0.25 * (i + 1))
    nni.report_intermediate_result({"default": 0.5, "loss": 1.25, "note": "épîc"})
    nni.report_final_result(0.875)
"""


def _run(python: str, trial_dir: Path, code_dir: Path, *, platform: str, shim: bool) -> str:
    (trial_dir / "parameter.cfg").write_text(json.dumps(PARAMETER_RECORD))
    script = code_dir / "trial.py"
    script.write_text(textwrap.dedent(TRIAL))
    env = trial_env(trial_dir, platform=platform, pythonpath=None)
    if shim:
        env.update(trial_pythonpath_env(env, real_nni=False))
    proc = subprocess.run(
        [python, str(script)], cwd=code_dir, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("real", "shim", "code")}
    for path in paths.values():
        path.mkdir()
    return paths


def test_the_real_nni_interpreter_is_detected() -> None:
    assert real_nni_installed(REAL_NNI_PYTHON) is True
    assert trial_pythonpath_env({}, python=REAL_NNI_PYTHON) == {}


@pytest.mark.slow
def test_metrics_file_is_byte_identical_to_real_nni(dirs: dict[str, Path]) -> None:
    _run(REAL_NNI_PYTHON, dirs["real"], dirs["code"], platform="local", shim=False)
    shim_stdout = _run(sys.executable, dirs["shim"], dirs["code"], platform="local", shim=True)
    real = (dirs["real"] / ".nni" / "metrics").read_bytes()
    assert len(parse_metrics(real)) == 5
    assert (dirs["shim"] / ".nni" / "metrics").read_bytes() == real
    # Real NNI on 'local' sends the trial's stdout to $NNI_OUTPUT_DIR/trial.log; the shim leaves it alone.
    assert "PRINT params {'lr': 0.05" in (dirs["real"] / "trial.log").read_text()
    assert shim_stdout.startswith("params {'lr': 0.05")


@pytest.mark.slow
def test_real_nni_off_local_prints_the_same_records_to_stdout(dirs: dict[str, Path]) -> None:
    stdout = _run(REAL_NNI_PYTHON, dirs["real"], dirs["code"], platform="remote", shim=False)
    _run(sys.executable, dirs["shim"], dirs["code"], platform="remote", shim=True)
    printed = [line for line in stdout.splitlines() if line.startswith("NNISDK_MEb'")]
    framed = (dirs["shim"] / ".nni" / "metrics").read_bytes()
    payloads = [line[len("NNISDK_MEb'") : -1] for line in printed]
    assert [p.encode() + b"\n" for p in payloads] == _payloads(framed)
    assert (dirs["real"] / ".nni" / "metrics").read_bytes() == b""


def _payloads(framed: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(framed):
        length = int(framed[pos + 2 : pos + 8])
        out.append(framed[pos + 8 : pos + 8 + length])
        pos += 8 + length
    return out
