"""``platform: frameworkcontroller``: every trial attempt is a Framework (``frameworkcontroller.microsoft.com/v1``).

Each task role is a task role of the Framework, its ``frameworkAttemptCompletionPolicy`` as configured, every
task running the entry point with its role's command. The trial's own task — the one whose metrics are the
trial's — is index 0 of the first task role. FrameworkController gives every task ``FC_*`` variables
(``FC_TASK_INDEX`` tells the entry point its index). A Framework of more than one task also runs
FrameworkController's barrier first, as NNI did: an init container that waits until every task has an IP and
writes ``injector.sh``, sourced before the entry point, which exports ``FB_<ROLE>_IPS`` and
``FB_<ROLE>_ADDRESSES`` (with ``FB_<ROLE>_PORT``, 4000 + the role's position, NNI's ports: every role's in every
container).

With ``reuseMode`` (NNI's default) and one task, trials run one after another in worker Frameworks
(:mod:`.reuse`).

Nothing is retried by FrameworkController (``maxRetryCount: 0`` for the Framework and its tasks):
trialfleet's retry policy decides, in a fresh attempt. Its names take no hyphen (``^[a-z0-9]{1,63}$``, the CRD's
``NamingConvention``, microsoft/frameworkcontroller pkg/apis/frameworkcontroller/v1/crd.go). What
FrameworkController builds from a Framework's name needs no room in those 63 characters: its pods
``<framework>-<taskrole>-<index>`` (``GetPodName``) and its ConfigMap ``<framework>-attempt``
(``GetConfigMapName``, both in pkg/apis/frameworkcontroller/v1/funcs.go) are DNS-1123 subdomains (253
characters), it creates no Service and sets no hostname (a pod's hostname is then its name, which the kubelet
shortens to 63 characters).
"""

from __future__ import annotations

from typing import Any

from trialfleet.training_services.kubernetes.client import ResourceKind
from trialfleet.training_services.kubernetes.cluster import TrialJob
from trialfleet.training_services.kubernetes.config import (
    FrameworkControllerConfig,
    FrameworkControllerRoleConfig,
)
from trialfleet.training_services.kubernetes.pods import Replica, container, pod_template
from trialfleet.training_services.kubernetes.reuse import ReusableKubernetesService
from trialfleet.training_services.kubernetes.secrets import prepare_secrets
from trialfleet.training_services.kubernetes.states import JobState, framework_state
from trialfleet.training_services.kubernetes.storage import StorageSpec, storage_spec
from trialfleet.training_services.spec import TrialSpec

FRAMEWORK = ResourceKind(
    "Framework", "frameworkcontroller.microsoft.com", "v1", "frameworks", "FrameworkController"
)
NO_RETRY = {"fancyRetryPolicy": False, "maxRetryCount": 0}
BARRIER_IMAGE = "frameworkcontroller/frameworkbarrier"
BARRIER_DIR = "/mnt/frameworkbarrier"
BARRIER_VOLUME = "frameworkbarrier-volume"
FIRST_PORT = 4000


def barrier_container() -> dict[str, Any]:
    return {
        "name": "frameworkbarrier",
        "image": BARRIER_IMAGE,
        "volumeMounts": [{"name": BARRIER_VOLUME, "mountPath": BARRIER_DIR}],
    }


def framework_manifest(
    job: TrialJob,
    roles: list[tuple[FrameworkControllerRoleConfig, Replica]],
    service_account: str | None,
) -> dict[str, Any]:
    barrier = sum(role.task_number for role, _ in roles) > 1
    task_roles = []
    for role, replica in roles:
        main = container(replica, job.entrypoint, job.variables, job.mount_path)
        extra: dict[str, Any] = {}
        if barrier:
            main["volumeMounts"].append({"name": BARRIER_VOLUME, "mountPath": BARRIER_DIR})
            extra = {
                "init_containers": [barrier_container()],
                "extra_volumes": [{"name": BARRIER_VOLUME, "emptyDir": {}}],
            }
        template = pod_template(
            job.labels, job.annotations, [main], job.volume, replica, service_account=service_account, **extra
        )
        policy = role.framework_attempt_completion_policy
        task_roles.append(
            {
                "name": role.name,
                "taskNumber": role.task_number,
                "frameworkAttemptCompletionPolicy": {
                    "minFailedTaskCount": policy.min_failed_task_count,
                    "minSucceededTaskCount": policy.min_succeed_task_count,
                },
                "task": {"retryPolicy": dict(NO_RETRY), "pod": template},
            }
        )
    metadata = {"name": job.name, "labels": job.labels, "annotations": job.annotations}
    spec = {"executionType": "Start", "retryPolicy": dict(NO_RETRY), "taskRoles": task_roles}
    return {
        "apiVersion": f"{FRAMEWORK.group}/{FRAMEWORK.version}",
        "kind": "Framework",
        "metadata": metadata,
        "spec": spec,
    }


class FrameworkControllerTrainingService(ReusableKubernetesService[FrameworkControllerConfig]):
    platform = "frameworkcontroller"
    config_class = FrameworkControllerConfig
    compact_names = True

    def resource_kind(self) -> ResourceKind:
        return FRAMEWORK

    def storage_spec(self) -> StorageSpec:
        return storage_spec(self.config.storage)

    def role_commands(self, spec: TrialSpec) -> dict[str, str]:
        return {role.name: role.command or spec.command for role in self.config.task_roles}

    def reuse_refusal(self) -> str | None:
        """A worker is one task: the tasks of a Framework of several run one distributed trial, gathered by
        FrameworkController's barrier once per Framework, which one worker running trial after trial cannot give."""
        roles = self.config.task_roles
        tasks = sum(role.task_number for role in roles)
        if tasks == 1:
            return None
        shape = ", ".join(f"{role.name} x{role.task_number}" for role in roles)
        return f"a Framework of {tasks} tasks ({shape})"

    def worker_gpus(self) -> int | None:
        return self.config.task_roles[0].gpu_number

    async def _prepare_platform(self) -> None:
        roles = {role.name: role for role in self.config.task_roles}
        self.pull_secrets = await prepare_secrets(self.client, self.platform, self.config.storage, roles)

    def manifest(self, job: TrialJob) -> dict[str, Any]:
        distributed = sum(role.task_number for role in self.config.task_roles) > 1
        ports = {role.name: FIRST_PORT + position for position, role in enumerate(self.config.task_roles)}
        # the barrier's injector builds every role's FB_<ROLE>_ADDRESSES from FB_<ROLE>_PORT: each container needs
        # every role's port (as NNI set them), or a worker sees the ps at "ip:"
        barrier_ports = {f"FB_{name.upper()}_PORT": str(port) for name, port in ports.items()}
        roles = []
        for role in self.config.task_roles:
            port = ports[role.name]
            replica = Replica(
                role=role.name,
                container="framework",
                image=role.docker_image,
                cpu=role.cpu_number,
                memory_mb=role.memory_size,
                gpus=role.gpu_number,
                pull_secrets=self.pull_secrets.get(role.name, ()),
                index_variable="FC_TASK_INDEX",
                shell_prefix=f". {BARRIER_DIR}/injector.sh" if distributed else None,
                extra_env=barrier_ports if distributed else {},
                ports=(port,) if distributed else (),
            )
            roles.append((role, replica))
        return framework_manifest(job, roles, self.config.service_account_name)

    def job_state(self, obj: Any) -> JobState:
        return framework_state(obj)
