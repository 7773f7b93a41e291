"""NNI's own example configs for the Kubernetes platforms (nni_examples/README.md), run unchanged through the real
CLI, ``trialfleet create --config <config.yml> --foreground``, against the emulated cluster: every trial SUCCEEDED
with its metrics.

The test gives the CLI what a user's machine gives it: ``KUBECONFIG`` naming the cluster, and the storage mounted.
The CLI runs in a mount namespace of its own where the mount table shows the example's export (a file system
named ``<server>:<path>``, as an NFS mount is, or ``//<account>.file.core.windows.net/<share>``), with the
directory that the emulator serves as that export bind-mounted over it. The Azure CLI (``az``) is a script that
answers the key vault's secret.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.kubernetes import KubernetesEmulator, NodeConfig
from tests.emulators.kubernetes.k8s_testing import start
from tests.integration.cli_harness import CONSOLE_SCRIPT, Cli, free_port

EXAMPLES = Path(__file__).resolve().parent / "nni_examples"
EXPORTS = {  # each example's storage → where this machine would mount it
    "kubeflow_v1": "10.10.10.10:/var/nfs/general",
    "kubeflow_v2": "10.20.30.40:/mnt/nfs/nni",
    "frameworkcontroller_v2": "10.20.30.40:/mnt/nfs/nni",
    "adl_v1": "10.20.41.55:/",
    "frameworkcontroller_v1": "//nnistorage.file.core.windows.net/nni-share",
}
TRIALS = {
    "kubeflow_v1": 1,
    "kubeflow_v2": 10,
    "frameworkcontroller_v1": 10,
    "frameworkcontroller_v2": 10,
    "adl_v1": 2,
}


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    path = tmp_path / "export"
    path.mkdir()
    return path


@pytest.fixture
def cluster(tmp_path: Path, storage: Path) -> Iterator[KubernetesEmulator]:
    exports = {source: storage for source in EXPORTS.values() if not source.startswith("//")}
    emulator = start(
        tmp_path / "k8s",
        nfs_exports=exports,
        azure_shares={"nni-share": storage},
        nodes=[NodeConfig("node-1", gpus=2), NodeConfig("node-2", gpus=2)],
        storage_class="dfs",  # the AdaptDL example's checkpoint class
    )
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def mounted_cli(tmp_path: Path, source: str, storage: Path) -> list[str]:
    """The CLI in a mount namespace where ``source`` is mounted, showing ``storage``'s files."""
    mount_point = tmp_path / "mnt"
    mount_point.mkdir(exist_ok=True)
    script = (
        f"mount -t tmpfs {shlex.quote(source)} {shlex.quote(str(mount_point))} && "
        f'mount --bind {shlex.quote(str(storage))} {shlex.quote(str(mount_point))} && exec "$@"'
    )
    namespace = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        namespace[1:1] = ["--user", "--map-root-user"]
    return [*namespace, "--", "/bin/sh", "-c", script, "sh", str(CONSOLE_SCRIPT)]


def fake_az(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text("#!/bin/sh\necho c3RvcmFnZS1rZXk=\n")
    (bin_dir / "az").chmod(0o755)
    return bin_dir


def create(tmp_path: Path, name: str, cluster: KubernetesEmulator, storage: Path) -> tuple[Cli, str, str]:
    example = tmp_path / name
    shutil.copytree(EXAMPLES / name, example)
    cli = Cli.in_dir(tmp_path)
    cli.env.update(HOME=str(tmp_path / "home"), KUBECONFIG=str(cluster.kubeconfig))
    cli.env["PATH"] = f"{fake_az(tmp_path)}:{cli.env['PATH']}"
    argv = mounted_cli(tmp_path, EXPORTS[name], storage)
    argv += ["create", "--config", str(example / "config.yml"), "--port", str(free_port()), "--foreground"]
    done = subprocess.run(argv, cwd=tmp_path, env=cli.env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    found = re.search(r"Experiment ID: (\w+)", done.stdout)
    assert found is not None, done.stdout
    return cli, found.group(1), done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_nni_example_config_runs_unchanged(
    tmp_path: Path, name: str, cluster: KubernetesEmulator, storage: Path
) -> None:
    cli, experiment_id, output = create(tmp_path, name, cluster, storage)
    trials: list[dict[str, Any]] = cli.json("trial", "ls", experiment_id, "--json")
    assert [t["status"] for t in trials] == ["SUCCEEDED"] * TRIALS[name], output
    for trial in trials:
        final = json.loads(json.loads(trial["finalMetricData"][0]["data"]))
        parameters = json.loads(trial["hyperParameters"][0])["parameters"]
        assert final == pytest.approx(sum(float(v) for v in parameters.values()) % 1)
        trial_dir = storage / "nni" / experiment_id / "trials" / trial["trialJobId"]
        assert (trial_dir / "trial.stdout").read_text().startswith(f"trial {trial['trialJobId']} replica ")
        replicas = sorted(path.name for path in (trial_dir / "replicas").glob("*"))
        assert replicas == (
            ["worker-0", "worker-1"] if name == "kubeflow_v2" else []
        )  # the master is the trial's
    # the experiment has ended: a trial's log is read where this machine mounts the storage, not at the path
    # the trial had in its container
    trial_id = trials[0]["trialJobId"]
    argv = [*mounted_cli(tmp_path, EXPORTS[name], storage), "log", "trial", experiment_id, "-T", trial_id]
    done = subprocess.run(
        [*argv, "--stdout"], cwd=tmp_path, env=cli.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"trial {trial_id} replica " in done.stdout
