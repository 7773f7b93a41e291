"""The docs site (mkdocs.yml) builds with warnings as errors, from nothing but this checkout (in a network
namespace of its own, so nothing can be fetched; nor does a page load anything from elsewhere), and its generated
references hold every config key and every command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from pydantic import BaseModel

from docsgen.config_reference import MissingDescription, Section, _section, config_reference
from trialfleet.config import ExperimentConfig, TrainingServiceConfig
from trialfleet.config.base import ConfigModel
from trialfleet.training_services.registry import platforms

ROOT = Path(__file__).resolve().parents[2]
#: a page, a script or a style sheet loaded from elsewhere: the built site must work offline
EXTERNAL_ASSET = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # as a reader runs it: the console script, the checkout not on the path (the hook puts it there)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        ["unshare", "--net", str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**env, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.netns
def test_the_site_builds_strictly_and_loads_nothing_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert (site / "index.html").exists() and (site / "reference" / "config" / "index.html").exists()
    assert [p for p in pages if EXTERNAL_ASSET.search(p.read_text(encoding="utf-8"))] == []
    getting_started = (site / "index.html").read_text(encoding="utf-8")
    for promised in ("~/trialfleet-experiments", "TRIALFLEET_HOME", "reference/config/", "reference/cli/"):
        assert promised in getting_started


@pytest.mark.slow
@pytest.mark.netns
def test_every_command_is_in_the_cli_reference(site: Path) -> None:
    from trialfleet.cli.main import app

    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")

    def names(command: click.Command, prefix: str) -> list[str]:
        found = [prefix]
        for name, sub in getattr(command, "commands", {}).items():
            found += names(sub, f"{prefix} {name}")
        return found

    every = names(typer.main.get_command(app), "trialfleet")[1:]  # the root is the page itself
    assert len(every) > 30
    assert [name for name in every if f"<code>{name}</code>" not in page] == []


def _keys(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


@pytest.mark.slow
@pytest.mark.netns
def test_every_config_key_of_every_platform_is_in_the_config_reference(site: Path) -> None:
    page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    builtin = {name: p.config_class() for name, p in platforms().items() if p.source == "built-in"}
    assert {"local", "remote", "slurm", "ray", "kubeflow", "aml"} <= set(builtin)
    common = page.split('id="training-service"', 1)[1].split('id="platform-', 1)[0]
    assert [key for key in _keys(TrainingServiceConfig) if f"<code>{key}</code>" not in common] == []
    names = list(builtin)
    for name, following in zip(names, [*names[1:], None], strict=True):
        section = page.split(f'id="platform-{name}"', 1)[1]
        if following is not None:
            section = section.split(f'id="platform-{following}"', 1)[0]
        model = builtin[name]
        inherited = {  # in the common table; a platform's heading names its `platform`
            info.alias or key
            for key, info in TrainingServiceConfig.model_fields.items()
            if key == "platform" or model.model_fields[key].default == info.default
        }
        own = _keys(model) - inherited
        assert [key for key in own if f"<code>{key}</code>" not in section] == [], name
    top = page.split('id="experiment"', 1)[1].split('id="algorithm"', 1)[0]
    assert [key for key in _keys(ExperimentConfig) if f"<code>{key}</code>" not in top] == []


def test_a_config_key_without_a_description_fails_the_build() -> None:
    class Undocumented(ConfigModel):
        documented: int = 1
        """Says what it is."""
        bare: int = 2

    with pytest.raises(MissingDescription, match="bare"):
        list(_section(Section("t", "t", Undocumented, ""), 2, set()))


def test_the_reference_marks_trialfleet_only_keys_and_unacted_ones() -> None:
    page = config_reference()
    row = next(line for line in page.splitlines() if line.startswith("| `maxTrialRetries`"))
    assert "| trialfleet |" in row
    row = next(line for line in page.splitlines() if line.startswith("| `trialConcurrency`"))
    assert "| NNI |" in row and "required" in row
    assert "*Accepted, not acted on: the tuner runs in the manager's process" in page


def _python_example(page: Path) -> str:
    return (
        page.read_text(encoding="utf-8")
        .split("## Python API", 1)[1]
        .split("```python\n", 1)[1]
        .split("```")[0]
    )


def test_the_getting_started_python_example_is_the_one_the_readme_walkthrough_runs() -> None:
    # tests/integration/test_readme_walkthroughs.py runs the README's; the docs site shows the same code
    assert _python_example(ROOT / "docs" / "index.md") == _python_example(ROOT / "README.md")
