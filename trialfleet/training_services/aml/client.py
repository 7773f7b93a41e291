"""Azure ML through its maintained SDK v2 (``azure-ai-ml``), and the workspace's MLflow and run history over REST.

The SDK is synchronous: the service calls these methods in worker threads. Everything Azure is imported here,
when the platform starts, so ``trialfleet[aml]`` is needed only by its users. The SDK reaches the cloud the
config names (``cloud`` / ``cloud_metadata``) and honours ``REQUESTS_CA_BUNDLE`` and the proxy variables; the
REST calls here go through ``requests``, which honours the same. Errors become :class:`PlatformError` naming the
workspace and Azure's own message; :class:`AmlUnavailable` is one worth retrying (throttling, 5xx, network).
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.extras import install_hint
from trialfleet.training_services.aml.config import AmlConfig
from trialfleet.training_services.aml.status import AmlJob

log = logging.getLogger(__name__)

TIMEOUT = 60.0
#: the audience of Azure ML's data plane (MLflow, run history) in the clouds the SDK knows by name
AML_RESOURCE_IDS = {
    "AzureCloud": "https://ml.azure.com/",
    "AzureChinaCloud": "https://ml.azure.cn/",
    "AzureUSGovernment": "https://ml.azure.us/",
}


#: azure-ai-ml logs "Class …Schema: This is an experimental class" for schema classes it builds at import time
#: (six lines on every start, about the SDK's insides, not anything a config asked for)
SDK_EXPERIMENTAL_LOGGER = "azure.ai.ml._utils._experimental"
_stderr_lock = threading.Lock()


@contextlib.contextmanager
def _sdk_prints_logged(what: str) -> Iterator[None]:
    """What the SDK prints to stderr meanwhile goes to the log: its blob upload ends with a bare colour reset
    (``print(Fore.RESET + "\\n", file=sys.stderr)``) whatever ``show_progress`` says."""
    printed = io.StringIO()
    with _stderr_lock, contextlib.redirect_stderr(printed):
        try:
            yield
        finally:
            if text := printed.getvalue().strip():
                log.debug("the Azure ML SDK printed while asked to %s: %r", what, text)


class AmlUnavailable(PlatformError):
    """Azure did not answer, throttled or failed (5xx): nothing is known to have happened; retried later."""


def _azure_error(where: str, what: str, exc: Exception) -> PlatformError:
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ServiceRequestError

    message = getattr(exc, "message", None) or str(exc)
    text = f"aml: {where}: cannot {what}: {message.strip()[:1000]}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, ServiceRequestError) or (
        isinstance(exc, HttpResponseError)
        and not isinstance(exc, ClientAuthenticationError)
        and (status is None or status >= 500 or status == 429)
    ):
        return AmlUnavailable(text)
    return PlatformError(text)


class AmlClient:
    """One workspace: ``MLClient`` with azure-identity's default chain, plus MLflow and run history reads."""

    def __init__(self, config: AmlConfig) -> None:
        logging.getLogger(SDK_EXPERIMENTAL_LOGGER).setLevel(logging.ERROR)
        try:
            from azure.ai.ml import MLClient
            from azure.identity import DefaultAzureCredential
        except ImportError as exc:
            raise PlatformError(
                f"aml: the Azure ML SDK is not installed ({exc}): {install_hint('aml')}"
            ) from exc
        self.config = config
        self.snapshot_uploaded = False
        self.where = f"workspace {config.workspace_name} (subscription {config.subscription_id}, "
        self.where += f"resource group {config.resource_group})"
        metadata = dict(config.cloud_metadata or {})
        options: dict[str, Any] = {}
        if metadata.get("active_directory"):
            options["authority"] = str(metadata["active_directory"])
        if config.disable_instance_discovery:
            options["disable_instance_discovery"] = True
        self.credential = DefaultAzureCredential(**options)
        cloud: dict[str, Any] = {}
        if config.cloud is not None:
            cloud["cloud"] = config.cloud
        if metadata:
            cloud["cloud_metadata"] = metadata
        import requests
        from azure.core.pipeline.transport import RequestsTransport

        # the SDK's service clients share one HTTP session, which close() ends (its own would linger)
        self._sdk_session = requests.Session()
        self.ml = MLClient(
            self.credential,
            config.subscription_id,
            config.resource_group,
            config.workspace_name,
            show_progress=False,
            transport=RequestsTransport(session=self._sdk_session, session_owner=False),
            **cloud,
        )
        self.audience = str(
            metadata.get("aml_resource_id") or AML_RESOURCE_IDS.get(config.cloud or "AzureCloud", "")
        )
        self.tracking_uri = ""
        self.discovery_url = ""
        self.http = requests.Session()
        self._token: Any = None
        self._experiments: dict[str, str] = {}  # Azure ML experiment name → its MLflow id

    def close(self) -> None:
        """End the HTTP sessions and the credential's (their connections would stay open until collected)."""
        self._sdk_session.close()
        self.http.close()
        self.credential.close()

    def call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, its Azure errors as PlatformErrors."""
        from azure.core.exceptions import AzureError

        try:
            return function(*args, **kwargs)
        except AzureError as exc:
            raise _azure_error(self.where, what, exc) from exc

    # ---- the workspace ------------------------------------------------------------------------------

    def check(self) -> None:
        """The workspace and its compute target exist and answer; where its MLflow lives."""
        workspace = self.call("read the workspace", self.ml.workspaces.get, self.config.workspace_name)
        self.tracking_uri = _https(str(workspace.mlflow_tracking_uri or ""))
        self.discovery_url = str(workspace.discovery_url or "")
        self.call(
            f"read compute target {self.config.compute_target!r}",
            self.ml.compute.get,
            self.config.compute_target,
        )

    # ---- jobs ----------------------------------------------------------------------------------------

    def job(self, name: str) -> AmlJob | None:
        """The job's status; None when the workspace has no job of that name."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            job = self.call(f"read job {name}", self.ml.jobs.get, name)
        except PlatformError as exc:
            if isinstance(exc.__cause__, ResourceNotFoundError):
                return None
            raise
        status = job.status
        return AmlJob(name, str(getattr(status, "value", status)))

    def submit(self, job: Any) -> None:
        what = f"submit job {job.name}"
        if self.snapshot_uploaded:  # the SDK finds the snapshot by its hash and uploads nothing more
            self.call(what, self.ml.jobs.create_or_update, job)
            return
        with _sdk_prints_logged(what):
            self.call(what, self.ml.jobs.create_or_update, job)
        self.snapshot_uploaded = True

    def cancel(self, name: str) -> None:
        """Ask Azure ML to cancel the job (a long-running operation its poller follows in the background)."""
        self.call(f"cancel job {name}", self.ml.jobs.begin_cancel, name)

    # ---- MLflow and run history (REST) ----------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        if self._token is None or self._token.expires_on - time.time() < 300:
            scope = self.audience.rstrip("/") + "/.default"
            self._token = self.call("get a token for Azure ML", self.credential.get_token, scope)
        return {"Authorization": f"Bearer {self._token.token}"}

    def _get(self, url: str, what: str, params: Mapping[str, str] | None = None, auth: bool = True) -> Any:
        import requests

        try:
            response = self.http.get(
                url, params=params, headers=self._headers() if auth else {}, timeout=TIMEOUT
            )
        except requests.RequestException as exc:
            raise AmlUnavailable(f"aml: {self.where}: cannot {what}: {exc}") from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise AmlUnavailable(
                f"aml: {self.where}: cannot {what}: HTTP {response.status_code} {response.text[:300]}"
            )
        if response.status_code != 200:
            raise PlatformError(
                f"aml: {self.where}: cannot {what}: HTTP {response.status_code} {response.text[:300]}"
            )
        return response

    def run_tags(self, name: str) -> dict[str, str] | None:
        """The tags of the job's MLflow run (the forwarder's shipments); None before the run exists."""
        what = f"read the MLflow run of job {name}"
        try:
            response = self._get(f"{self.tracking_uri}/api/2.0/mlflow/runs/get", what, {"run_id": name})
        except PlatformError as exc:
            if "RESOURCE_DOES_NOT_EXIST" in str(exc):
                return None
            raise
        tags = response.json().get("run", {}).get("data", {}).get("tags") or []
        return {str(tag["key"]): str(tag["value"]) for tag in tags if "key" in tag}

    def set_tag(self, name: str, key: str, value: str, what: str = "") -> None:
        """Set one tag of a run (MLflow's ``runs/set-tag``): the manager's acknowledgement to a forwarder, a
        reuse-mode worker's mailbox."""
        what = what or f"acknowledge what the MLflow run of job {name} shipped"
        self._post("runs/set-tag", {"run_id": name, "key": key, "value": value}, what)

    def create_run(self, experiment: str, run_name: str, tags: Mapping[str, str]) -> str:
        """A new MLflow run of Azure ML's experiment ``experiment`` (MLflow's ``experiments/get-by-name``, then
        ``runs/create``, as ``MlflowClient.create_run``); its run id."""
        what = f"create an MLflow run in experiment {experiment!r}"
        body = {
            "experiment_id": self.experiment_id(experiment, what),
            "run_name": run_name,
            "start_time": int(time.time() * 1000),
            "tags": [{"key": key, "value": value} for key, value in tags.items()],
        }
        return str(self._post("runs/create", body, what)["run"]["info"]["run_id"])

    def experiment_id(self, experiment: str, what: str) -> str:
        """The MLflow id of Azure ML's experiment ``experiment``, made (``experiments/create``) if it has no job
        yet: Azure ML makes it with the first job otherwise."""
        if experiment in self._experiments:
            return self._experiments[experiment]
        url = f"{self.tracking_uri}/api/2.0/mlflow/experiments/get-by-name"
        try:
            found = self._get(url, what, {"experiment_name": experiment}).json()
            self._experiments[experiment] = str(found["experiment"]["experiment_id"])
        except PlatformError as exc:
            if "RESOURCE_DOES_NOT_EXIST" not in str(exc):
                raise
            try:
                made = self._post("experiments/create", {"name": experiment}, what)
            except PlatformError as again:
                if "RESOURCE_ALREADY_EXISTS" not in str(again):
                    raise
                return self.experiment_id(experiment, what)  # made meanwhile (by a job)
            self._experiments[experiment] = str(made["experiment_id"])
        return self._experiments[experiment]

    def _post(self, path: str, body: Mapping[str, Any], what: str) -> Any:
        import requests

        try:
            response = self.http.post(
                f"{self.tracking_uri}/api/2.0/mlflow/{path}",
                json=body,
                headers=self._headers(),
                timeout=TIMEOUT,
            )
        except requests.RequestException as exc:
            raise AmlUnavailable(f"aml: {self.where}: cannot {what}: {exc}") from exc
        if response.status_code != 200:
            error = (
                AmlUnavailable
                if response.status_code >= 500 or response.status_code == 429
                else PlatformError
            )
            raise error(
                f"aml: {self.where}: cannot {what}: HTTP {response.status_code} {response.text[:300]}"
            )
        return response.json()

    def log_file(self, name: str, log_name: str) -> bytes:
        """One of the run's log files (``user_logs/std_log.txt`` …), through run history's ``logFiles``."""
        what = f"read the logs of job {name}"
        services = self._get(self.discovery_url, "read the workspace's discovery document", auth=False).json()
        c = self.config
        scope = (
            f"/subscriptions/{c.subscription_id}/resourceGroups/{c.resource_group}"
            f"/providers/Microsoft.MachineLearningServices/workspaces/{c.workspace_name}"
        )
        url = f"{str(services['history']).rstrip('/')}/history/v1.0{scope}/runs/{name}/details"
        files = self._get(url, what).json().get("logFiles") or {}
        if log_name not in files:
            raise FileNotFoundError(f"job {name} has no log file {log_name!r} (it has {sorted(files)})")
        return bytes(self._get(files[log_name], what, auth=False).content)


def _https(uri: str) -> str:
    """The https form of an ``azureml://`` tracking URI, as the azureml-mlflow plugin derives it."""
    return "https://" + uri[len("azureml://") :] if uri.startswith("azureml://") else uri
