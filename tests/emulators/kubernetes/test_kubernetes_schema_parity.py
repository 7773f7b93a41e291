"""Schema parity: the shapes of the upstream examples pass validation and admission (server-side dry run).

The manifests follow training-operator v1.9.0 ``examples/{pytorch,tensorflow}/simple.yaml``, FrameworkController's
``example/framework/basic`` and ``extension/frameworkbarrier.yaml``, and AdaptDL's ``tutorial/adaptdljob.yaml``
(with the image ``adaptdl submit`` fills in). The rejected variants are in each operator's test module.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.emulators.kubernetes import KubernetesEmulator


def _replica(container: str, image: str, command: list[str], replicas: int, restart: str) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "restartPolicy": restart,
        "template": {
            "spec": {
                "containers": [
                    {"name": container, "image": image, "imagePullPolicy": "Always", "command": command}
                ]
            }
        },
    }


PYTORCH_SIMPLE = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pytorch-simple"},
    "spec": {
        "pytorchReplicaSpecs": {
            role: _replica(
                "pytorch",
                "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                1,
                "OnFailure",
            )
            for role in ("Master", "Worker")
        }
    },
}
TF_SIMPLE = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "tfjob-simple"},
    "spec": {
        "tfReplicaSpecs": {
            "Worker": _replica(
                "tensorflow",
                "kubeflow/tf-mnist-with-summaries:latest",
                ["python", "/var/tf_mnist/mnist_with_summaries.py"],
                2,
                "OnFailure",
            )
        }
    },
}


def _framework(
    name: str, roles: list[dict[str, Any]], fancy: bool = True, retries: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "frameworkcontroller.microsoft.com/v1",
        "kind": "Framework",
        "metadata": {"name": name},
        "spec": {
            "executionType": "Start",
            "retryPolicy": {"fancyRetryPolicy": fancy, "maxRetryCount": retries},
            "taskRoles": roles,
        },
    }


def _role(name: str, tasks: int, command: str, **pod: Any) -> dict[str, Any]:
    return {
        "name": name,
        "taskNumber": tasks,
        "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceededTaskCount": -1},
        "task": {
            "retryPolicy": {"fancyRetryPolicy": False, "maxRetryCount": 0},
            "podGracefulDeletionTimeoutSec": 600,
            "pod": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "ubuntu", "image": "ubuntu:trusty", "command": ["sh", "-c", command]}
                    ],
                    **pod,
                }
            },
        },
    }


BARRIER_POD = {
    "serviceAccountName": "frameworkbarrier",
    "initContainers": [
        {
            "name": "frameworkbarrier",
            "image": "frameworkcontroller/frameworkbarrier",
            "volumeMounts": [{"name": "frameworkbarrier-volume", "mountPath": "/mnt/frameworkbarrier"}],
        }
    ],
    "volumes": [{"name": "frameworkbarrier-volume", "emptyDir": {}}],
}
FC_BATCH_SUCCEEDED = _framework("batchsucceeded", [_role("worker", 1, "sleep 10 && echo succeeded")])
FC_BARRIER = _framework(
    "frameworkbarrier",
    [_role("server", 10, "sleep 60", **BARRIER_POD), _role("worker", 10, "sleep 60", **BARRIER_POD)],
    retries=0,
)
ADAPTDL_TUTORIAL = {
    "apiVersion": "adaptdl.petuum.com/v1",
    "kind": "AdaptDLJob",
    "metadata": {"generateName": "mnist-tensorboard-example-"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/adaptdl-submit:latest",
                        "command": ["python3", "/root/tutorial/mnist_tensorboard.py"],
                        "env": [{"name": "PYTHONUNBUFFERED", "value": "true"}],
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ]
            }
        }
    },
}


@pytest.mark.parametrize(
    ("group", "plural", "manifest"),
    [
        ("kubeflow.org", "pytorchjobs", PYTORCH_SIMPLE),
        ("kubeflow.org", "tfjobs", TF_SIMPLE),
        ("frameworkcontroller.microsoft.com", "frameworks", FC_BATCH_SUCCEEDED),
        ("frameworkcontroller.microsoft.com", "frameworks", FC_BARRIER),
        ("adaptdl.petuum.com", "adaptdljobs", ADAPTDL_TUTORIAL),
    ],
)
def test_upstream_examples_are_accepted(
    cluster: KubernetesEmulator,
    custom: client.CustomObjectsApi,
    group: str,
    plural: str,
    manifest: dict[str, Any],
) -> None:
    accepted = custom.create_namespaced_custom_object(group, "v1", "default", plural, manifest, dry_run="All")
    assert accepted["kind"] == manifest["kind"] and accepted["metadata"]["uid"]
    assert (
        accepted["spec"] == manifest["spec"]
    )  # nothing pruned; no runPolicy, the only place the CRDs default
    assert (
        custom.list_namespaced_custom_object(group, "v1", "default", plural)["items"] == []
    )  # a dry run stores nothing
