"""The config reference page, generated from the config models: every key of the experiment config and of each
built-in platform's block, with its type, default, whether NNI has it, and its description (the field's
docstring). A key without a description is an error, so a new key cannot reach the docs undocumented."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from docsgen.fields import Row, model_rows, nested_models

INTRO = """\
Generated from trialfleet's config models when the docs are built, so every key the loader accepts is here.
Keys ignore case and underscores (`trial_command` is `trialCommand`); an unknown key is refused with a "did you
mean". **NNI** marks a key NNI 3.0 (or NNI's v1 config, for the platforms it dropped) has too; **trialfleet**
a key only trialfleet has. A key trialfleet accepts but does not act on is warned about by name when a config
sets it, and says so below. Durations are NNI's (`90`, `30m`, `2h`, `1d`: seconds when a bare number), sizes
too (`2048`, `16gb`: MiB when a bare number). The bounds of every number are in [config.md](../config.md).
"""


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    model: type[BaseModel]
    intro: str
    skip: frozenset[str] = frozenset()


class MissingDescription(ValueError):
    """A config key has no docstring: the generated reference would leave it unexplained."""


def _table(rows: list[Row], platforms: bool = False) -> list[str]:
    head = "| key | type | default | | description |"
    rule = "| --- | --- | --- | --- | --- |"
    if platforms:
        head, rule = head + " platforms |", rule + " --- |"
    lines = [head, rule]
    for row in rows:
        line = f"| `{row.key}` | {row.type} | {row.default} | {row.origin} | {row.description} |"
        lines.append(line + (f" {row.platforms} |" if platforms else ""))
    return lines


def _check(rows: list[Row], where: str) -> None:
    missing = [row.key for row in rows if not row.description]
    if missing:
        raise MissingDescription(
            f"{where}: no description (a docstring under the field) for {', '.join(missing)}"
        )


def _section(section: Section, level: int, seen: set[type[BaseModel]]) -> Iterator[str]:
    rows = [row for row in model_rows(section.model) if row.name not in section.skip]
    _check(rows, section.model.__name__)
    yield f"{'#' * level} {section.title} {{#{section.anchor}}}\n"
    if section.intro:
        yield section.intro + "\n"
    yield "\n".join(_table(rows)) + "\n"
    held: dict[type[BaseModel], list[str]] = {}
    for key, model in nested_models(section.model):
        if key not in section.skip:
            held.setdefault(model, []).append(f"`{key}`")
    for model, keys in held.items():
        if model in seen:
            continue
        seen.add(model)
        anchor = f"{section.anchor}-{model.__name__.lower()}"
        title = f"{', '.join(keys)}: {model.__name__}"
        yield from _section(Section(title, anchor, model, _first_paragraph(model)), level + 1, seen)


def _first_paragraph(model: type[BaseModel]) -> str:
    paragraph = (model.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "`")


_PAGES = {"kubeflow": "kubernetes", "frameworkcontroller": "kubernetes", "adl": "kubernetes"}
_DOCS = Path(__file__).resolve().parent.parent / "docs"


def _platform_intro(name: str, model: type[BaseModel]) -> str:
    doc = _first_paragraph(model)
    if doc.rstrip(".") == f"`platform: {name}`":
        doc = ""
    page = _PAGES.get(name, name)
    if (_DOCS / f"{page}.md").exists():
        doc += f" See [{page}](../{page}.md)."
    return doc.strip()


def _builtin_platforms() -> dict[str, type[BaseModel]]:
    from trialfleet.training_services.registry import platforms

    return {
        name: platform.config_class()
        for name, platform in platforms().items()
        if platform.source == "built-in"
    }


def _common_rows(configs: dict[str, type[BaseModel]]) -> list[Row]:
    from trialfleet.config import TrainingServiceConfig

    rows = model_rows(TrainingServiceConfig)
    for row in rows:
        having = [name for name, model in configs.items() if row.name in model.model_fields]
        row.platforms = "all" if len(having) == len(configs) else ", ".join(having)
    return rows


def _inherited(model: type[BaseModel]) -> frozenset[str]:
    """The common keys a platform leaves as they are (listed once, in the common table)."""
    from trialfleet.config import TrainingServiceConfig as Base

    return frozenset(
        name
        for name, info in Base.model_fields.items()
        if name == "platform" or model.model_fields[name].default == info.default
    )


def config_reference() -> str:
    from trialfleet.config import AlgorithmConfig, AzureBlobConfig, ExperimentConfig, NfsConfig
    from trialfleet.config import TrainingServiceConfig as Base

    out = ["# Config reference\n", INTRO]
    seen: set[type[BaseModel]] = {AlgorithmConfig, NfsConfig, AzureBlobConfig, Base}
    top = Section("Experiment (top level)", "experiment", ExperimentConfig, "")
    out += _section(top, 2, seen)
    out += _section(
        Section(
            "`tuner`, `assessor`, `advisor`", "algorithm", AlgorithmConfig, _first_paragraph(AlgorithmConfig)
        ),
        2,
        seen,
    )
    out.append("## `sharedStorage` {#shared-storage}\n\nSee [shared storage](../shared-storage.md).\n")
    storages: tuple[type[BaseModel], ...] = (NfsConfig, AzureBlobConfig)
    for model in storages:
        out += _section(
            Section(
                f"`storageType: {model.model_fields['storage_type'].default}`",
                model.__name__.lower(),
                model,
                _first_paragraph(model),
            ),
            3,
            seen,
        )
    configs = _builtin_platforms()
    common = _common_rows(configs)
    _check(common, Base.__name__)
    out += [
        "## `trainingService` {#training-service}\n",
        _SERVICE_INTRO,
        "\n".join(_table(common, platforms=True)) + "\n",
    ]
    for name, model in configs.items():
        doc = _platform_intro(name, model)
        out += _section(
            Section(f"`platform: {name}`", f"platform-{name}", model, doc, _inherited(model)), 3, seen
        )
    return "\n".join(out)


_SERVICE_INTRO = """\
One block, or a list of blocks for a hybrid experiment. The keys every platform has come first; `trialCommand`,
`trialCodeDirectory`, `trialGpuNumber`, `nniManagerIp` and `debug` are taken from the top level when the block
leaves them unset. Then each platform's own keys.
"""
