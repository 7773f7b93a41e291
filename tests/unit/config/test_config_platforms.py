"""Every platform block loads from a realistic YAML, with NNI's values normalised (seconds, MB, lists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialfleet import (
    AmlConfig,
    FrameworkControllerConfig,
    K8sAzureStorageConfig,
    K8sNfsConfig,
    KubeflowConfig,
    LocalConfig,
    OpenpaiConfig,
    RemoteConfig,
    SlurmConfig,
)
from trialfleet.config import ExperimentConfig, load_config
from trialfleet.errors import ConfigError


def test_local(data_dir: Path) -> None:
    loaded = load_config(data_dir / "local.yml")
    config = loaded.config
    assert not loaded.converted_from_v1 and loaded.converted_yaml is None and loaded.warnings == []
    assert loaded.path == data_dir / "local.yml"
    assert config.experiment_name == "mnist-local"
    assert config.search_space_file == data_dir / "search_space.json"
    assert config.search_space is not None and set(config.search_space) == {
        "batch_size",
        "hidden_size",
        "lr",
        "momentum",
    }
    assert (config.max_experiment_duration, config.max_trial_duration) == (7200, 1800)
    assert config.max_trial_number == 20 and config.trial_concurrency == 4
    assert config.max_trial_retries == 0
    assert config.log_level == "info"
    assert config.experiment_working_directory == Path.home().resolve() / "trialfleet-experiments"
    assert config.tuner.name == "TPE" and config.tuner.class_args == {"optimize_mode": "maximize"}
    assert config.assessor is not None and config.assessor.class_args["start_step"] == 5
    service = config.training_service
    assert isinstance(service, LocalConfig)
    assert service.trial_command == "python3 mnist.py"  # shortcut copied into the block
    assert service.trial_code_directory == data_dir / "trial_code"
    assert service.trial_gpu_number == 1
    assert service.gpu_indices == [0, 1]
    assert service.max_trial_number_per_gpu == 2
    assert service.use_active_gpu is False
    assert service.nni_manager_ip is None


def test_remote(data_dir: Path) -> None:
    config = load_config(data_dir / "remote.yml").config
    service = config.training_service
    assert isinstance(service, RemoteConfig)
    assert service.nni_manager_ip == "10.10.10.1"
    assert service.unreachable_grace_period == 600
    assert service.allow_partial_fleet is False and service.reuse_mode is False
    first, second = service.machine_list
    assert (first.host, first.port, first.user) == ("192.0.2.11", 22, "alice")
    assert first.ssh_key_file == Path.home().resolve() / ".ssh" / "id_ed25519"
    assert first.ssh_passphrase is not None and first.ssh_passphrase.get_secret_value() == "open sesame"
    assert first.python_path == "/opt/conda/envs/nni/bin"
    assert first.known_hosts == Path.home().resolve() / ".ssh" / "trialfleet_known_hosts"  # from the fleet
    assert first.accept_new_host_keys is False
    assert (second.host, second.port, second.user) == ("gpu-box.example.org", 2222, "bob")
    assert second.password is not None and second.password.get_secret_value() == "hunter2"
    assert second.ssh_key_file is None  # a password replaces the key file, as NNI
    assert second.accept_new_host_keys is True and second.use_active_gpu is True
    assert second.gpu_indices == [0, 1]
    assert "hunter2" not in repr(config) and "open sesame" not in repr(config)


def test_remote_machine_defaults(workdir: Path) -> None:
    config = _remote(workdir, [{"host": "h", "user": "u"}])
    machine = config.machine_list[0]
    assert machine.port == 22
    assert machine.ssh_key_file == Path.home().resolve() / ".ssh" / "id_rsa"
    assert machine.known_hosts is None and machine.max_trial_number_per_gpu == 1
    assert config.unreachable_grace_period == 300


def _remote(workdir: Path, machines: list[dict[str, object]]) -> RemoteConfig:
    config = ExperimentConfig.for_platform(
        "remote",
        trial_command="python3 trial.py",
        trial_concurrency=1,
        search_space={},
        tuner={"name": "TPE"},
        machine_list=machines,
        trial_code_directory=str(workdir),
    )
    assert isinstance(config.training_service, RemoteConfig)
    return config.training_service


def test_slurm(data_dir: Path) -> None:
    config = load_config(data_dir / "slurm.yml").config
    assert config.max_trial_retries == 2 and config.max_trial_duration == 3600
    service = config.training_service
    assert isinstance(service, SlurmConfig)
    assert service.shared_directory == Path("/scratch/alice/trialfleet")
    assert (service.partition, service.account, service.qos) == ("gpu", "ml-lab", "normal")
    assert service.time_limit == 5400
    assert service.cpus_per_trial == 4 and service.memory == 16384
    assert service.gpu_request_style == "gpus"
    assert service.sbatch_options == ["--exclusive", "--constraint=a100"]
    assert service.setup_script is not None and "module load cuda/12.1" in service.setup_script
    assert service.login_node is not None and service.login_node.host == "login.cluster.example.org"
    assert service.use_sacct is True and service.python_path is None


def test_slurm_defaults_and_local_shared_directory(workdir: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "trialCommand": "python3 trial.py",
            "trialCodeDirectory": "code",
            "trialConcurrency": 1,
            "searchSpace": {},
            "tuner": {"name": "TPE"},
            "trainingService": {"platform": "slurm", "sharedDirectory": "shared"},
        },
        base_dir=workdir,
    )
    service = config.training_service
    assert isinstance(service, SlurmConfig)
    assert service.shared_directory == workdir.resolve() / "shared"  # relative to the config, no login node
    assert service.time_limit is None and service.use_sacct is None
    assert service.gpu_request_style == "gres" and service.sbatch_options == []


def test_kubeflow(data_dir: Path) -> None:
    config = load_config(data_dir / "kubeflow.yml").config
    service = config.training_service
    assert isinstance(service, KubeflowConfig)
    assert service.trial_command == ""  # the roles carry the commands
    assert (service.operator, service.api_version, service.namespace) == ("tf-operator", "v1", "nni")
    assert isinstance(service.storage, K8sNfsConfig)
    assert (service.storage.server, service.storage.path) == ("10.20.30.40", "/var/nfs/general")
    assert service.worker is not None and service.ps is not None and service.master is None
    assert (service.worker.replicas, service.worker.memory_size, service.worker.gpu_number) == (2, 8192, 1)
    assert (service.ps.memory_size, service.ps.gpu_number, service.ps.docker_image) == (
        4096,
        0,
        "msranni/nni:latest",
    )


def test_frameworkcontroller(data_dir: Path) -> None:
    config = load_config(data_dir / "frameworkcontroller.yml").config
    service = config.training_service
    assert isinstance(service, FrameworkControllerConfig)
    assert service.service_account_name == "frameworkcontroller"
    assert isinstance(service.storage, K8sAzureStorageConfig)
    assert (service.storage.azure_account, service.storage.key_vault_key) == ("nnistorage", "storage-key")
    (role,) = service.task_roles
    assert (role.name, role.task_number, role.memory_size) == ("worker", 1, 8192)
    policy = role.framework_attempt_completion_policy
    assert (policy.min_failed_task_count, policy.min_succeed_task_count) == (1, 1)


def test_openpai(data_dir: Path) -> None:
    config = load_config(data_dir / "openpai.yml").config
    assert config.search_space is not None and set(config.search_space) == {"batch_size", "lr"}  # YAML space
    service = config.training_service
    assert isinstance(service, OpenpaiConfig)
    assert service.host == "https://pai.example.org"
    assert service.token.get_secret_value() == "very-secret-token"
    assert service.trial_memory_size == 8192 and service.trial_cpu_number == 2
    assert service.local_storage_mount_point == data_dir / "trial_code"
    assert service.reuse_mode is True and service.virtual_cluster == "default"


def test_aml(data_dir: Path) -> None:
    config = load_config(data_dir / "aml.yml").config
    service = config.training_service
    assert isinstance(service, AmlConfig)
    assert service.subscription_id == "00000000-1111-2222-3333-444444444444"
    assert (service.resource_group, service.workspace_name, service.compute_target) == (
        "nni-rg",
        "nni-workspace",
        "gpu-cluster",
    )
    # NNI's defaults: reuse mode (NNI ran AML in no other), one trial per GPU
    assert service.reuse_mode is True and service.max_trial_number_per_gpu == 1


def test_hybrid_list_gets_shortcuts_in_every_member(workdir: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "trialCommand": "python3 trial.py",
            "trialCodeDirectory": "code",
            "trialConcurrency": 2,
            "trialGpuNumber": 0,
            "searchSpace": {},
            "tuner": {"name": "TPE"},
            "trainingService": [
                {"platform": "local"},
                {
                    "platform": "remote",
                    "trialCommand": "python3 other.py",
                    "machineList": [{"host": "h", "user": "u"}],
                },
            ],
        },
        base_dir=workdir,
    )
    local, remote = config.training_services
    assert isinstance(config.training_service, list)
    assert local.trial_command == "python3 trial.py" and remote.trial_command == "python3 other.py"
    assert local.trial_gpu_number == remote.trial_gpu_number == 0
    assert local.trial_code_directory == remote.trial_code_directory == workdir.resolve() / "code"


def _hybrid(workdir: Path, *blocks: dict[str, object]) -> dict[str, object]:
    return {
        "trialCommand": "python3 trial.py",
        "trialCodeDirectory": "code",
        "trialConcurrency": 2,
        "searchSpace": {},
        "tuner": {"name": "TPE"},
        "trainingService": list(blocks),
    }


def test_hybrid_placement_keys_are_read_per_block(workdir: Path) -> None:
    data = _hybrid(
        workdir,
        {"platform": "local", "placementWeight": 2.5, "trialConcurrency": 1},
        {"platform": "slurm", "sharedDirectory": "shared"},
    )
    local, slurm = ExperimentConfig.from_dict(data, base_dir=workdir).training_services
    assert (local.placement_weight, local.trial_concurrency) == (2.5, 1)
    assert (slurm.placement_weight, slurm.trial_concurrency) == (None, None)


def test_hybrid_refuses_a_platform_twice_and_bad_placement_keys(workdir: Path) -> None:
    data = _hybrid(
        workdir,
        {"platform": "local", "placementWeight": -1},
        {"platform": "slurm", "sharedDirectory": "shared", "trialConcurrency": 0},
        {"platform": "local"},
    )
    with pytest.raises(ConfigError) as caught:
        ExperimentConfig.from_dict(data, base_dir=workdir)
    assert [(p.key_path, p.message) for p in caught.value.problems] == [
        ("trainingService[0].placementWeight", "expected a number at least 0.0, got -1"),
        ("trainingService[1].trialConcurrency", "expected a number greater than 0, got 0"),
    ]
    del data["trainingService"][0]["placementWeight"]  # type: ignore[index]
    del data["trainingService"][1]["trialConcurrency"]  # type: ignore[index]
    with pytest.raises(ConfigError) as caught:
        ExperimentConfig.from_dict(data, base_dir=workdir)
    assert [(p.key_path, p.message) for p in caught.value.problems] == [
        (
            "trainingService[2].platform",
            "local is already trainingService[0]: put all of its machines or options in one block",
        )
    ]


def test_a_placement_weight_outside_a_hybrid_experiment_is_warned_about(workdir: Path) -> None:
    from trialfleet.config.loader import load_config as load

    (workdir / "config.yml").write_text(
        "trialCommand: python3 trial.py\ntrialCodeDirectory: code\ntrialConcurrency: 1\nsearchSpace: {}\n"
        "tuner: {name: TPE}\ntrainingService: {platform: local, placementWeight: 2}\n"
    )
    assert load(workdir / "config.yml").warnings == [
        "trainingService.placementWeight only matters in a hybrid experiment (trainingService as a list); "
        "it is ignored"
    ]
