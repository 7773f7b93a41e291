"""Reaching an experiment from outside its manager: the one place the CLI and the Python API get data from.

A running experiment is reached over its REST API (:class:`RestClient`); a stopped one is read straight from
its database (:class:`StoreClient`, read-only). Both return NNI's payload shapes, so callers never care which.
Experiments are found through the manifest with nnictl's rules (:func:`resolve_experiment`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trialfleet.errors import (
    ExperimentNotFoundError,
    ExperimentStateError,
    ManagerUnreachableError,
    TrialfleetError,
)
from trialfleet.storage import manifest

REST_TIMEOUT = 20.0  # nnictl's


@dataclass(frozen=True)
class ExperimentRef:
    """One manifest entry, as ``manifest.entries()`` shows it (dead managers: STOPPED, no port)."""

    id: str
    entry: Mapping[str, Any]

    @property
    def running(self) -> bool:
        return bool(self.entry.get("port")) and manifest.manager_alive(dict(self.entry))

    @property
    def status(self) -> str:
        return str(self.entry.get("status", "UNKNOWN"))

    @property
    def experiment_dir(self) -> Path:
        directory = self.entry.get("experimentDir") or self.entry.get("logDir")
        if not directory:
            raise ExperimentNotFoundError(f"the manifest entry of experiment {self.id} has no directory")
        return Path(directory)

    @property
    def url(self) -> str:
        """The manager's base URL (with its url prefix, without ``/api/v1/nni``)."""
        urls = self.entry.get("webuiUrl") or []
        base = str(urls[0]) if urls else f"http://127.0.0.1:{self.entry.get('port')}"
        base = base.replace("://0.0.0.0:", "://127.0.0.1:")
        prefix = str(self.entry.get("prefixUrl") or "").strip("/")
        return f"{base.rstrip('/')}/{prefix}" if prefix else base.rstrip("/")


# ---- finding experiments (nnictl's rules) -----------------------------------------------------------


def all_experiments() -> list[ExperimentRef]:
    entries = manifest.entries()
    refs = [ExperimentRef(key, entry) for key, entry in entries.items()]
    return sorted(refs, key=lambda r: r.entry.get("startTime") or 0)


def _listing(refs: list[ExperimentRef]) -> str:
    return "\n".join(f"  {r.id}  {r.status}  {r.entry.get('experimentName') or ''}".rstrip() for r in refs)


def match_experiments(pattern: str, refs: list[ExperimentRef]) -> list[ExperimentRef]:
    """Exact id, else ``*`` wildcard, else id prefix (nnictl)."""
    exact = [r for r in refs if r.id == pattern]
    if exact:
        return exact
    if "*" in pattern:
        return [r for r in refs if fnmatch.fnmatchcase(r.id, pattern)]
    return [r for r in refs if r.id.startswith(pattern)]


def resolve_experiment(experiment_id: str | None) -> ExperimentRef:
    """One experiment: the given id (exact or unambiguous prefix), or the single running one."""
    refs = all_experiments()
    if not experiment_id:
        running = [r for r in refs if r.running]
        if len(running) == 1:
            return running[0]
        if not running:
            raise ExperimentNotFoundError(
                "there is no experiment running; give an experiment id (see `trialfleet experiment list --all`)"
            )
        raise ExperimentNotFoundError(
            f"there are {len(running)} experiments running; give one of their ids:\n{_listing(running)}"
        )
    matches = match_experiments(experiment_id, refs)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ExperimentNotFoundError(
            f"no experiment matches {experiment_id!r} (see `trialfleet experiment list --all`)"
        )
    raise ExperimentNotFoundError(
        f"{experiment_id!r} matches {len(matches)} experiments:\n{_listing(matches)}"
    )


def resolve_running(
    experiment_id: str | None, *, every: bool = False, port: int | None = None
) -> list[ExperimentRef]:
    """The running experiments ``stop`` acts on: ``--all``, ``--port``, a ``*`` pattern, an id or the only one."""
    if experiment_id == "all":
        raise ExperimentNotFoundError("'all' is not an experiment id; use --all to stop every experiment")
    running = [r for r in all_experiments() if r.running]
    if every:
        return running
    if port is not None:
        chosen = [r for r in running if r.entry.get("port") == port]
        if experiment_id:
            chosen = [r for r in chosen if r in match_experiments(experiment_id, chosen)]
        if not chosen:
            wanted = f"{experiment_id} " if experiment_id else ""
            raise ExperimentNotFoundError(f"no running experiment {wanted}on port {port}")
        return chosen
    if experiment_id and "*" in experiment_id:
        chosen = match_experiments(experiment_id, running)
        if not chosen:
            raise ExperimentNotFoundError(f"no running experiment matches {experiment_id!r}")
        return chosen
    ref = resolve_experiment(experiment_id)
    if not ref.running:
        raise ExperimentStateError(f"experiment {ref.id} is not running (status {ref.status})")
    return [ref]


