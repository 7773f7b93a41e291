"""The web UI at scale, measured in a real browser: a manager serving 10,000 running simulated trials, and
probes that time how fast the page shows what REST says (shared by tests/browser and ``bench``).

Liveness is the time from the moment REST first reports a trial's new status to the moment the page shows
it: a ``MutationObserver`` in the page stamps each (trial, status) pair the first time a row shows it, a
thread stamps when it sent the ``GET /api/v1/nni/trial-jobs/<id>`` that first answered it (so a slow REST
answer counts against the page). Both stamps are this machine's clock (``Date.now()`` and ``time.time()``);
a page faster than that request counts as 0.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.manager.launcher import create_experiment, stop_manager
from trialfleet.testing import simulated


@dataclass(frozen=True)
class RunningExperiment:
    url: str
    experiment_dir: Path
    control: Path  # a file named after a trial ends it (see trialfleet.testing.simulated)
    trials: int

    def end(self, trial_id: str, status: str = "SUCCEEDED", final: float | None = None) -> None:
        text = status if final is None else f"{status} {final}"
        tmp = self.control / f".{trial_id}.tmp"
        tmp.write_text(text)
        tmp.rename(self.control / trial_id)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=60) as answer:
            return json.load(answer)

    def kill(self, trial_id: str) -> None:
        request = urllib.request.Request(f"{self.url}/api/v1/nni/trial-jobs/{trial_id}", method="DELETE")
        urllib.request.urlopen(request, timeout=60).close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_experiment(
    work_dir: Path, trials: int, metric_interval: float = 30.0
) -> Iterator[RunningExperiment]:
    """A real manager process with ``trials`` simulated trials running (re-adopted by ``resume``), every
    one reporting an intermediate result each ``metric_interval`` seconds."""
    site = simulated.plugin_dir(work_dir / "site")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "TRIALFLEET_HOME")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (saved["PYTHONPATH"], str(site)) if p)
    os.environ["TRIALFLEET_HOME"] = str(work_dir / "home")
    try:
        config = simulated.experiment_config(work_dir, trials, metric_interval=metric_interval)
        _, experiment_dir = create_experiment(config)
        simulated.add_running_trials(experiment_dir, trials)
        launched = simulated.spawn_manager(experiment_dir, "resume", free_port())
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        yield RunningExperiment(launched.url, experiment_dir, work_dir / "control", trials)
    finally:
        if not stop_manager(launched.pid, experiment_dir, timeout=120):
            os.kill(launched.pid, signal.SIGKILL)


#: stamps the first moment each row of the trials table shows each status: window.__seen["id|STATUS"]
WATCH_ROWS = """() => {
  window.__seen = window.__seen || {};
  const stamp = () => {
    const now = Date.now();
    for (const row of document.querySelectorAll('#trials-table tbody tr[data-trial]')) {
      const key = row.dataset.trial + '|' + row.dataset.status;
      if (!(key in window.__seen)) window.__seen[key] = now;
    }
  };
  stamp();
  new MutationObserver(stamp).observe(document.getElementById('page'), { childList: true, subtree: true, attributes: true });
}"""


def wait_js(page: Any, expression: str, arg: Any = None, timeout: float = 120.0) -> Any:
    """Evaluate ``expression`` (a function of ``arg``) in the page until it returns something truthy.

    Playwright's ``wait_for_function`` was seen never to resolve on a page that loads plotly.js after the
    wait began (even with interval polling), while the same predicate evaluated again came true: so each
    check here is a separate evaluation."""
    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(expression, arg)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting in the page for {expression}")
        time.sleep(0.05)


def watch_rest(
    experiment: RunningExperiment, trial_id: str, old: str, seen: dict[str, float]
) -> threading.Thread:
    """A thread that stamps ``seen[trial_id]`` when REST first reports the trial in another status than ``old``."""

    def run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            sent = time.time()  # the request's start: a pessimistic stamp for the page's delay
            status = experiment.get(f"/api/v1/nni/trial-jobs/{trial_id}")["status"]
            if status != old:
                seen[trial_id] = sent
                seen[f"{trial_id}|status"] = status
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def measure_liveness(
    page: Any,
    experiment: RunningExperiment,
    trial_ids: list[str],
    change: Callable[[str], None],
    batch: int = 4,
) -> list[float]:
    """End each trial with ``change`` (a few at a time) while its row is shown; the seconds between REST
    showing its new status and the page showing it, one figure per trial."""
    page.evaluate(WATCH_ROWS)
    delays: list[float] = []
    for start in range(0, len(trial_ids), batch):
        group = trial_ids[start : start + batch]
        rest: dict[str, Any] = {}
        threads = [watch_rest(experiment, t, "RUNNING", rest) for t in group]
        for trial_id in group:
            change(trial_id)
        for thread in threads:
            thread.join()
        for trial_id in group:
            if trial_id not in rest:
                raise AssertionError(f"REST never showed trial {trial_id} ending")
            key = f"{trial_id}|{rest[f'{trial_id}|status']}"
            shown = wait_js(page, "key => window.__seen[key]", key) / 1000
            delays.append(max(0.0, shown - rest[trial_id]))
    return delays


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
