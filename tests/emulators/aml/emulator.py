"""The emulator as one object: start it on a free loopback port, point the SDK at it, steer it, stop it."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tests.emulators.container import remove_created_mountpoints

from .arm import ArmRoutes, Urls
from .blob import BlobStore
from .clock import Clock, ManualClock, SystemClock
from .control import ControlRoutes
from .faults import FaultPlan
from .identity import EntraRoutes, ServicePrincipal, TokenIssuer
from .jobs import Job, JobEngine, Timing, run_error
from .launcher import JobLauncher
from .mlflow_api import MlflowRoutes
from .proxy import ConnectProxy
from .runhistory import RunHistoryRoutes, log_prefix
from .server import TlsServer, serve
from .service import RequestPipeline
from .storage import StorageService
from .tls import make_tls_files
from .wire import LoggedRequest, Request, RequestLog, Response, Router
from .workspace import Assets, WorkspaceConfig

STORAGE_SUFFIX = "core.aml-emulator.test"  # under .test (RFC 2606): never resolvable, so never sent elsewhere


class AmlEmulator:
    """An Azure ML workspace (ARM + run history + MLflow + blob storage + Entra ID) on ``https://127.0.0.1:<port>``."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        config: WorkspaceConfig | None = None,
        timing: Timing | None = None,
        clock: Clock | None = None,
        port: int = 0,
        token_lifetime: float = 3600.0,
    ) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="aml-emulator-")) if root is None else root
        self.config = config or WorkspaceConfig()
        self.timing = timing or Timing()
        self.clock = clock or SystemClock()
        self.requested_port = port
        self.principal = ServicePrincipal(str(uuid.uuid4()), str(uuid.uuid4()), secrets.token_urlsafe(24))
        self.issuer = TokenIssuer(self.clock, self.principal, token_lifetime)
        self.faults = FaultPlan()
        self.request_log = RequestLog()
        self.fail_images: set[str] = set()
        self.not_found_after_create = 0
        self.cloud_name = (
            f"TrialfleetAmlEmulator-{uuid.uuid4().hex[:8]}"  # the SDK registers a cloud name once per process
        )
        self._server: TlsServer | None = None
        self._proxy: ConnectProxy | None = None
        self._lock = threading.Lock()
        self._opened: list[Any] = []  # the clients' HTTP sessions and credentials, closed by stop()

    # lifecycle

    def start(self) -> AmlEmulator:
        tls = make_tls_files(self.root / "tls", [f"*.blob.{STORAGE_SUFFIX}"])
        self.ca_bundle = tls.ca_bundle
        router = Router()
        server, _ = serve("127.0.0.1", self.requested_port, tls.server_context(), self._dispatch)
        self._server = server
        self.port = server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._build(router)
        self.engine.start()
        self._proxy = ConnectProxy(self.port, STORAGE_SUFFIX)
        self._proxy.start()
        return self

    def _build(self, router: Router) -> None:
        c = self.config
        self.store = BlobStore(self.root / "storage", c.storage_account, self.clock)
        self.storage = StorageService(
            self.store, STORAGE_SUFFIX, {c.blobstore_container, c.artifact_container}, self.url
        )
        self.assets = Assets()
        self.launcher = JobLauncher(
            c,
            self.assets,
            self.storage,
            self.issuer,
            self.root,
            self.url,
            self.ca_bundle,
            self.aml_resource_id,
        )
        self.engine = JobEngine(
            self.clock, self.timing, self.launcher.launch, self._preparation_failure, c.location
        )
        self.arm = ArmRoutes(
            c,
            self.assets,
            self.engine,
            self.storage,
            Urls(self.url),
            self.clock,
            lambda: self.not_found_after_create,
        )
        self.mlflow = MlflowRoutes(
            c,
            self.engine,
            lambda name: f"azureml://datastores/workspaceartifactstore/paths/{log_prefix(name)}/",
        )
        self.history = RunHistoryRoutes(c, self.engine, self.storage, self.clock, self.url)
        for routes in (self.arm, self.mlflow, self.history, EntraRoutes(self.issuer, self.url)):
            routes.register(router)
        self._pipeline = RequestPipeline(
            router, self.storage, self.issuer, self.faults, self.request_log, ControlRoutes(self), c.arm_id
        )

    def _dispatch(self, request: Request) -> Response:
        return self._pipeline(request)

    def stop(self) -> None:
        while self._opened:
            self._opened.pop().close()
        if self._server is not None:
            self.engine.close()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._proxy is not None:
            self._proxy.shutdown()
            self._proxy.server_close()
            self._proxy = None
        remove_created_mountpoints()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> AmlEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # how clients reach it

    @property
    def aml_resource_id(self) -> str:
        return f"{self.url}/aml"

    @property
    def authority(self) -> str:
        return self.url

    @property
    def proxy_url(self) -> str:
        assert self._proxy is not None, "the emulator is not running"
        return self._proxy.url

    @property
    def mlflow_tracking_uri(self) -> str:
        """The https form of the workspace's ``azureml://`` tracking URI (what the azureml-mlflow plugin derives)."""
        return f"{self.url}/mlflow/v1.0{self.config.arm_id}"

    @property
    def cloud_metadata(self) -> dict[str, str]:
        return {
            "azure_portal": f"{self.url}/portal/",
            "resource_manager": f"{self.url}/",
            "active_directory": f"{self.url}/",
            "aml_resource_id": f"{self.aml_resource_id}/",
            "storage_endpoint": STORAGE_SUFFIX,
            "registry_discovery_endpoint": f"{self.url}/",
        }

    def client_env(self) -> dict[str, str]:
        """Environment variables for a client process: trust the CA, reach storage names through the proxy,
        and (for ``EnvironmentCredential``) the service principal."""
        return {
            "REQUESTS_CA_BUNDLE": str(self.ca_bundle),
            "SSL_CERT_FILE": str(self.ca_bundle),
            "HTTPS_PROXY": self.proxy_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "AZURE_TENANT_ID": self.principal.tenant_id,
            "AZURE_CLIENT_ID": self.principal.client_id,
            "AZURE_CLIENT_SECRET": self.principal.client_secret,
            "AZURE_AUTHORITY_HOST": self.authority,
        }

    def credential(self, **kwargs: Any) -> Any:
        """A real ``azure.identity.ClientSecretCredential`` that gets its tokens from the emulator's Entra ID."""
        from azure.identity import ClientSecretCredential

        credential = ClientSecretCredential(
            self.principal.tenant_id,
            self.principal.client_id,
            self.principal.client_secret,
            authority=self.authority,
            disable_instance_discovery=True,
            **kwargs,
        )
        self._opened.append(credential)
        return credential

    def ml_client(self, credential: Any = None, **kwargs: Any) -> Any:
        """``MLClient`` for the emulated workspace (the process must trust ``ca_bundle``: see :meth:`client_env`)."""
        import requests
        from azure.ai.ml import MLClient
        from azure.core.pipeline.transport import RequestsTransport

        session = requests.Session()  # shared by the client's service clients; stop() closes it
        self._opened.append(session)
        c = self.config
        return MLClient(
            credential or self.credential(),
            c.subscription_id,
            c.resource_group,
            c.workspace_name,
            cloud=self.cloud_name,
            cloud_metadata=self.cloud_metadata,
            transport=RequestsTransport(session=session, session_owner=False),
            **kwargs,
        )

    # steering

    def requests(self) -> list[LoggedRequest]:
        return self.request_log.entries()

    def revoke_tokens(self) -> None:
        self.issuer.revoke_all()

    def advance_clock(self, seconds: float) -> float:
        if not isinstance(self.clock, ManualClock):
            raise TypeError(
                "the emulator runs on the wall clock; start it with clock=ManualClock() to advance time"
            )
        now = self.clock.advance(seconds)
        self.engine.step_all()
        return now

    def configure(self, **settings: Any) -> None:
        """Change delays and knobs at run time (names as in ``/_emu/settings``)."""
        names = {
            "stateDelay": "state_delay",
            "requireSeen": "require_seen",
            "provisioning": "provisioning",
            "cancelGrace": "cancel_grace",
            "queueLatency": "queue_latency",  # the scheduling-latency knob: seconds every job stays Queued
        }
        timing = {names[k]: v for k, v in settings.items() if k in names}
        if timing:
            self.timing = replace(self.timing, **timing)
            self.engine.timing = self.timing
        if "notFoundAfterCreate" in settings:
            self.not_found_after_create = int(settings["notFoundAfterCreate"])
        if "retryAfter" in settings:
            self.arm.retry_after = int(settings["retryAfter"])
        if "failImages" in settings:
            self.fail_images = set(settings["failImages"])
        if "holdStates" in settings:
            self.engine.held_states = set(settings["holdStates"])
        if "tokenLifetime" in settings:
            self.issuer.lifetime = float(settings["tokenLifetime"])

    def job(self, name: str) -> Job:
        with self.engine.lock:
            return self.engine.jobs[name]

    def hold(self, name: str, state: str | None) -> None:
        with self.engine.lock:
            self.engine.jobs[name].hold = state

    def force_status(
        self, name: str, status: str, *, code: str | None = None, message: str | None = None
    ) -> None:
        """Fault knobs: ``NotResponding`` (node lost: the process is killed), ``Paused``, or any other status."""
        job = self.job(name)
        error = (
            run_error(
                code or "SystemError",
                message or f"The job was moved to {status} by a fault knob.",
                self.config.location,
                self.clock.now(),
            )
            if status in ("Failed", "NotResponding")
            else None
        )
        self.engine.force(job, status, error)

    def metrics(self, name: str) -> list[dict[str, Any]]:
        return self.mlflow.metrics(name)

    def job_states(self) -> list[dict[str, Any]]:
        with self.engine.lock:
            jobs = list(self.engine.jobs.values())
            return [
                {
                    "name": j.name,
                    "status": j.status,
                    "history": [s for s, _ in j.history],
                    "exitCode": j.exit_code,
                    "error": j.error,
                    "pid": j.container.pid if j.container else None,
                    "hold": j.hold,
                    "workingDir": str(self.root / "jobs" / j.name / "wd"),
                }
                for j in jobs
            ]

    def info(self) -> dict[str, Any]:
        c = self.config
        return {
            "url": self.url,
            "subscriptionId": c.subscription_id,
            "resourceGroup": c.resource_group,
            "workspaceName": c.workspace_name,
            "computes": list(c.computes),
            "location": c.location,
            "tenantId": self.principal.tenant_id,
            "clientId": self.principal.client_id,
            "clientSecret": self.principal.client_secret,
            "authority": self.authority,
            "caBundle": str(self.ca_bundle),
            "cloudName": self.cloud_name,
            "cloudMetadata": self.cloud_metadata,
            "mlflowTrackingUri": self.mlflow_tracking_uri,
            "proxy": self.proxy_url,
            "env": self.client_env(),
            "storageRoot": str(self.root / "storage"),
            "settings": {
                **asdict(self.timing),
                "notFoundAfterCreate": self.not_found_after_create,
                "retryAfter": self.arm.retry_after,
                "failImages": sorted(self.fail_images),
                "holdStates": sorted(self.engine.held_states),
            },
        }

    def _preparation_failure(self, job: Job) -> tuple[str, str] | None:
        environment = str(job.properties.get("environmentId", ""))
        parts = environment.rstrip("/").split("/")
        asset = self.assets.get("environments", parts[-3], parts[-1]) if len(parts) >= 4 else None
        image = asset.properties.get("image") if asset else None
        if image in self.fail_images:
            return (
                "UserError",
                f"Failed to pull Docker image {image}: manifest unknown. Check the image name and that the compute can reach its registry.",
            )
        return None
