"""Starts a job's command as a :class:`~tests.emulators.container.Container`, the way AML's common runtime does.

What the container sees:

- the uploaded code snapshot, copied per job to ``<root>/jobs/<name>/wd`` and bind-mounted at
  ``/mnt/azureml/cr/j/<job hex>/exe/wd``, its working directory (``AZUREML_CR_EXECUTION_WORKING_DIR_PATH``);
- each named output at ``/mnt/azureml/cr/j/<job hex>/cap/data-capability/wd/<output>`` (``<root>/jobs/<name>/outputs``);
- ``${{inputs.x}}`` and ``${{outputs.x}}`` substituted into the command, run by ``bash -c``;
- the job's ``environmentVariables``, then AML's variables (``AZUREML_*``, ``MLFLOW_*``) on top;
- ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE`` set to the emulator's CA, which a real job does not need (Azure's
  certificates are publicly trusted) but a job here does, to reach MLflow over HTTPS.

stdout and stderr go, merged, to ``user_logs/std_log.txt`` in the artifact container, readable while the job runs.
"""

from __future__ import annotations

import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.emulators.container import Container, Mount, container_env

from .identity import TokenIssuer
from .jobs import Job
from .runhistory import USER_LOG, log_prefix
from .storage import StorageService
from .workspace import Assets, WorkspaceConfig, experiment_id

PLACEHOLDER = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_]+)\s*\}\}")


@dataclass
class JobLauncher:
    config: WorkspaceConfig
    assets: Assets
    storage: StorageService
    issuer: TokenIssuer
    root: Path
    base_url: str
    ca_bundle: Path
    aml_audience: str

    def container_root(self, job: Job) -> str:
        return f"/mnt/azureml/cr/j/{uuid.uuid5(uuid.NAMESPACE_URL, job.name).hex}"

    def launch(self, job: Job) -> Container:
        job_dir = self.root / "jobs" / job.name
        working = job_dir / "wd"
        working.mkdir(parents=True, exist_ok=True)
        self._copy_snapshot(job, working)
        container_root = self.container_root(job)
        mounts = [Mount(working, f"{container_root}/exe/wd")]
        outputs: dict[str, str] = {}
        for name in job.properties.get("outputs") or {}:
            host = job_dir / "outputs" / name
            host.mkdir(parents=True, exist_ok=True)
            outputs[name] = f"{container_root}/cap/data-capability/wd/{name}"
            mounts.append(Mount(host, outputs[name]))
        command = _substitute(str(job.properties["command"]), job.properties.get("inputs") or {}, outputs)
        log_name = f"{log_prefix(job.name)}/{USER_LOG}"
        container_name = self.config.artifact_container
        self.storage.store.touch(container_name, log_name, "text/plain; charset=utf-8")
        container = Container(
            ["bash", "-c", command],
            env=container_env(self.environment(job, f"{container_root}/exe/wd")),
            stdout=self.storage.store.path(container_name, log_name),
            mounts=mounts,
            cwd=f"{container_root}/exe/wd",
        )
        container.start()
        return container

    def _copy_snapshot(self, job: Job, working: Path) -> None:
        code_id = job.properties.get("codeId")
        if not code_id:
            return
        found = re.fullmatch(r".*/codes/([^/]+)/versions/([^/]+)", str(code_id))
        asset = self.assets.get("codes", found[1], found[2]) if found else None
        if asset is None:
            raise RuntimeError(f"code asset {code_id} is missing")
        container, prefix = self._blob_location(str(asset.properties["codeUri"]))
        store = self.storage.store
        for name in store.names(container, prefix.rstrip("/") + "/"):
            target = working / name[len(prefix.rstrip("/")) + 1 :]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.path(container, name), target)

    def _blob_location(self, uri: str) -> tuple[str, str]:
        parts = urlsplit(uri)
        path = unquote(parts.path).lstrip("/")
        if parts.hostname == self.storage.host:
            container, _, prefix = path.partition("/")
        else:
            _, _, rest = path.partition("/")  # path style: the account comes first
            container, _, prefix = rest.partition("/")
        return container, prefix

    def environment(self, job: Job, working_dir: str) -> dict[str, str]:
        c = self.config
        experiment = str(job.properties.get("experimentName") or "Default")
        token, _ = self.issuer.issue(self.aml_audience, lifetime=7 * 24 * 3600)
        variables: dict[str, str] = dict(job.properties.get("environmentVariables") or {})
        variables.update(_distribution_variables(job.properties.get("distribution")))
        variables.update(
            {
                "AZUREML_RUN_ID": job.name,
                "AZUREML_ARM_SUBSCRIPTION": c.subscription_id,
                "AZUREML_ARM_RESOURCEGROUP": c.resource_group,
                "AZUREML_ARM_WORKSPACE_NAME": c.workspace_name,
                "AZUREML_ARM_PROJECT_NAME": experiment,
                "AZUREML_EXPERIMENT_ID": experiment_id(c, experiment),
                "AZUREML_RUN_TOKEN": token,
                "AZUREML_SERVICE_ENDPOINT": self.base_url,
                "AZUREML_DISCOVERY_SERVICE_ENDPOINT": f"{self.base_url}/discovery",
                "AZUREML_CR_EXECUTION_WORKING_DIR_PATH": working_dir,
                "MLFLOW_TRACKING_URI": f"{self.base_url}/mlflow/v1.0{c.arm_id}",
                "MLFLOW_RUN_ID": job.name,
                "MLFLOW_EXPERIMENT_ID": experiment_id(c, experiment),
                "MLFLOW_EXPERIMENT_NAME": experiment,
                "MLFLOW_TRACKING_TOKEN": token,
                "REQUESTS_CA_BUNDLE": str(self.ca_bundle),
                "SSL_CERT_FILE": str(self.ca_bundle),
            }
        )
        return variables


def _distribution_variables(distribution: Any) -> dict[str, str]:
    """A one-node PyTorch job's rendezvous variables (the emulator runs one process per job)."""
    if (
        not isinstance(distribution, dict)
        or str(distribution.get("distributionType", "")).lower() != "pytorch"
    ):
        return {}
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "6105",
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "NODE_RANK": "0",
    }


def _substitute(command: str, inputs: dict[str, Any], outputs: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "outputs":
            return outputs.get(name, match.group(0))
        entry = inputs.get(name)
        if not isinstance(entry, dict):
            return match.group(0)
        return str(entry.get("value") if entry.get("jobInputType") == "literal" else entry.get("uri", ""))

    return PLACEHOLDER.sub(value, command)
