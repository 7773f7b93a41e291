"""The Python experiment API, with NNI's names (``nni.experiment.Experiment``).

::

    experiment = Experiment("local")                 # or Experiment(ExperimentConfig...)
    experiment.config.trial_command = "python3 trial.py"
    experiment.config.search_space = {...}
    experiment.config.tuner.name = "TPE"
    experiment.config.trial_concurrency = 2
    experiment.run(8080)                             # True when the experiment is DONE

The manager always runs in its own process (the one ``trialfleet create`` starts), so the experiment survives
a crash of the calling script in ``RunMode.Detach``. ``run()`` returns when the experiment is DONE (True) or
in ERROR (False) and leaves the manager serving the web UI and REST API; it is stopped by ``stop()``, by the
``with`` block's end, or — in ``Background``/``Foreground`` run modes, NNI's default — when the interpreter exits.
Queries go through :mod:`trialfleet.client`: REST while the manager runs, the database once it is stopped.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from trialfleet.experiment_data import TrialJob, TrialMetricData, TrialResult
from trialfleet.layout import log_files

if TYPE_CHECKING:
    import socket

    from trialfleet.client import ExperimentClient
    from trialfleet.config import ExperimentConfig
    from trialfleet.manager.launcher import Launched

__all__ = ["Experiment", "RunMode"]

_logger = logging.getLogger("trialfleet.experiment")
_POLL_SECONDS = 1.0
#: what a busy or bad port tells the user to change
_PORT_PARAMETER = "the port parameter of Experiment.run(port=...) or .start(port=...)"


def _say_on_stdout() -> None:
    """Print the experiment's life cycle on stdout as NNI's ``Experiment`` does (``[date] message``), unless the
    application has configured logging itself (then its handlers get the records)."""
    if _logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    _logger.addHandler(handler)
    _logger.setLevel(logging.INFO)


class RunMode(str, Enum):
    Background = "background"  # the manager is stopped when this interpreter exits
    Foreground = "foreground"  # same, and the manager's log is copied to this process's stderr
    Detach = "detach"  # the manager keeps running after this interpreter exits


class Experiment:
    def __init__(
        self, config_or_platform: ExperimentConfig | str | list[str] | None = None, id: str | None = None
    ) -> None:
        from trialfleet.config_draft import ConfigDraft

        self.config: ExperimentConfig | ConfigDraft | None
        if isinstance(config_or_platform, (str, list)):
            self.config = ConfigDraft(config_or_platform)
        else:
            self.config = config_or_platform
        self.id = id
        self.port: int | None = None
        self.url_prefix: str | None = None
        #: where the manager listens; beyond loopback (e.g. "0.0.0.0") requests need the access token,
        #: which this object reads from the experiment directory
        self.host = "127.0.0.1"
        self.public_read = False  # beyond loopback: reads need no token (changes still do)
        self._experiment_dir: Path | None = None
        self.mode = RunMode.Background
        self._action = "create"
        self._pid: int | None = None
        self._log_follower: _LogFollower | None = None
        self._url = ""

    # ---- life cycle ----------------------------------------------------------------------------------

    def start(
        self, port: int = 8080, debug: bool = False, run_mode: RunMode | str = RunMode.Background
    ) -> None:
        """Start the manager (detached process) and return once its REST API answers."""
        from trialfleet import startup
        from trialfleet.client import resolve_experiment

        self.mode = RunMode(run_mode)
        _say_on_stdout()
        if self._action == "create":
            config = self._validated_config()
            with startup.created(config, port, self.id, host=self.host, port_option=_PORT_PARAMETER) as new:
                self._starting(new.experiment_id)
                launched = self._launch(new.experiment_dir, port, debug, new.sock)
        else:
            ref = resolve_experiment(self.id)
            action: Literal["resume", "view"] = "resume" if self._action == "resume" else "view"
            startup.check_relaunch(ref, action, port, host=self.host, port_option=_PORT_PARAMETER)
            self._starting(ref.id)
            launched = self._launch(ref.experiment_dir, port, debug)
        experiment_dir = launched.experiment_dir
        if launched.status == "ERROR":
            _logger.error(
                "experiment %s could not start: %s", launched.experiment_id, "; ".join(launched.errors)
            )
        self.id, self.port, self._pid = launched.experiment_id, port, launched.pid
        self._experiment_dir = experiment_dir
        self._url = launched.url
        _logger.info("Setting up...")
        _logger.info("Web portal URLs: %s", launched.url)
        if self.mode is not RunMode.Detach:
            atexit.register(self.stop)
        if self.mode is RunMode.Foreground:
            self._log_follower = _LogFollower(log_files(experiment_dir).manager)

    @staticmethod
    def _starting(experiment_id: str) -> None:
        _logger.info("Creating experiment, Experiment ID: %s", experiment_id)
        _logger.info("Starting web server...")

    def _launch(
        self, experiment_dir: Path, port: int, debug: bool, sock: socket.socket | None = None
    ) -> Launched:
        from trialfleet import startup
        from trialfleet.access import ensure_token, is_loopback, token_path
        from trialfleet.manager.launcher import listen_address

        if not is_loopback(listen_address(self.host)):
            ensure_token(experiment_dir)
            _logger.warning(
                "listening on %s: requests need the access token in %s", self.host, token_path(experiment_dir)
            )
        return startup.spawn(
            experiment_dir,
            self._action,
            port,
            debug=debug,
            url_prefix=self.url_prefix,
            host=self.host,
            public_read=self.public_read,
            sock=sock,
        )

    def _validated_config(self) -> ExperimentConfig:
        from trialfleet.config import ExperimentConfig
        from trialfleet.config_draft import ConfigDraft

        if isinstance(self.config, ConfigDraft):
            return self.config.build()
        if self.config is None:
            raise ValueError("this Experiment has no config; give one to Experiment(...)")
        # attributes may have been changed since it was built: validate again
        return ExperimentConfig.from_json(self.config.to_json(include_secrets=True))

    def stop(self) -> None:
        """Stop the manager this object started (its trials are stopped first)."""
        from trialfleet.manager.launcher import stop_manager

        atexit.unregister(self.stop)
        if self._pid is not None:
            _logger.info("Stopping experiment, please wait...")
        stopped_in_time = (
            self._pid is None or self._experiment_dir is None or stop_manager(self._pid, self._experiment_dir)
        )
        if self._log_follower is not None:  # after the manager: its last lines are copied too
            self._log_follower.close()
            self._log_follower = None
        if not stopped_in_time:
            _logger.warning("the manager of experiment %s (pid %d) did not stop in time", self.id, self._pid)
        elif self._pid is not None:
            _logger.info("Experiment stopped.")
        self._pid = None
        self.port = None

    def run(self, port: int = 8080, wait_completion: bool = True, debug: bool = False) -> bool | None:
        """Start, then (with ``wait_completion``) wait until DONE (True) or ERROR (False)."""
        self.start(port, debug)
        if not wait_completion:
            return None
        try:
            return self._wait_completion()
        except KeyboardInterrupt:
            _logger.warning("KeyboardInterrupt: stopping the experiment")
            self.stop()
            return None

    def _wait_completion(self) -> bool:
        while True:
            status = self.get_status()
            if status in ("DONE", "STOPPED"):
                return True
            if status == "ERROR":
                return False
            time.sleep(_POLL_SECONDS)

    def run_or_resume(
        self, port: int = 8080, wait_completion: bool = True, debug: bool = False
    ) -> bool | None:
        """Resume the experiment with this object's id if it exists, else create and run it."""
        from trialfleet.client import all_experiments

        if self.id and any(ref.id == self.id for ref in all_experiments()):
            self._action = "resume"
        return self.run(port, wait_completion, debug)

    def __enter__(self) -> Experiment:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @classmethod
    def resume(
        cls,
        experiment_id: str,
        port: int = 8080,
        wait_completion: bool = True,
        debug: bool = False,
        *,
        host: str = "127.0.0.1",
        public_read: bool = False,
    ) -> Experiment:
        """Resume a stopped experiment (``trialfleet resume``) and, by default, wait for it to finish."""
        experiment = cls(None, experiment_id)
        experiment.host, experiment.public_read = host, public_read
        experiment._action = "resume"
        experiment.run(port, wait_completion, debug)
        return experiment

    @classmethod
    def view(
        cls,
        experiment_id: str,
        port: int = 8080,
        non_blocking: bool = False,
        *,
        host: str = "127.0.0.1",
        public_read: bool = False,
    ) -> Experiment:
        """Serve a stopped experiment read-only; blocks until Ctrl-C unless ``non_blocking``."""
        experiment = cls(None, experiment_id)
        experiment.host, experiment.public_read = host, public_read
        experiment._action = "view"
        experiment.start(port)
        if non_blocking:
            return experiment
        try:
            while True:
                time.sleep(10)
        except KeyboardInterrupt:
            _logger.warning("KeyboardInterrupt: stopping the viewer")
        finally:
            experiment.stop()
        return experiment

    @classmethod
    def connect(cls, port: int) -> Experiment:
        """Attach to a manager already running on this machine's ``port`` (stop() leaves it running)."""
        from trialfleet.access import read_token
        from trialfleet.client import RestClient, all_experiments

        # the manifest knows the experiment on that port: its directory holds the access token, if any
        ref = next((r for r in all_experiments() if r.running and r.entry.get("port") == port), None)
        url = ref.url if ref is not None else f"http://127.0.0.1:{port}"
        client = RestClient(url, token=read_token(ref.experiment_dir) if ref is not None else None)
        try:
            profile = client.profile()
        finally:
            client.close()
        experiment = cls(None, str(profile["id"]))
        experiment.port = port
        experiment._url = url
        experiment._experiment_dir = ref.experiment_dir if ref is not None else None
        return experiment

    # ---- queries and commands ------------------------------------------------------------------------

    def _client(self) -> ExperimentClient:
        from trialfleet.access import read_token
        from trialfleet.client import RestClient, open_experiment, resolve_experiment

        if self.port is not None:
            prefix = f"/{self.url_prefix.strip('/')}" if self.url_prefix else ""
            token = read_token(self._experiment_dir) if self._experiment_dir is not None else None
            return RestClient(f"{self._url}{prefix}", self.id or "", token=token)
        if not self.id:
            raise ValueError("this Experiment has not been started and has no id")
        return open_experiment(resolve_experiment(self.id))

    def _ask(self, method: str, *args: Any) -> Any:
        client = self._client()
        try:
            return getattr(client, method)(*args)
        finally:
            client.close()

    def get_status(self) -> str:
        return str(self._ask("check_status")["status"])

    def get_trial_job(self, trial_job_id: str) -> TrialJob:
        return TrialJob.from_payload(self._ask("trial_job", trial_job_id))

    def list_trial_jobs(self) -> list[TrialJob]:
        return [TrialJob.from_payload(job) for job in self._ask("trial_jobs")]

    def get_job_statistics(self) -> list[dict[str, Any]]:
        return list(self._ask("job_statistics"))

    def get_job_metrics(self, trial_job_id: str | None = None) -> dict[str, list[TrialMetricData]]:
        metrics: dict[str, list[TrialMetricData]] = {}
        for record in self._ask("metric_data", trial_job_id):
            metrics.setdefault(record["trialJobId"], []).append(TrialMetricData.from_payload(record))
        return metrics

    def get_experiment_profile(self) -> dict[str, Any]:
        return dict(self._ask("profile"))

    def get_experiment_metadata(self, exp_id: str) -> dict[str, Any]:
        return next((m for m in self.get_all_experiments_metadata() if m.get("id") == exp_id), {})

    def get_all_experiments_metadata(self) -> list[dict[str, Any]]:
        from trialfleet.client import all_experiments

        return [dict(ref.entry) for ref in all_experiments()]

    def export_data(self) -> list[TrialResult]:
        return [TrialResult.from_payload(record) for record in self._ask("export_data")]

    def update_trial_concurrency(self, value: int) -> None:
        self._ask("update_profile", "TRIAL_CONCURRENCY", "trialConcurrency", value)

    def update_max_experiment_duration(self, value: str | int) -> None:
        """``value`` like ``'30m'``, ``'2h'`` or a number of seconds."""
        self._ask("update_profile", "MAX_EXEC_DURATION", "maxExperimentDuration", value)

    def update_search_space(self, value: dict[str, Any]) -> None:
        self._ask("update_profile", "SEARCH_SPACE", "searchSpace", value)

    def update_max_trial_number(self, value: int) -> None:
        self._ask("update_profile", "MAX_TRIAL_NUM", "maxTrialNumber", value)

    def kill_trial_job(self, trial_job_id: str) -> None:
        self._ask("cancel_trial", trial_job_id)


class _LogFollower:
    """Copies the manager's log to stderr as it grows (RunMode.Foreground); ``close`` copies what is left."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="manager-log", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _follow(self) -> None:
        while not self._stop.wait(0.5):
            self._copy()
        self._copy()

    def _copy(self) -> None:
        import sys

        try:
            with open(self._path, "rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        sys.stderr.write(chunk.decode("utf-8", errors="replace"))
        sys.stderr.flush()
