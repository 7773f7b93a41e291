"""A missing extra is shown as "needs X" by ``trialfleet platforms``, with the ``pip install`` that fits how
trialfleet was installed: from a clone by its folder, from an index or a wheel by name (PEP 610's record)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import trialfleet
from trialfleet.cli.main import main
from trialfleet.extras import install_hint

TREE = Path(trialfleet.__file__).resolve().parent.parent


def installed_as(site: Path, direct_url: dict[str, object] | None) -> None:
    """A trialfleet distribution's metadata in ``site`` (first on sys.path), as pip writes it."""
    info = site / "trialfleet-9.9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trialfleet\nVersion: 9.9.9\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))


def test_a_clone_installed_with_pip_install_dot_gets_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clone = tmp_path / "my clone"
    clone.mkdir()
    installed_as(tmp_path / "site", {"url": clone.as_uri(), "dir_info": {}})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.chdir(clone)
    assert install_hint("remote") == "pip install '.[remote]'"
    monkeypatch.chdir(tmp_path)
    assert install_hint("remote") == "pip install './my clone[remote]'"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert install_hint("ray") == f"pip install '{clone}[ray]'"


@pytest.mark.parametrize(
    "direct_url",
    [None, {"url": "file:///wheels/trialfleet-9.9.9-py3-none-any.whl", "archive_info": {}}],
    ids=["from an index", "from a wheel file"],
)
def test_an_install_from_an_index_or_a_wheel_gets_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, object] | None
) -> None:
    installed_as(tmp_path, direct_url)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert install_hint("remote") == "pip install 'trialfleet[remote]'"


def test_a_source_tree_run_as_it_is_gets_its_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(TREE)
    assert install_hint("kubernetes") == "pip install '.[kubernetes]'"


def test_platforms_says_what_a_platform_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "asyncssh", None)  # Python's own way to make an import fail
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    monkeypatch.chdir(TREE)
    assert main(["platforms", "--json"]) == 0
    described = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert described["remote"]["status"] == "needs asyncssh"
    assert described["remote"]["problem"] == "pip install '.[remote]'"
    assert {described[name]["status"] for name in ("kubeflow", "frameworkcontroller", "adl")} == {
        "needs kubernetes"
    }
    assert described["local"]["status"] == "available" and described["slurm"]["status"] == "available"
