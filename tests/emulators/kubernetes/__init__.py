"""A Kubernetes API server with the Kubeflow training operator, FrameworkController and AdaptDL, emulated.

It speaks the real API over HTTP to the official ``kubernetes`` client (through the kubeconfig it writes),
keeps objects with resourceVersions, watches, selectors, patches, owner references and garbage
collection, validates like the API server and the operators' webhooks, runs each pod's containers as
local processes, and drives TFJobs/PyTorchJobs, Frameworks and AdaptDLJobs through their real state
machines. Every request is recorded; faults can be injected.

Use in a test::

    from kubernetes import client, config
    from tests.emulators.kubernetes import KubernetesEmulator

    @pytest.fixture
    def cluster(tmp_path):
        with KubernetesEmulator(tmp_path / "k8s", nfs_exports={"nfs.example:/exports": tmp_path / "nfs"}) as emu:
            yield emu
            assert emu.errors() == []

    def test_submit(cluster):
        custom = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs", manifest)
        ...

Public names: :class:`KubernetesEmulator` (start/stop, ``url``, ``token``, ``kubeconfig``, ``requests``,
``faults``, ``clock``, operators, fault knobs), :class:`NodeConfig`, :class:`KubeletConfig`,
:class:`BuiltinImage`, :class:`ManualClock`, :class:`SystemClock`.
"""

from __future__ import annotations

from .clock import ManualClock, SystemClock
from .cluster import ALL_OPERATORS, KubernetesEmulator
from .kubelet import BuiltinImage, KubeletConfig
from .nodes import NodeConfig

__all__ = [
    "ALL_OPERATORS",
    "BuiltinImage",
    "KubeletConfig",
    "KubernetesEmulator",
    "ManualClock",
    "NodeConfig",
    "SystemClock",
]
