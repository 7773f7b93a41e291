"""NNI's way of writing a config in Python: ``Experiment('local')``, then ``experiment.config.<field> = ...``.

A draft holds whatever is set on it (NNI's snake_case field names, nested ``tuner``, ``assessor`` and
``training_service`` sections) and is validated as a whole by :meth:`ConfigDraft.build` when the experiment
starts, so errors name every bad key at once, exactly as for a config file.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialfleet.config import ExperimentConfig


class ConfigSection:
    """Attributes set on it become config keys."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def to_dict(self) -> dict[str, Any]:
        return {key: _plain(value) for key, value in vars(self).items() if value is not None}


class AlgorithmSection(ConfigSection):
    """``tuner``, ``assessor`` or ``advisor``, ready to fill as NNI's placeholders are
    (``config.assessor.name = 'Medianstop'``, ``config.tuner.class_args['optimize_mode'] = ...``)."""

    def __init__(self) -> None:
        super().__init__(class_args={})

    def untouched(self) -> bool:
        """Nothing was set on it: it is left out of the config, as NNI drops its ``_none_`` placeholders."""
        return all(value is None or value == {} for value in vars(self).values())


class ConfigDraft(ConfigSection):
    """``ExperimentConfig`` being written: ``tuner``, ``assessor`` and ``advisor`` are ready to fill; an
    untouched assessor or advisor is not part of the config."""

    def __init__(self, platform: str | list[str]) -> None:
        service: Any = (
            [ConfigSection(platform=p) for p in platform]
            if isinstance(platform, list)
            else ConfigSection(platform=platform)
        )
        super().__init__(
            tuner=AlgorithmSection(),
            assessor=AlgorithmSection(),
            advisor=AlgorithmSection(),
            training_service=service,
        )

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        for key in ("assessor", "advisor", "tuner"):
            section = vars(self).get(key)
            # an untouched tuner stays (its error names tuner.name) unless the advisor takes its place
            keep = key == "tuner" and "advisor" not in data
            if isinstance(section, AlgorithmSection) and section.untouched() and not keep:
                data.pop(key, None)
        return data

    def build(self) -> ExperimentConfig:
        """The validated config; ConfigError lists every problem."""
        from trialfleet.config import ExperimentConfig

        return ExperimentConfig.from_dict(self.to_dict(), source="<Python experiment config>")


def _plain(value: Any) -> Any:
    if isinstance(value, ConfigSection):
        return value.to_dict()
    if hasattr(value, "model_dump"):  # a config model assigned as a whole (AlgorithmConfig, LocalConfig …)
        return value.model_dump(
            mode="json", by_alias=True, exclude_none=True, context={"include_secrets": True}
        )
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
