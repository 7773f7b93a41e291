"""The Kubernetes API as the platforms use it: the official ``kubernetes`` client, called off the event loop.

The client is configured by its own rules (``config.load_kube_config``: ``$KUBECONFIG`` or ``~/.kube/config``;
``config.load_incluster_config`` inside a pod) unless the config names a kubeconfig. Its calls block, so each one
runs in a worker thread; its ``ApiException`` becomes a :class:`KubeApiError` naming the API server, the resource
and the server's own message, and a connection failure a :class:`~trialfleet.errors.PlatformError`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.extras import install_hint

if TYPE_CHECKING:
    from kubernetes import client as k8s

    from trialfleet.training_services.kubernetes.config import ClusterAccessConfig

T = TypeVar("T")
REQUEST_TIMEOUT = 30.0  # seconds for any one request; watches set their own


@dataclass(frozen=True)
class ResourceKind:
    """A custom resource kind a platform submits trials as, and what serves it."""

    kind: str
    group: str
    version: str
    plural: str
    operator: str  # what a user installs to get it, for messages

    @property
    def resource(self) -> str:
        """``tfjobs.kubeflow.org``, as the API server names it in messages."""
        return f"{self.plural}.{self.group}"

    def at(self, version: str) -> ResourceKind:
        return ResourceKind(self.kind, self.group, version, self.plural, self.operator)


class KubeApiError(PlatformError):
    """The API server refused a request: ``status`` (404, 409 …) and ``reason`` (``NotFound`` …) are its own."""

    def __init__(self, message: str, status: int, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def server_message(exc: Any) -> tuple[str, str]:
    """The reason and message of an ``ApiException``, from the Status body the server sent when there is one."""
    reason, message = str(exc.reason or ""), ""
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    if isinstance(body, dict):
        reason = str(body.get("reason") or reason)
        message = str(body.get("message") or "")
    return reason, message or str(exc.body or exc.reason or "").strip()


class KubeClient:
    """One API server, as one namespace sees it. :meth:`connect` loads the configuration (blocking, once)."""

    def __init__(self, platform: str, access: ClusterAccessConfig, namespace: str) -> None:
        self.platform = platform
        self.access = access
        self.namespace = namespace
        self.description = "the Kubernetes API server"
        self._api: k8s.ApiClient | None = None

    def connect(self) -> None:
        try:
            from kubernetes import client, config
            from kubernetes.config.config_exception import ConfigException
        except ImportError as exc:
            raise PlatformError(
                f"{self.platform}: the kubernetes client is not installed ({exc}): "
                f"{install_hint('kubernetes')}"
            ) from exc

        configuration = client.Configuration()
        kubeconfig = self.access.kubeconfig
        try:
            if kubeconfig is not None or self._has_kubeconfig():
                config.load_kube_config(
                    config_file=str(kubeconfig) if kubeconfig is not None else None,
                    context=self.access.kube_context,
                    client_configuration=configuration,
                )
            else:
                config.load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError, ValueError) as exc:
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config (or the in-cluster account)"
            raise PlatformError(
                f"{self.platform}: cannot load the Kubernetes configuration {where}: {exc}"
            ) from exc
        self._api = client.ApiClient(configuration)
        self.description = f"the Kubernetes API server {configuration.host}"

    @staticmethod
    def _has_kubeconfig() -> bool:
        """The official client's rule: a kubeconfig when $KUBECONFIG names one or ~/.kube/config exists."""
        return bool(os.environ.get("KUBECONFIG")) or Path("~/.kube/config").expanduser().exists()

    @property
    def api(self) -> k8s.ApiClient:
        assert self._api is not None, "KubeClient.connect() was not called"
        return self._api

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    @property
    def core(self) -> k8s.CoreV1Api:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    # ---- calls -------------------------------------------------------------------------------------------

    async def call(self, what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` in a worker thread; ``what`` ("create tfjobs.kubeflow.org x") for errors."""
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        return await asyncio.to_thread(self.run, what, function, *args, **kwargs)

    def run(self, what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """The same, blocking (for threads that are not the event loop's)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return function(*args, **kwargs)
        except ApiException as exc:
            reason, message = server_message(exc)
            raise KubeApiError(
                f"{self.platform}: {self.description} refused to {what}: {exc.status} {reason}: {message}",
                int(exc.status or 0),
                reason,
            ) from exc
        except (HTTPError, OSError) as exc:
            raise PlatformError(f"{self.platform}: cannot reach {self.description} to {what}: {exc}") from exc

    # ---- custom resources ------------------------------------------------------------------------------

    def _where(self, kind: ResourceKind, name: str | None = None) -> str:
        named = f' "{name}"' if name else ""
        return f'{kind.resource}{named} in namespace "{self.namespace}"'

    async def create(self, kind: ResourceKind, body: dict[str, Any]) -> dict[str, Any]:
        what = f"create {self._where(kind, body['metadata']['name'])}"
        args = (kind.group, kind.version, self.namespace, kind.plural, body)
        created: dict[str, Any] = await self.call(what, self.custom.create_namespaced_custom_object, *args)
        return created

    async def get(self, kind: ResourceKind, name: str) -> dict[str, Any] | None:
        """The resource, or None when there is none of that name."""
        args = (kind.group, kind.version, self.namespace, kind.plural, name)
        try:
            found: dict[str, Any] = await self.call(
                f"read {self._where(kind, name)}", self.custom.get_namespaced_custom_object, *args
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def delete(self, kind: ResourceKind, name: str) -> bool:
        """Delete the resource and what it owns, dependents first (foreground); False when it was gone."""
        args = (kind.group, kind.version, self.namespace, kind.plural, name)
        try:
            await self.call(
                f"delete {self._where(kind, name)}",
                self.custom.delete_namespaced_custom_object,
                *args,
                propagation_policy="Foreground",
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def served(self, kind: ResourceKind) -> bool:
        """Whether the API server serves the kind at its version here (404: the operator's CRD is missing)."""
        args = (kind.group, kind.version, self.namespace, kind.plural)
        try:
            await self.call(
                f"list {self._where(kind)}", self.custom.list_namespaced_custom_object, *args, limit=1
            )
        except KubeApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def check_namespace(self) -> None:
        """A namespace that does not exist is refused; one this account may not read is taken on trust."""
        try:
            await self.call(f'read namespace "{self.namespace}"', self.core.read_namespace, self.namespace)
        except KubeApiError as exc:
            if exc.status == 404:
                raise PlatformError(
                    f'{self.platform}: namespace "{self.namespace}" does not exist on {self.description}'
                ) from exc
            if exc.status != 403:  # RBAC often grants a namespace's objects without the namespace itself
                raise

    async def apply_secret(self, body: dict[str, Any]) -> None:
        """Create the Secret, or replace the one of that name (a key vault's key may have been rotated)."""
        if not await self._create("secret", self.core.create_namespaced_secret, body):
            name = body["metadata"]["name"]
            await self.call(
                f'replace secret "{name}" in namespace "{self.namespace}"',
                self.core.replace_namespaced_secret,
                name,
                self.namespace,
                body,
            )

    async def create_claim(self, body: dict[str, Any]) -> None:
        """Create a PersistentVolumeClaim; one of that name already there is taken as this one."""
        await self._create("persistentvolumeclaim", self.core.create_namespaced_persistent_volume_claim, body)

    async def _create(self, kind: str, create: Callable[..., Any], body: dict[str, Any]) -> bool:
        """Create the namespaced object ``body`` of ``kind``; False: one of that name is there already."""
        what = f'create {kind} "{body["metadata"]["name"]}" in namespace "{self.namespace}"'
        try:
            await self.call(what, create, self.namespace, body)
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            return False
        return True
