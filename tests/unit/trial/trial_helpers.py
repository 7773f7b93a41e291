"""Helpers for running real trial scripts in subprocesses against a prepared trial directory.

The metrics parser here is written from ``docs/trial-directory.md`` alone (it does not reuse the SDK's
encoder), so a change in the bytes the SDK writes shows up as a failure.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.compat import SHIM_PATH

PARAMETER_RECORD = {
    "parameter_id": 7,
    "parameter_source": "algorithm",
    "parameters": {"lr": 0.05, "optimizer": "sgd", "layers": 3},
    "parameter_index": 0,
}


def parse_metrics(data: bytes) -> list[dict[str, Any]]:
    """Split ``.nni/metrics`` into records: ``b"ME"``, six ASCII digits, payload ending in a newline."""
    records = []
    pos = 0
    while pos < len(data):
        assert data[pos : pos + 2] == b"ME", f"bad frame marker at byte {pos}: {data[pos : pos + 8]!r}"
        digits = data[pos + 2 : pos + 8]
        assert digits.isdigit() and len(digits) == 6, f"bad length field at byte {pos}: {digits!r}"
        length = int(digits)
        payload = data[pos + 8 : pos + 8 + length]
        assert len(payload) == length, f"truncated record at byte {pos}"
        assert payload.endswith(b"\n") and b"\n" not in payload[:-1], f"bad payload at byte {pos}"
        record = json.loads(payload)
        assert set(record) == {"parameter_id", "trial_job_id", "type", "sequence", "value"}, record
        assert isinstance(record["value"], str), "value must be JSON encoded a second time"
        records.append(record)
        pos += 8 + length
    return records


@dataclass
class TrialRun:
    returncode: int
    stdout: str
    stderr: str
    trial_dir: Path

    @property
    def metrics_path(self) -> Path:
        return self.trial_dir / ".nni" / "metrics"

    def metrics(self) -> list[dict[str, Any]]:
        return parse_metrics(self.metrics_path.read_bytes())

    def last_json_line(self) -> Any:
        """What the trial script printed last as one JSON line."""
        return json.loads(self.stdout.strip().splitlines()[-1])


def trial_env(
    trial_dir: Path | None, *, platform: str | None = "local", pythonpath: str | None = str(SHIM_PATH)
) -> dict[str, str]:
    """A clean environment as a platform gives it to a trial (nothing NNI-ish inherited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNI_") and k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if platform is not None:
        env["NNI_PLATFORM"] = platform
    if trial_dir is not None:
        env.update(
            NNI_SYS_DIR=str(trial_dir),
            NNI_OUTPUT_DIR=str(trial_dir),
            NNI_EXP_ID="exp42",
            NNI_TRIAL_JOB_ID="Tr1aL",
            NNI_TRIAL_SEQ_ID="5",
        )
    return env
