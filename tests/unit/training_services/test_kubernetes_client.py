"""The Kubernetes platforms import the official client only when one of them starts, and say how to get it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.client import KubeClient
from trialfleet.training_services.kubernetes.config import ClusterAccessConfig


@pytest.mark.slow
def test_loading_the_platforms_does_not_import_the_client() -> None:
    code = (
        "import sys\n"
        "import trialfleet.training_services.kubernetes.service\n"
        "from trialfleet.training_services.base import get_training_service_class\n"
        "get_training_service_class('adl')\n"
        "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_without_the_client_the_start_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    monkeypatch.chdir(
        Path(__file__).resolve().parents[3]
    )  # the clone the tests run from: the extra comes from it
    with pytest.raises(
        PlatformError,
        match=r"kubeflow: the kubernetes client is not installed .*: pip install '\.\[kubernetes\]'$",
    ):
        KubeClient("kubeflow", ClusterAccessConfig(), "default").connect()


@pytest.mark.slow
def test_a_kubeconfig_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    access = ClusterAccessConfig(kubeconfig=broken)
    with pytest.raises(
        PlatformError, match=f"frameworkcontroller: cannot load the Kubernetes configuration {broken}"
    ):
        KubeClient("frameworkcontroller", access, "default").connect()


class _EndedWatch:
    """A watch response whose stream ended while stop() was on its way: urllib3 then refuses to shut its socket."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def shutdown(self) -> None:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        OSError(9, "Bad file descriptor"),  # closed by the watch's own thread (seen in a CI run)
        RuntimeError("Cannot shutdown as connection has already been released to the pool"),
        ValueError("Cannot shutdown socket as self._sock_shutdown is not set"),
    ],
)
def test_stopping_an_informer_whose_watch_just_ended_does_not_fail(error: Exception) -> None:
    from trialfleet.training_services.kubernetes.informer import Informer

    informer = Informer(KubeClient.__new__(KubeClient), "pods", lambda **_: None, "a=b", lambda: None)
    informer._stop.set()
    informer.start()  # its thread ends at once: stop() has only the response to deal with
    informer._response = watch = _EndedWatch(error)
    informer.stop()
    assert watch.calls == 1