# ---- talking to one experiment ---------------------------------------------------------------------


class ExperimentClient(Protocol):
    experiment_id: str

    def profile(self) -> dict[str, Any]: ...
    def check_status(self) -> dict[str, Any]: ...
    def trial_jobs(self, status: str | None = None) -> list[dict[str, Any]]: ...
    def trial_page(
        self, limit: int, sort: str, descending: bool, status: str | None = None
    ) -> list[dict[str, Any]]: ...
    def trial_job(self, trial_id: str) -> dict[str, Any]: ...
    def metric_data(self, trial_id: str | None = None, type: str | None = None) -> list[dict[str, Any]]: ...
    def job_statistics(self) -> list[dict[str, Any]]: ...
    def export_data(self) -> list[dict[str, Any]]: ...
    def imported_data(self) -> list[str]: ...
    def trial_file(self, trial_id: str, name: str) -> bytes: ...
    def update_profile(self, update_type: str, key: str, value: Any) -> None: ...
    def add_trial(self, parameters: dict[str, Any]) -> int: ...
    def cancel_trial(self, trial_id: str) -> None: ...
    def import_data(self, records: list[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...


def open_experiment(ref: ExperimentRef) -> ExperimentClient:
    """REST for a running experiment, its database otherwise."""
    if ref.running:
        return rest_client(ref)
    return StoreClient(ref)


def rest_client(ref: ExperimentRef) -> RestClient:
    """The running experiment's REST API, with its access token when it has one (read from its directory)."""
    from trialfleet.access import read_token

    return RestClient(ref.url, ref.id, token=read_token(ref.experiment_dir))


class RestClient:
    """NNI's REST API of one manager. Errors become TrialfleetErrors carrying the server's message.

    ``token``: the experiment's access token, sent as ``Authorization: Bearer`` (a manager listening
    beyond loopback asks for it; one on loopback ignores it)."""

    def __init__(
        self, url: str, experiment_id: str = "", timeout: float = REST_TIMEOUT, token: str | None = None
    ) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.experiment_id = experiment_id
        headers = {"Authorization": f"Bearer {token}"} if token else None
        # a plain-HTTP manager never uses TLS: loading the CA bundle for it took a tenth of `trial ls`
        self._http = httpx.Client(
            base_url=f"{self.url}/api/v1/nni",
            timeout=timeout,
            trust_env=False,
            headers=headers,
            verify=not self.url.startswith("http://"),
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ManagerUnreachableError(
                f"cannot reach the manager of experiment {self.experiment_id or '?'} at {self.url}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise _error_for(response.status_code, _error_message(response), method, path)
        if not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.content

    # reads
    def profile(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/experiment")
        if not self.experiment_id:
            self.experiment_id = str(result.get("id", ""))
        return result

    def check_status(self) -> dict[str, Any]:
        return dict(self._call("GET", "/check-status"))

    def trial_jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("GET", "/trial-jobs", params={"status": status} if status else None))

    def trial_page(
        self, limit: int, sort: str, descending: bool, status: str | None = None
    ) -> list[dict[str, Any]]:
        """The first ``limit`` TrialJobInfos (of ``status``) by ``sort`` (a key of ``/trial-jobs?sort=``), missing
        values last."""
        params = {"offset": 0, "limit": limit, "sort": sort, "order": "desc" if descending else "asc"}
        return list(
            self._call("GET", "/trial-jobs", params={**params, **({"status": status} if status else {})})
        )

    def trial_job(self, trial_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/trial-jobs/{trial_id}"))

    def metric_data(self, trial_id: str | None = None, type: str | None = None) -> list[dict[str, Any]]:
        path = f"/metric-data/{trial_id}" if trial_id else "/metric-data"
        return list(self._call("GET", path, params={"type": type} if type else None))

    def job_statistics(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/job-statistics"))

    def export_data(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/export-data"))

    def imported_data(self) -> list[str]:
        return list(self._call("GET", "/experiment/imported-data"))

    def experiments_info(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/experiments-info"))

    def trial_file(self, trial_id: str, name: str) -> bytes:
        content = self._call("GET", f"/trial-file/{trial_id}/{name}")
        return content if isinstance(content, bytes) else b""

    # commands
    def update_profile(self, update_type: str, key: str, value: Any) -> None:
        """NNI's protocol: GET the profile, edit one key of ``params``, PUT it back."""
        profile = self.profile()
        profile["params"][key] = value
        self._call("PUT", "/experiment", params={"update_type": update_type}, json=profile)

    def add_trial(self, parameters: dict[str, Any]) -> int:
        return int(self._call("POST", "/trial-jobs", json=parameters)["sequenceId"])

    def cancel_trial(self, trial_id: str) -> None:
        self._call("DELETE", f"/trial-jobs/{trial_id}")

    def import_data(self, records: list[dict[str, Any]]) -> None:
        self._call("POST", "/experiment/import-data", json=records)

    def stop(self) -> None:
        self._call("DELETE", "/experiment")

    def tensorboard_start(self, trial_ids: list[str], port: int | None = None) -> dict[str, Any]:
        return dict(self._call("POST", "/tensorboard", json={"trials": ",".join(trial_ids), "port": port}))

    def tensorboard_stop_all(self) -> list[dict[str, Any]]:
        return list(self._call("DELETE", "/tensorboard-tasks"))


def _error_message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return str(response.text or response.reason_phrase)
    return str(body.get("error", body)) if isinstance(body, dict) else str(body)


def _error_for(status: int, message: str, method: str, path: str) -> TrialfleetError:
    if status in (403, 409):
        return ExperimentStateError(message)
    if status == 401:
        return TrialfleetError(
            f"{method} {path} was refused (401): {message}. The CLI and the Python API send the token of "
            "<experiment dir>/access-token when they can read it"
        )
    return TrialfleetError(f"{method} {path} failed ({status}): {message}")


class StoreClient:
    """A stopped experiment, read from its database (read-only); commands are refused."""

    def __init__(self, ref: ExperimentRef) -> None:
        from trialfleet.nni_view.reader import ExperimentReader
        from trialfleet.storage import ExperimentStore

        self.experiment_id = ref.id
        self._ref = ref
        store = ExperimentStore.for_experiment_dir(ref.experiment_dir, readonly=True)
        self._reader = ExperimentReader(store, ref.experiment_dir)

    def close(self) -> None:
        self._reader.store.close()

    def profile(self) -> dict[str, Any]:
        from trialfleet.config import ExperimentConfig

        row = self._reader.store.experiment()
        params = ExperimentConfig.from_json(row.config, check_paths=False).to_json()
        return self._reader.profile(params)

    def check_status(self) -> dict[str, Any]:
        error = self._reader.store.experiment().error
        return {
            "status": self._ref.status,
            "errors": [error] if self._ref.status == "ERROR" and error else [],
        }

    def trial_jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        from trialfleet.status import TrialStatus

        return self._reader.trial_jobs(TrialStatus(status) if status else None)

    def trial_page(
        self, limit: int, sort: str, descending: bool, status: str | None = None
    ) -> list[dict[str, Any]]:
        from trialfleet.status import TrialStatus

        selected = TrialStatus(status) if status else None
        return self._reader.trial_jobs(selected, limit=limit, sort=sort, descending=descending)

    def trial_job(self, trial_id: str) -> dict[str, Any]:
        job = self._reader.trial_job(trial_id)
        if job is None:
            raise TrialfleetError(f"no trial {trial_id} in experiment {self.experiment_id}")
        return job

    def metric_data(self, trial_id: str | None = None, type: str | None = None) -> list[dict[str, Any]]:
        return self._reader.metric_data(trial_id, type=type)

    def job_statistics(self) -> list[dict[str, Any]]:
        return self._reader.job_statistics()

    def export_data(self) -> list[dict[str, Any]]:
        return self._reader.export_data()

    def imported_data(self) -> list[str]:
        return self._reader.imported_data()

    def trial_file(self, trial_id: str, name: str) -> bytes:
        row = self._reader.store.find_trial(trial_id)
        if row is None:
            raise TrialfleetError(f"no trial {trial_id} in experiment {self.experiment_id}")
        try:
            return self._reader.read_trial_file(row, name)
        except FileNotFoundError as exc:
            raise TrialfleetError(str(exc)) from exc

    def _refuse(self) -> ExperimentStateError:
        return ExperimentStateError(
            f"experiment {self.experiment_id} is not running (status {self._ref.status}); "
            f"resume it first: trialfleet resume {self.experiment_id}"
        )

    def update_profile(self, update_type: str, key: str, value: Any) -> None:
        raise self._refuse()

    def add_trial(self, parameters: dict[str, Any]) -> int:
        raise self._refuse()

    def cancel_trial(self, trial_id: str) -> None:
        raise self._refuse()

    def import_data(self, records: list[dict[str, Any]]) -> None:
        raise self._refuse()
