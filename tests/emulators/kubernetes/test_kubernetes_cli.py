"""``python -m tests.emulators.kubernetes``: the emulator on its own, used through its kubeconfig and control API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from kubernetes import client, config

from tests.emulators.kubernetes.k8s_testing import wait_for

ROOT = Path(__file__).resolve().parents[3]


def control(url: str, path: str, body: dict[str, object] | None = None, method: str = "POST") -> object:
    data = json.dumps(body or {}).encode() if method != "GET" else None
    request = urllib.request.Request(
        f"{url}/_emu/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def test_cli_runs_until_interrupted(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.emulators.kubernetes",
            "--port",
            "0",
            "--volumes",
            str(tmp_path),
            "--delay",
            "0.02",
            "--operators",
            "frameworkcontroller",
            "--node",
            "gpu-1:4:16Gi:2",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        lines = [process.stdout.readline() for _ in range(5)]  # type: ignore[union-attr]
        url = lines[0].split()[-1]
        kubeconfig = lines[1].split(": ", 1)[1].strip()
        assert lines[2].strip() == f"export KUBECONFIG={kubeconfig}"
        core = client.CoreV1Api(config.new_client_from_config(kubeconfig))
        node = core.list_node().items[0]
        assert (node.metadata.name, node.status.allocatable["nvidia.com/gpu"]) == ("gpu-1", "2")
        volumes = [{"name": "nni-vol", "nfs": {"server": "nfs.example", "path": "/exports/exp1"}}]
        pod = {
            "metadata": {"name": "cli"},
            "spec": {
                "restartPolicy": "Never",
                "volumes": volumes,
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "command": ["bash", "-c", "echo done > /mnt/nni/out"],
                        "volumeMounts": [{"name": "nni-vol", "mountPath": "/mnt/nni"}],
                    }
                ],
            },
        }
        core.create_namespaced_pod("default", pod)
        wait_for(lambda: core.read_namespaced_pod("cli", "default").status.phase == "Succeeded")
        assert (tmp_path / "nfs" / "nfs.example" / "exports" / "exp1" / "out").read_text() == "done\n"
        state = control(url, "state", method="GET")
        assert state["operators"] == ["frameworkcontroller"] and state["errors"] == []  # type: ignore[index]
        control(url, "faults/fail", {"count": 1, "code": 500})
        try:
            core.list_namespaced_pod("default")
            raise AssertionError("the injected failure did not happen")
        except client.ApiException as error:
            assert error.status == 500
        logged = control(url, "requests", method="GET")["items"]  # type: ignore[index]
        failed = logged[-2]  # the last one is this very request to the log
        assert (failed["method"], failed["path"], failed["status"]) == (
            "GET",
            "/api/v1/namespaces/default/pods",
            500,
        )
        assert "authorization" not in failed["headers"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
    assert process.returncode == 0
